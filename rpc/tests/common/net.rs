//! Loopback networks for the tests: a serving node and raw clients on distinct 127.0.0.x addresses.
#![allow(dead_code)]

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use regolith_rpc::config::RateLimitsConfig;
use regolith_rpc::network::{BlockchainNetwork, NetworkSettings, RawOverlayClient};
use regolith_rpc::BlockchainRpcService;

pub const OVERLAY_ID: [u8; 32] = [0x42; 32];

pub fn addr(last: u8) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::new(127, 0, 0, last), 0))
}

pub fn server(
    ip_last: u8,
    service: BlockchainRpcService,
    rate_limits: Option<RateLimitsConfig>,
) -> BlockchainNetwork {
    let mut secret_key = [0u8; 32];
    rand::Rng::fill(&mut rand::thread_rng(), &mut secret_key);
    BlockchainNetwork::start(
        NetworkSettings {
            bind_address: addr(ip_last),
            remote_address: None,
            secret_key,
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

pub fn client(ip_last: u8, server: &BlockchainNetwork) -> RawOverlayClient {
    let info = Arc::new(server.signed_peer_info(Duration::from_secs(3600)));
    RawOverlayClient::connect(addr(ip_last), OVERLAY_ID, info, Default::default()).unwrap()
}

/// A query with a bounded wait; `None` = no answer (transport error or timeout).
pub async fn try_query(client: &RawOverlayClient, body: Bytes) -> Option<Bytes> {
    match tokio::time::timeout(Duration::from_secs(5), client.query(body)).await {
        Ok(Ok(bytes)) => Some(bytes),
        _ => None,
    }
}
