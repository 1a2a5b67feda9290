//! A fresh `regolith run` child process for the benchmarks that measure a node as a user runs it: its data
//! dir is initialised from a zerostate and bootstraps from given peers; the benchmark watches it through its
//! metrics endpoint and reads its peak RSS from /proc.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::config::{write_json, write_secret_json, DataDir};

/// A local TCP port free at the time of the call.
fn free_tcp_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// The value of a metric line `NAME{LABELS} VALUE` (or `NAME VALUE`) whose labels contain `label`.
pub(crate) fn metric(text: &str, name: &str, label: Option<&str>) -> Option<f64> {
    metric_values(text, name, label).next()
}

/// The sum of every line of a metric (all label sets).
pub(crate) fn metric_sum(text: &str, name: &str) -> f64 {
    metric_values(text, name, None).sum()
}

fn metric_values<'a>(
    text: &'a str,
    name: &'a str,
    label: Option<&'a str>,
) -> impl Iterator<Item = f64> + 'a {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(move |l| {
            l.starts_with(name)
                && matches!(l.as_bytes().get(name.len()), Some(b' ' | b'{'))
                && label.is_none_or(|label| l.contains(label))
        })
        .filter_map(|l| l.rsplit_once(' ').and_then(|(_, v)| v.parse().ok()))
}

/// Initialises `work` from `zerostate` for a node that listens on loopback (port 0), serves metrics on a
/// free port, discovers quickly, bootstraps from `peers` (signed peer infos), boots as `boot` says and, with
/// `archives` false, syncs block by block. Returns the data dir and the metrics address.
pub(crate) fn prepare(
    work: &Path,
    zerostate: &Path,
    peers: Vec<serde_json::Value>,
    archives: bool,
    boot: crate::cold_boot::BootConfig,
) -> Result<(DataDir, SocketAddr)> {
    let data = DataDir::new(work);
    crate::init::init(&data, zerostate, &Default::default())?;
    let metrics_address = SocketAddr::from(([127, 0, 0, 1], free_tcp_port()?));
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data.node_config())?)?;
    let (overlay, dht) = regolith_rpc::network::quick_discovery();
    config["listen_address"] = "127.0.0.1:0".into();
    config["metrics_address"] = metrics_address.to_string().into();
    config["overlay"] = serde_json::to_value(overlay)?;
    config["dht"] = serde_json::to_value(dht)?;
    config["sync"] = serde_json::json!({ "archives": archives });
    config["boot"] = serde_json::to_value(boot)?;
    write_secret_json(&data.node_config(), &config)?;
    let mut global: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data.global_config())?)?;
    global["bootstrap_peers"] = serde_json::Value::Array(peers);
    write_json(&data.global_config(), &global)?;
    Ok((data, metrics_address))
}

/// A running `regolith run` child (stopped with SIGTERM by [`RunningNode::stop`]).
pub(crate) struct RunningNode {
    child: Child,
    /// Its pid.
    pub(crate) pid: u32,
    /// Its metrics address.
    pub(crate) metrics: SocketAddr,
}

impl RunningNode {
    /// Starts `exe --data DATA run`, its stderr into `DATA/run.log`.
    pub(crate) fn spawn(exe: &Path, data: &DataDir, metrics: SocketAddr) -> Result<Self> {
        let log = std::fs::File::create(data.root.join("run.log"))?;
        let child = crate::devnet::run_command(exe, &data.root)
            .env("RUST_LOG", "info,tycho_network=warn")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .context("cannot start regolith run")?;
        Ok(Self {
            pid: child.id(),
            child,
            metrics,
        })
    }

    /// Its metrics page, `None` while it does not answer.
    pub(crate) fn scrape(&self) -> Option<String> {
        crate::devnet::scrape_metrics(self.metrics)
    }

    /// Its exit status, if it has exited.
    pub(crate) fn exited(&mut self) -> Result<Option<std::process::ExitStatus>> {
        Ok(self.child.try_wait()?)
    }

    /// Its peak RSS (VmHWM), MiB.
    pub(crate) fn peak_rss_mib(&self) -> Result<f64> {
        Ok(super::hostile::process_usage(self.pid)?.2)
    }

    /// SIGTERM, then waits up to 60 s for the exit (SIGKILL after that).
    pub(crate) async fn stop(mut self) -> Result<()> {
        // SAFETY: kill has no memory preconditions; the pid is our child's.
        unsafe {
            libc::kill(self.pid as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if self.child.try_wait()?.is_some() {
                return Ok(());
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
