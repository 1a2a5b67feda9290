//! Loopback networks for the tests: a serving node and raw clients on distinct 127.0.0.x addresses.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use regolith_rpc::config::RateLimitsConfig;
use regolith_rpc::network::{BlockchainNetwork, NetworkSettings, RawOverlayClient};
use regolith_rpc::BlockchainRpcService;
use regolith_test_support::net::{lists_resolved, loopback, random_secret_key};
use regolith_test_support::wait_until_async;

pub(crate) const OVERLAY_ID: [u8; 32] = [0x42; 32];

pub(crate) fn server(
    ip_last: u8,
    service: BlockchainRpcService,
    rate_limits: Option<RateLimitsConfig>,
) -> BlockchainNetwork {
    BlockchainNetwork::start(
        NetworkSettings {
            bind_address: loopback(ip_last),
            remote_address: None,
            secret_key: random_secret_key(),
            network: Default::default(),
            dht: Default::default(),
            overlay: Default::default(),
            peer_resolver: Default::default(),
            bootstrap_peers: Vec::new(),
            overlay_id: OVERLAY_ID,
            rate_limits,
        },
        service,
    )
    .unwrap()
}

pub(crate) fn client(ip_last: u8, server: &BlockchainNetwork) -> RawOverlayClient {
    let info = Arc::new(server.signed_peer_info(Duration::from_secs(3600)));
    RawOverlayClient::connect(loopback(ip_last), OVERLAY_ID, info, Default::default()).unwrap()
}

/// A query with a bounded wait; `None` = no answer (transport error or timeout).
pub(crate) async fn try_query(client: &RawOverlayClient, body: Bytes) -> Option<Bytes> {
    match tokio::time::timeout(Duration::from_secs(5), client.query(body)).await {
        Ok(Ok(bytes)) => Some(bytes),
        _ => None,
    }
}

/// Overlay and DHT periods of 1 s with 1 s jitter (§10 setup), so entries spread in seconds.
pub(crate) fn fast_settings(ip_last: u8, overlay_id: [u8; 32]) -> NetworkSettings {
    let (overlay, dht) = regolith_rpc::network::quick_discovery();
    NetworkSettings {
        bind_address: loopback(ip_last),
        remote_address: None,
        secret_key: random_secret_key(),
        network: Default::default(),
        dht,
        overlay,
        peer_resolver: Default::default(),
        bootstrap_peers: Vec::new(),
        overlay_id,
        rate_limits: None,
    }
}

/// A node of overlay `overlay_id` with fast periods, serving `service`.
pub(crate) fn fast_node<S>(ip_last: u8, overlay_id: [u8; 32], service: S) -> BlockchainNetwork
where
    S: tycho_network::Service<
            tycho_network::ServiceRequest,
            QueryResponse = tycho_network::Response,
        > + Send
        + Sync
        + 'static,
{
    BlockchainNetwork::start(fast_settings(ip_last, overlay_id), service).unwrap()
}

/// Adds every node's signed peer info to every other node's DHT, then waits until every overlay lists every
/// other peer with a resolved address.
pub(crate) async fn connect_all(nodes: &[&BlockchainNetwork]) {
    for a in nodes {
        let info = Arc::new(a.signed_peer_info(Duration::from_secs(3600)));
        for b in nodes {
            if a.peer_id() != b.peer_id() {
                b.dht
                    .make_client(&b.network)
                    .add_peer(info.clone())
                    .unwrap();
            }
        }
    }
    wait_until_async(
        "the overlay did not converge in 120 s",
        Duration::from_secs(120),
        Duration::from_millis(200),
        async || {
            nodes.iter().all(|n| {
                nodes
                    .iter()
                    .filter(|o| o.peer_id() != n.peer_id())
                    .all(|o| lists_resolved(&n.overlay, &o.peer_id()))
            })
        },
    )
    .await;
}
