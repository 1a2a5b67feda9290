//! regolith blockchain RPC (rpc.md): the serving half (§1–§6, §9): the `blockchain.*` TL protocol
//! ([`proto`]), the [`BlockchainRpcService`] that answers it from a [`BlockStorageView`] and an
//! [`RpcDataProvider`] (storage, S3 or hybrid), external-message broadcast receiving ([`broadcast`]) and the
//! ingress rate-limit policy ([`rate_limit`]) for tycho-network's public overlay; and the downloading half
//! ([`client`]): the overlay client and the blockchain RPC client.

mod answer_cache;
pub mod broadcast;
pub mod client;
pub mod config;
pub mod error;
pub mod network;
pub mod proto;
pub mod providers;
pub mod rate_limit;
pub mod service;
pub mod view;

pub use broadcast::{BroadcastListener, NoopBroadcastListener};
pub use client::{BlockchainRpcClient, ClientError, DataRequirement, PublicOverlayClient};
pub use config::{BlockchainRpcServiceConfig, RateLimitsConfig, S3ClientConfig, S3ProxyConfig};
pub use error::{ConfigError, ProviderError, ProviderResult};
pub use network::{BlockchainNetwork, NetworkSettings, RawOverlayClient};
pub use proto::overlay_id;
pub use providers::{
    ArchiveLookup, HybridProvider, RpcDataProvider, S3Provider, StateChunkRequest, StateInfo,
    StateKind, StatePart, StatePartInfo, StorageProvider,
};
pub use rate_limit::RpcRateLimitPolicy;
pub use service::BlockchainRpcService;
pub use view::{BlockFullParts, BlockStorageView, HandleFlags};

/// The name of the blockchain public overlay (metrics label).
pub const OVERLAY_NAME: &str = "blockchain_rpc";

/// Registers the service's and the overlay client's metrics with the installed recorder, per method where
/// they are labelled by method, so that a dashboard shows 0, not "no data", before their first event (the
/// per-neighbour gauges appear with the neighbours, the answer codes but `ok` with the first such answer).
pub fn register_metrics() {
    let _ = metrics::counter!("regolith_rpc_unknown_queries_total");
    let _ = metrics::counter!("regolith_rpc_blocks_served_total");
    for method in proto::Method::ALL {
        let _ = metrics::counter!("regolith_rpc_requests_total", "method" => method.name());
        let _ = metrics::counter!("regolith_rpc_bytes_served_total", "method" => method.name());
        let _ = metrics::counter!("regolith_rpc_answers_total", "method" => method.name(), "code" => "ok");
        let _ = metrics::histogram!("regolith_rpc_request_seconds", "method" => method.name());
    }
    let _ = metrics::gauge!("regolith_overlay_neighbours");
    let _ = metrics::gauge!("regolith_overlay_broadcast_targets");
}
