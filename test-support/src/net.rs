//! Loopback network helpers for tests that run tycho-network nodes (feature `net`): addresses on
//! 127.0.0.x with port 0, fresh keys and overlay ids, and what an overlay lists.

use std::net::{Ipv4Addr, SocketAddr};

use rand::Rng;
use tycho_network::{PeerId, PublicOverlay};

/// 127.0.0.`last` with port 0 (the node binds any free port); distinct `last`s keep the nodes of a test,
/// and the per-IP limits of the service, apart.
pub fn loopback(last: u8) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::new(127, 0, 0, last), 0))
}

/// A fresh random node secret key.
pub fn random_secret_key() -> [u8; 32] {
    let mut key = [0u8; 32];
    rand::thread_rng().fill(&mut key);
    key
}

/// A fresh random overlay id: scenarios in separate overlays do not see each other's nodes.
pub fn random_overlay_id() -> [u8; 32] {
    let mut id = [0u8; 32];
    rand::thread_rng().fill(&mut id);
    id
}

/// Whether `overlay` lists `peer` with a resolved address.
pub fn lists_resolved(overlay: &PublicOverlay, peer: &PeerId) -> bool {
    overlay
        .read_entries()
        .iter()
        .any(|e| e.entry.peer_id == *peer && e.resolver_handle.is_resolved())
}
