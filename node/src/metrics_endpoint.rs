//! The Prometheus metrics endpoint on a local HTTP port, with every metric of the node registered when it
//! starts (a dashboard shows 0, not "no data", for what has not happened yet).

use std::net::SocketAddr;

use anyhow::{Context, Result};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};

/// Latency buckets (seconds) of the request histograms.
const LATENCY_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

/// Installs the global recorder, registers the metrics of the node and the libraries under it, and serves
/// `/metrics` at `address` (from the current tokio runtime).
pub fn install(address: SocketAddr) -> Result<()> {
    PrometheusBuilder::new()
        .with_http_listener(address)
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), LATENCY_BUCKETS)
        .context("invalid histogram buckets")?
        .install()
        .with_context(|| format!("cannot serve metrics on {address}"))?;
    register_metrics();
    Ok(())
}

/// Registers every metric the node exports whose series are known before their first event.
fn register_metrics() {
    regolith_storage::register_metrics();
    regolith_state::register_metrics();
    regolith_queue::register_metrics();
    regolith_api::register_metrics();
    regolith_rpc::register_metrics();
    crate::apply::group_commit::register_metrics();
    crate::sync::register_metrics();
    crate::gc::register_metrics();
    crate::live::register_metrics();
}
