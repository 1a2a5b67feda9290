//! The tycho-network stack around the blockchain public overlay (rpc.md Appendix A): QUIC network, DHT,
//! overlay service, peer resolver and the `blockchain_rpc` overlay with our service and ingress policy.
//! Also a raw overlay client, used by tests and the RPC benchmark to send bodies as any peer would.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::{ready, Ready};
use tycho_network::{
    DhtConfig, DhtService, KnownPeerHandle, Network, NetworkConfig, OverlayConfig, OverlayId,
    OverlayService, PeerId, PeerInfo, PeerResolver, PeerResolverConfig, PublicOverlay, Request,
    Response, Router, Service, ServiceRequest,
};

use crate::config::RateLimitsConfig;
use crate::rate_limit::RpcRateLimitPolicy;
use crate::OVERLAY_NAME;

/// Public overlay entry TTL (§9, a constant).
pub const OVERLAY_ENTRY_TTL: Duration = Duration::from_secs(3600);
/// Public overlay minimum capacity (§9, a constant).
pub const OVERLAY_MIN_CAPACITY: usize = 100;

/// A failure to start the network stack.
#[derive(Debug, thiserror::Error)]
pub enum NetworkError {
    /// Binding or building the QUIC endpoint failed.
    #[error("cannot start the network on {address}: {source}")]
    Bind {
        /// The bind address.
        address: SocketAddr,
        /// The cause.
        source: anyhow::Error,
    },
    /// A bootstrap peer info is invalid.
    #[error("invalid bootstrap peers: {0}")]
    Bootstrap(anyhow::Error),
    /// A known peer could not be added.
    #[error("cannot add peer {0}")]
    KnownPeer(String),
}

/// What the network stack is built from.
#[derive(Clone)]
pub struct NetworkSettings {
    /// QUIC bind address.
    pub bind_address: SocketAddr,
    /// The address announced to peers (defaults to the bind address).
    pub remote_address: Option<SocketAddr>,
    /// The node's ed25519 secret key.
    pub secret_key: [u8; 32],
    /// `network`.
    pub network: NetworkConfig,
    /// `dht`.
    pub dht: DhtConfig,
    /// `overlay`.
    pub overlay: OverlayConfig,
    /// `peer_resolver`.
    pub peer_resolver: PeerResolverConfig,
    /// Signed infos of bootstrap peers.
    pub bootstrap_peers: Vec<PeerInfo>,
    /// The blockchain overlay id (§2.8).
    pub overlay_id: [u8; 32],
    /// `blockchain_rpc_service.rate_limits`.
    pub rate_limits: Option<RateLimitsConfig>,
}

/// A running node of the blockchain overlay.
pub struct BlockchainNetwork {
    /// The QUIC network.
    pub network: Network,
    /// The DHT.
    pub dht: DhtService,
    /// The overlay service.
    pub overlay_service: OverlayService,
    /// The `blockchain_rpc` public overlay.
    pub overlay: PublicOverlay,
    /// The peer resolver the overlay uses.
    pub peer_resolver: PeerResolver,
}

impl BlockchainNetwork {
    /// Starts QUIC, DHT, the overlay service and the public overlay serving `service`.
    pub fn start<S>(settings: NetworkSettings, service: S) -> Result<Self, NetworkError>
    where
        S: Service<ServiceRequest, QueryResponse = Response> + Send + Sync + 'static,
    {
        let peer_id = peer_id_of(&settings.secret_key);
        let (dht_tasks, dht) = DhtService::builder(peer_id)
            .with_config(settings.dht.clone())
            .build();
        let (overlay_tasks, overlay_service) = OverlayService::builder(peer_id)
            .with_config(settings.overlay.clone())
            .with_dht_service(dht.clone())
            .build();
        let router = Router::builder()
            .route(dht.clone())
            .route(overlay_service.clone())
            .build();
        let mut builder = Network::builder()
            .with_config(settings.network.clone())
            .with_private_key(settings.secret_key);
        if let Some(remote) = settings.remote_address {
            builder = builder.with_remote_addr(remote);
        }
        let network = builder
            .build(settings.bind_address, router)
            .map_err(|source| NetworkError::Bind {
                address: settings.bind_address,
                source,
            })?;
        dht_tasks
            .spawn(&network, &settings.bootstrap_peers)
            .map_err(NetworkError::Bootstrap)?;
        overlay_tasks.spawn(&network);
        let peer_resolver = dht
            .make_peer_resolver()
            .with_config(settings.peer_resolver.clone())
            .build(&network);
        let overlay = PublicOverlay::builder(OverlayId(settings.overlay_id))
            .named(OVERLAY_NAME)
            .with_entry_ttl(OVERLAY_ENTRY_TTL)
            .with_min_capacity(OVERLAY_MIN_CAPACITY)
            .with_peer_resolver(peer_resolver.clone())
            .with_rate_limiter(RpcRateLimitPolicy::overlay_limiter(
                settings.rate_limits.as_ref(),
            ))
            .build(service);
        overlay_service.add_public_overlay(&overlay);
        tracing::info!(
            %peer_id,
            local_addr = %network.local_addr(),
            overlay_id = %hex::encode(settings.overlay_id),
            "blockchain overlay started"
        );
        Ok(Self {
            network,
            dht,
            overlay_service,
            overlay,
            peer_resolver,
        })
    }

    /// This node's peer id.
    pub fn peer_id(&self) -> PeerId {
        *self.network.peer_id()
    }

    /// This node's peer info signed with `created_at = now` and a finite `ttl` (§9).
    pub fn signed_peer_info(&self, ttl: Duration) -> PeerInfo {
        let ttl = u32::try_from(ttl.as_secs()).unwrap_or(u32::MAX).max(1);
        self.network.sign_peer_info(now_sec(), ttl)
    }
}

/// Overlay and DHT settings with 1 s periods and 1 s jitter for store, exchange, collect, discovery,
/// announce and refresh: nodes on one machine (tests, benchmarks, a devnet) find each other in seconds. The
/// crate's defaults (minutes) suit a real network.
pub fn quick_discovery() -> (OverlayConfig, DhtConfig) {
    let second = Duration::from_secs(1);
    let overlay = OverlayConfig {
        public_overlay_peer_store_period: second,
        public_overlay_peer_store_max_jitter: second,
        public_overlay_peer_exchange_period: second,
        public_overlay_peer_exchange_max_jitter: second,
        public_overlay_peer_collect_period: second,
        public_overlay_peer_collect_max_jitter: second,
        public_overlay_peer_discovery_period: second,
        public_overlay_peer_discovery_max_jitter: second,
        ..Default::default()
    };
    let dht = DhtConfig {
        local_info_announce_period: second,
        local_info_announce_period_max_jitter: second,
        routing_table_refresh_period: second,
        routing_table_refresh_period_max_jitter: second,
        ..Default::default()
    };
    (overlay, dht)
}

/// Seconds since the Unix epoch.
pub fn now_sec() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as u32)
}

/// A service that answers nothing: for nodes that only download (the raw client, `regolith p2p`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Silent;

impl Service<ServiceRequest> for Silent {
    type QueryResponse = Response;
    type OnQueryFuture = Ready<Option<Response>>;
    type OnMessageFuture = Ready<()>;

    fn on_query(&self, _: ServiceRequest) -> Self::OnQueryFuture {
        ready(None)
    }

    fn on_message(&self, _: ServiceRequest) -> Self::OnMessageFuture {
        ready(())
    }
}

/// A bare overlay client of one known server: sends raw request bodies through tycho-network.
pub struct RawOverlayClient {
    network: Network,
    overlay: PublicOverlay,
    server: PeerId,
    _server_handle: KnownPeerHandle,
}

impl RawOverlayClient {
    /// Binds a client network at `bind_address` that knows `server`.
    pub fn connect(
        bind_address: SocketAddr,
        overlay_id: [u8; 32],
        server: Arc<PeerInfo>,
        network_config: NetworkConfig,
    ) -> Result<Self, NetworkError> {
        let network = Network::builder()
            .with_config(network_config)
            .with_random_private_key()
            .build(bind_address, Router::builder().build())
            .map_err(|source| NetworkError::Bind {
                address: bind_address,
                source,
            })?;
        let server_id = server.id;
        let handle = network
            .known_peers()
            .insert(server, false)
            .map_err(|e| NetworkError::KnownPeer(e.to_string()))?;
        let overlay = PublicOverlay::builder(OverlayId(overlay_id)).build(Silent);
        Ok(Self {
            network,
            overlay,
            server: server_id,
            _server_handle: handle,
        })
    }

    /// Sends a query body; an error is a transport error (including "no answer").
    pub async fn query(&self, body: Bytes) -> anyhow::Result<Bytes> {
        let request = Request {
            version: Default::default(),
            body,
        };
        Ok(self
            .overlay
            .query(&self.network, &self.server, request)
            .await?
            .body)
    }

    /// Sends a one-way overlay message.
    pub async fn send(&self, body: Bytes) -> anyhow::Result<()> {
        let request = Request {
            version: Default::default(),
            body,
        };
        self.overlay
            .send(&self.network, &self.server, request)
            .await
    }

    /// The client's network.
    pub fn network(&self) -> &Network {
        &self.network
    }
}

/// The peer id of a secret key.
pub fn peer_id_of(secret_key: &[u8; 32]) -> PeerId {
    let keypair = tycho_crypto::ed25519::KeyPair::from(
        &tycho_crypto::ed25519::SecretKey::from_bytes(*secret_key),
    );
    PeerId::from(keypair.public_key)
}

/// Signs a peer info for `address` without a running network (`regolith init`): `created_at = now`,
/// `expires_at = now + ttl` (a finite TTL, never 0).
pub fn sign_peer_info(secret_key: &[u8; 32], address: SocketAddr, ttl: Duration) -> PeerInfo {
    let keypair = tycho_crypto::ed25519::KeyPair::from(
        &tycho_crypto::ed25519::SecretKey::from_bytes(*secret_key),
    );
    let now = now_sec();
    let ttl = u32::try_from(ttl.as_secs()).unwrap_or(u32::MAX).max(1);
    let mut info = PeerInfo {
        id: PeerId::from(keypair.public_key),
        address_list: vec![address.into()].into_boxed_slice(),
        created_at: now,
        expires_at: now.saturating_add(ttl),
        signature: Box::new([0; 64]),
    };
    *info.signature = keypair.sign_tl(&info);
    info
}
