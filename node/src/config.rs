//! Node configuration files: `<data>/node.json` (node key and local settings) and `<data>/global.json`
//! (the global config in the Tycho node's JSON format). Both are written with temp file + fsync + rename
//! ([`crate::files`]). Each section is declared by the module it configures; this file composes them, and no
//! module below it imports it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use regolith_formats::{BlockId, HashBytes, ShardIdent};
use regolith_rpc::config::{
    BlockchainRpcClientConfig, BlockchainRpcServiceConfig, PublicOverlayClientConfig,
    S3ClientConfig,
};
use regolith_storage::StorageConfig;
use serde::{Deserialize, Serialize};
use tycho_network::{DhtConfig, NetworkConfig, OverlayConfig, PeerInfo, PeerResolverConfig};

use crate::files::{check_secret_file_mode, parse_json, UnknownFields};

/// `<data>/node.json`. Every section but the key has a default, so older files keep working.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeConfig {
    /// The node's ed25519 secret key (hex); its public key is the node's peer id.
    pub node_secret_key: String,
    /// Block storage settings (`root_dir` is always the data directory).
    #[serde(default)]
    pub storage: StorageConfig,
    /// Internal message queue settings (queue.md §8).
    #[serde(default)]
    pub internal_queue: regolith_queue::QueueConfig,
    /// QUIC listen address of the node.
    #[serde(default = "default_listen_address")]
    pub listen_address: SocketAddr,
    /// The address announced to peers; defaults to the listen address (127.0.0.1 if unspecified).
    #[serde(default)]
    pub public_address: Option<SocketAddr>,
    /// Local HTTP address of the Prometheus metrics endpoint; `null` disables it.
    #[serde(default = "default_metrics_address")]
    pub metrics_address: Option<SocketAddr>,
    /// TTL of the peer info `init` signs into the global config (finite, never 0).
    #[serde(default = "default_peer_info_ttl", with = "humantime_serde")]
    pub peer_info_ttl: Duration,
    /// tycho-network settings.
    #[serde(default, serialize_with = "exact_sizes::network")]
    pub network: NetworkConfig,
    /// DHT settings.
    #[serde(default, serialize_with = "exact_sizes::dht")]
    pub dht: DhtConfig,
    /// Overlay settings (a zero jitter is rejected).
    #[serde(default)]
    pub overlay: OverlayConfig,
    /// Peer resolver settings.
    #[serde(default)]
    pub peer_resolver: PeerResolverConfig,
    /// The RPC service.
    #[serde(default)]
    pub blockchain_rpc_service: BlockchainRpcServiceConfig,
    /// The blockchain RPC client (§7).
    #[serde(default)]
    pub blockchain_rpc_client: BlockchainRpcClientConfig,
    /// The overlay client: neighbours and validator broadcast targets (§8).
    #[serde(default)]
    pub public_overlay_client: PublicOverlayClientConfig,
    /// S3 for archives and persistent states (with `blockchain_rpc_service.s3_proxy`: the hybrid provider).
    #[serde(default)]
    pub s3_client: Option<S3ClientConfig>,
    /// How `run` follows the chain from its peers.
    #[serde(default)]
    pub sync: crate::sync::SyncConfig,
    /// Local HTTP address of the account API (JSON-RPC and protobuf) and of `POST /v1/messages`; `null` turns
    /// it off.
    #[serde(default)]
    pub api_address: Option<SocketAddr>,
    /// The account API's body limit, timeout and per-IP rate limit.
    #[serde(default)]
    pub api: regolith_api::ApiSettings,
    /// How the shard states are kept: checkpoints and states GC (state.md §7.3, §7.5).
    #[serde(default)]
    pub states: regolith_state::StatesConfig,
    /// How a node with only the zerostate gets its first applied mc block (`run --boot` overrides it).
    #[serde(default)]
    pub boot: crate::boot::cold_boot::BootConfig,
}

/// tycho-network serialises its byte sizes rounded (`8 MiB` → `"8.4 MB"`, which reads back as 8 400 000 B), so
/// `node.json` would change the frame limit and the DHT capacity on every write. These write them exactly.
mod exact_sizes {
    use serde::ser::Error;
    use serde::{Serialize, Serializer};
    use tycho_network::{DhtConfig, NetworkConfig};

    fn with_exact<S: Serializer>(
        value: &impl Serialize,
        field: &str,
        size: &bytesize::ByteSize,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let mut json = serde_json::to_value(value).map_err(S::Error::custom)?;
        if let Some(object) = json.as_object_mut() {
            let text = regolith_storage::config::exact_byte_size::to_text(size);
            object.insert(field.to_string(), serde_json::Value::String(text));
        }
        json.serialize(s)
    }

    pub(super) fn network<S: Serializer>(config: &NetworkConfig, s: S) -> Result<S::Ok, S::Error> {
        with_exact(config, "max_frame_size", &config.max_frame_size, s)
    }

    pub(super) fn dht<S: Serializer>(config: &DhtConfig, s: S) -> Result<S::Ok, S::Error> {
        with_exact(
            config,
            "max_storage_capacity",
            &config.max_storage_capacity,
            s,
        )
    }
}

/// The default QUIC listen address.
pub fn default_listen_address() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 30310))
}

/// The default metrics address.
pub fn default_metrics_address() -> Option<SocketAddr> {
    Some(SocketAddr::from(([127, 0, 0, 1], 30311)))
}

fn default_peer_info_ttl() -> Duration {
    Duration::from_secs(30 * 24 * 3600)
}

impl NodeConfig {
    /// A fresh config with a key and defaults rooted at `root`.
    pub fn new(node_secret_key: [u8; 32], root: &Path) -> Self {
        Self {
            node_secret_key: hex::encode(node_secret_key),
            storage: StorageConfig::new(root),
            internal_queue: Default::default(),
            listen_address: default_listen_address(),
            public_address: None,
            metrics_address: default_metrics_address(),
            peer_info_ttl: default_peer_info_ttl(),
            network: NetworkConfig::default(),
            dht: DhtConfig::default(),
            overlay: OverlayConfig::default(),
            peer_resolver: PeerResolverConfig::default(),
            blockchain_rpc_service: BlockchainRpcServiceConfig::default(),
            blockchain_rpc_client: BlockchainRpcClientConfig::default(),
            public_overlay_client: PublicOverlayClientConfig::default(),
            s3_client: None,
            sync: Default::default(),
            states: Default::default(),
            boot: Default::default(),
            api_address: None,
            api: Default::default(),
        }
    }

    /// The secret key bytes.
    pub fn secret_key(&self) -> Result<[u8; 32]> {
        let bytes = hex::decode(&self.node_secret_key).context("node_secret_key is not hex")?;
        bytes
            .try_into()
            .map_err(|_| anyhow::anyhow!("node_secret_key must be 32 bytes"))
    }

    /// The address other nodes reach this one at.
    pub fn announced_address(&self) -> SocketAddr {
        let mut addr = self.public_address.unwrap_or(self.listen_address);
        if addr.ip().is_unspecified() {
            addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
        }
        addr
    }

    /// Checks values serde cannot.
    pub fn validate(&self) -> Result<()> {
        regolith_rpc::config::validate_overlay(&self.overlay)?;
        regolith_rpc::config::validate(&self.blockchain_rpc_service, self.s3_client.as_ref())?;
        anyhow::ensure!(!self.peer_info_ttl.is_zero(), "peer_info_ttl must not be 0");
        self.storage.validate()?;
        self.states.validate()?;
        self.api.validate().map_err(anyhow::Error::msg)?;
        Ok(())
    }
}

/// The zerostate id as Tycho writes it in the global config.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct ZerostateId {
    /// Always 0.
    pub seqno: u32,
    /// Representation hash of the zerostate root cell.
    pub root_hash: HashBytes,
    /// BLAKE3 of the zerostate file.
    pub file_hash: HashBytes,
}

impl ZerostateId {
    /// The masterchain block id of the zerostate.
    pub fn as_block_id(&self) -> BlockId {
        BlockId {
            shard: ShardIdent::MASTERCHAIN,
            seqno: self.seqno,
            root_hash: self.root_hash,
            file_hash: self.file_hash,
        }
    }
}

/// `<data>/global.json`: bootstrap peers and the zerostate id.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GlobalConfig {
    /// Signed peer infos of bootstrap nodes (Tycho's format).
    #[serde(default)]
    pub bootstrap_peers: Vec<serde_json::Value>,
    /// The zerostate of the network.
    pub zerostate: ZerostateId,
}

impl GlobalConfig {
    /// The bootstrap peers as peer infos; entries that do not parse are reported.
    pub fn parse_bootstrap_peers(&self) -> Result<Vec<PeerInfo>> {
        self.bootstrap_peers
            .iter()
            .enumerate()
            .map(|(i, v)| {
                serde_json::from_value(v.clone())
                    .with_context(|| format!("bootstrap_peers[{i}] is not a peer info"))
            })
            .collect()
    }
}

/// Paths inside a data directory.
#[derive(Debug, Clone)]
pub struct DataDir {
    /// The data directory.
    pub root: PathBuf,
}

impl DataDir {
    /// A data directory at `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// `node.json`.
    pub fn node_config(&self) -> PathBuf {
        self.root.join("node.json")
    }

    /// `global.json`.
    pub fn global_config(&self) -> PathBuf {
        self.root.join("global.json")
    }

    /// `states/`.
    pub fn states(&self) -> PathBuf {
        self.root.join("states")
    }

    /// Whether the directory was initialised.
    pub fn is_initialised(&self) -> bool {
        self.node_config().exists() && self.global_config().exists()
    }

    /// Loads `node.json`, with the storage rooted at this directory.
    pub fn load_node_config(&self) -> Result<NodeConfig> {
        let path = self.node_config();
        let text = std::fs::read_to_string(&path).with_context(|| {
            format!(
                "cannot read {} (run `regolith init --zerostate FILE --data {}` first)",
                path.display(),
                self.root.display()
            )
        })?;
        check_secret_file_mode(&path)?;
        let mut config: NodeConfig = parse_json(&text, &path, UnknownFields::Reject)?;
        config.storage.root_dir = self.root.clone();
        config
            .validate()
            .with_context(|| format!("{} is not valid", path.display()))?;
        Ok(config)
    }

    /// Loads `global.json`.
    pub fn load_global_config(&self) -> Result<GlobalConfig> {
        let path = self.global_config();
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        // The global config is in the Tycho node's format, which has fields regolith does not use.
        parse_json(&text, &path, UnknownFields::Log)
    }
}
