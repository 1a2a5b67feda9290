//! Configuration of blockchain RPC (rpc.md §9). Section and field names match the reference node so a
//! stock section parses; every section has `#[serde(default)]` except where §9 makes fields required.

use std::net::IpAddr;
use std::num::NonZeroU32;
use std::time::Duration;

use bytesize::ByteSize;
use serde::{Deserialize, Serialize};
use tycho_util::rate_limit::{RateLimitConfig, TrafficLimit};

use crate::error::ConfigError;

/// `blockchain_rpc_service`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BlockchainRpcServiceConfig {
    /// Ceiling of getNextKeyBlockIds (§3.4).
    pub max_key_blocks_list_len: usize,
    /// false → state info notFound, state chunks err 1.
    pub serve_persistent_states: bool,
    /// Answer the regolith extension `regolith.getNextBlocksFull` (false: leave it unanswered, as a stock
    /// node does).
    pub serve_next_blocks_batch: bool,
    /// Bytes of serialized getBlockFull answers kept for repeats (the newest blocks every follower asks
    /// for); 0 turns the cache off.
    #[serde(with = "regolith_storage::config::exact_byte_size")]
    pub block_full_cache_size: ByteSize,
    /// The ingress policy (§6); `null` = no limiter.
    pub rate_limits: Option<RateLimitsConfig>,
    /// S3 proxy limits; with `s3_client` present it turns on the hybrid provider.
    pub s3_proxy: Option<S3ProxyConfig>,
}

impl Default for BlockchainRpcServiceConfig {
    fn default() -> Self {
        Self {
            max_key_blocks_list_len: 8,
            serve_persistent_states: true,
            serve_next_blocks_batch: true,
            block_full_cache_size: ByteSize::mib(32),
            rate_limits: None,
            s3_proxy: None,
        }
    }
}

/// `blockchain_rpc_service.rate_limits` (§6).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct RateLimitsConfig {
    /// The limiter engine settings (tycho-util's `RateLimitConfig`).
    pub limiter: RateLimitConfig,
    /// IPs that bypass the limiter.
    pub whitelist: Vec<IpAddr>,
    /// Per-class limits.
    pub traffic: TrafficConfig,
}

/// Per-class traffic limits (both values of each limit are required and non-zero).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TrafficConfig {
    /// Ping, infos, archive and block-data chunks.
    pub light_queries: TrafficLimit,
    /// Full blocks, key blocks, proofs, state chunks.
    pub heavy_queries: TrafficLimit,
    /// External-message broadcasts.
    pub broadcasts: TrafficLimit,
}

fn limit(rate: u32, burst: u32) -> TrafficLimit {
    TrafficLimit::new(
        NonZeroU32::new(rate).unwrap_or(NonZeroU32::MIN),
        NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN),
    )
}

impl Default for TrafficConfig {
    fn default() -> Self {
        Self {
            light_queries: limit(20, 20),
            heavy_queries: limit(10, 10),
            broadcasts: limit(20, 20),
        }
    }
}

/// `blockchain_rpc_service.s3_proxy`: both fields required.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct S3ProxyConfig {
    /// Requests per second (≥ 1), process-wide.
    pub rate_limit: u32,
    /// Bytes per second; 0 = unlimited.
    #[serde(with = "regolith_storage::config::exact_byte_size")]
    pub bandwidth_limit: ByteSize,
}

/// `s3_client`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct S3ClientConfig {
    /// Region (required).
    pub region: String,
    /// Endpoint URL (required).
    pub endpoint: String,
    /// Bucket (required).
    pub bucket: String,
    /// Prefix of archive keys.
    #[serde(default)]
    pub archive_key_prefix: String,
    /// Prefix of state keys.
    #[serde(default)]
    pub state_key_prefix: String,
    /// Credentials; `null` = unsigned requests.
    #[serde(default)]
    pub credentials: Option<S3Credentials>,
    /// Chunk size (1 KiB..4 GiB); the served value is capped by the frame limit (§4.5).
    #[serde(
        default = "default_s3_chunk",
        with = "regolith_storage::config::exact_byte_size"
    )]
    pub chunk_size: ByteSize,
    /// Kept for compatibility.
    #[serde(default = "default_download_retries")]
    pub download_retries: u32,
}

fn default_s3_chunk() -> ByteSize {
    ByteSize::mib(1)
}

fn default_download_retries() -> u32 {
    10
}

/// S3 credentials; unknown fields are rejected.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct S3Credentials {
    /// Access key id.
    pub access_key: String,
    /// Secret key.
    pub secret_key: String,
    /// Optional session token.
    #[serde(default)]
    pub token: Option<String>,
}

/// `blockchain_rpc_client`: the blockchain RPC client (§7).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BlockchainRpcClientConfig {
    /// Lower bound of the adaptive broadcast timeout.
    #[serde(with = "humantime_serde")]
    pub min_broadcast_timeout: Duration,
    /// tooNew answers needed for TooNew.
    pub too_new_archive_threshold: usize,
    /// Total attempts per chunk.
    pub download_retries: usize,
    /// Neighbours tried per block download.
    pub max_block_download_peers: usize,
    /// Request history capacities.
    pub request_history_size: RequestHistorySize,
    /// The largest block accepted, decompressed; also the largest entry of an archive. The decompressor
    /// stops at this size.
    #[serde(with = "regolith_storage::config::exact_byte_size")]
    pub max_block_size: ByteSize,
    /// The largest archive accepted, as announced (compressed) by getArchiveInfo.
    #[serde(with = "regolith_storage::config::exact_byte_size")]
    pub max_archive_size: ByteSize,
    /// The largest archive accepted once decompressed (it is spilled to disk, never held in memory).
    #[serde(with = "regolith_storage::config::exact_byte_size")]
    pub max_archive_decompressed_size: ByteSize,
    /// The largest persistent shard state (or part) accepted, decompressed (and so as announced).
    #[serde(with = "regolith_storage::config::exact_byte_size")]
    pub max_persistent_state_size: ByteSize,
    /// The largest persistent queue state accepted, decompressed (and so as announced).
    #[serde(with = "regolith_storage::config::exact_byte_size")]
    pub max_queue_state_size: ByteSize,
    /// A download whose rate stays below this many bytes per second ...
    #[serde(with = "regolith_storage::config::exact_byte_size")]
    pub min_download_rate: ByteSize,
    /// ... over a whole window of this length is abandoned.
    #[serde(with = "humantime_serde")]
    pub slow_download_window: Duration,
}

impl Default for BlockchainRpcClientConfig {
    fn default() -> Self {
        Self {
            min_broadcast_timeout: Duration::from_millis(100),
            too_new_archive_threshold: 4,
            download_retries: 10,
            max_block_download_peers: 3,
            request_history_size: RequestHistorySize::default(),
            max_block_size: ByteSize::mib(64),
            max_archive_size: ByteSize::gib(4),
            max_archive_decompressed_size: ByteSize::gib(16),
            max_persistent_state_size: ByteSize::gib(64),
            max_queue_state_size: ByteSize::gib(4),
            min_download_rate: ByteSize::kib(16),
            slow_download_window: Duration::from_secs(60),
        }
    }
}

/// Capacities of the per-operation request histories (`null` disables one).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RequestHistorySize {
    /// getBlockFull.
    pub get_block_full: Option<usize>,
    /// getNextBlockFull.
    pub get_next_block_full: Option<usize>,
    /// getKeyBlockProof.
    pub get_key_block_proof: Option<usize>,
    /// getZerostateProof.
    pub get_zerostate_proof: Option<usize>,
    /// getPersistent*StateInfo.
    pub get_persistent_state_info: Option<usize>,
    /// getArchiveInfo.
    pub get_archive_info: Option<usize>,
}

impl Default for RequestHistorySize {
    fn default() -> Self {
        Self {
            get_block_full: Some(20),
            get_next_block_full: Some(20),
            get_key_block_proof: Some(20),
            get_zerostate_proof: Some(40),
            get_persistent_state_info: Some(40),
            get_archive_info: Some(20),
        }
    }
}

/// `public_overlay_client` (§8, §9): the neighbour set and the validator broadcast targets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct PublicOverlayClientConfig {
    /// The neighbour set.
    pub neighbors: NeighborsConfig,
    /// Validator broadcast targets.
    pub validators: ValidatorsConfig,
}

/// `public_overlay_client.neighbors`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NeighborsConfig {
    /// Period of the update task.
    #[serde(with = "humantime_serde")]
    pub update_interval: Duration,
    /// Period of the ping task.
    #[serde(with = "humantime_serde")]
    pub ping_interval: Duration,
    /// Period of the apply task.
    #[serde(with = "humantime_serde")]
    pub apply_score_interval: Duration,
    /// Period of the neighbour metrics.
    #[serde(with = "humantime_serde")]
    pub update_metrics_interval: Duration,
    /// Neighbours kept.
    pub keep: usize,
    /// Accepted for compatibility, unused.
    pub max_ping_tasks: usize,
    /// Initial RTT of a neighbour.
    #[serde(with = "humantime_serde")]
    pub default_roundtrip: Duration,
    /// Timeout of a one-way send.
    #[serde(with = "humantime_serde")]
    pub send_timeout: Duration,
    /// Timeout of a query.
    #[serde(with = "humantime_serde")]
    pub query_timeout: Duration,
    /// Whether the neighbour metrics are exported.
    pub enable_metrics: bool,
    /// How long a neighbour that sent bad data stays out at its first offence; each repeat doubles it.
    #[serde(with = "humantime_serde")]
    pub ban_duration: Duration,
    /// The longest ban.
    #[serde(with = "humantime_serde")]
    pub max_ban_duration: Duration,
}

impl Default for NeighborsConfig {
    fn default() -> Self {
        Self {
            update_interval: Duration::from_secs(120),
            ping_interval: Duration::from_secs(30),
            apply_score_interval: Duration::from_secs(10),
            update_metrics_interval: Duration::from_secs(5),
            keep: 5,
            max_ping_tasks: 5,
            default_roundtrip: Duration::from_millis(300),
            send_timeout: Duration::from_millis(500),
            query_timeout: Duration::from_secs(1),
            enable_metrics: true,
            ban_duration: Duration::from_secs(600),
            max_ban_duration: Duration::from_secs(24 * 3600),
        }
    }
}

/// `public_overlay_client.validators`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ValidatorsConfig {
    /// Period of the tracking task.
    #[serde(with = "humantime_serde")]
    pub ping_interval: Duration,
    /// Timeout of one validator ping.
    #[serde(with = "humantime_serde")]
    pub ping_timeout: Duration,
    /// Targets kept.
    pub keep: usize,
    /// Accepted for compatibility, unused.
    pub max_ping_tasks: usize,
    /// Upper bound of the adaptive broadcast timeout (§5.2).
    #[serde(with = "humantime_serde")]
    pub send_timeout: Duration,
}

impl Default for ValidatorsConfig {
    fn default() -> Self {
        Self {
            ping_interval: Duration::from_secs(60),
            ping_timeout: Duration::from_secs(1),
            keep: 5,
            max_ping_tasks: 5,
            send_timeout: Duration::from_millis(500),
        }
    }
}

/// Checks the values serde cannot (§9): S3 rate ≥ 1, S3 chunk in 1 KiB..=4 GiB.
pub fn validate(
    service: &BlockchainRpcServiceConfig,
    s3_client: Option<&S3ClientConfig>,
) -> Result<(), ConfigError> {
    if let Some(proxy) = &service.s3_proxy {
        if proxy.rate_limit == 0 {
            return Err(ConfigError::Invalid {
                field: "blockchain_rpc_service.s3_proxy.rate_limit",
                reason: "must be at least 1".into(),
            });
        }
    }
    if let Some(client) = s3_client {
        let chunk = client.chunk_size.as_u64();
        if !(1024..=4 << 30).contains(&chunk) {
            return Err(ConfigError::Invalid {
                field: "s3_client.chunk_size",
                reason: format!("{chunk} bytes is outside 1 KiB..=4 GiB"),
            });
        }
    }
    Ok(())
}

/// Rejects a zero jitter in the overlay section: it would panic inside tycho-network (§9).
pub fn validate_overlay(config: &tycho_network::OverlayConfig) -> Result<(), ConfigError> {
    let jitters = [
        (
            "overlay.public_overlay_peer_store_max_jitter",
            config.public_overlay_peer_store_max_jitter,
        ),
        (
            "overlay.public_overlay_peer_exchange_max_jitter",
            config.public_overlay_peer_exchange_max_jitter,
        ),
        (
            "overlay.public_overlay_peer_collect_max_jitter",
            config.public_overlay_peer_collect_max_jitter,
        ),
        (
            "overlay.public_overlay_peer_discovery_max_jitter",
            config.public_overlay_peer_discovery_max_jitter,
        ),
    ];
    for (field, jitter) in jitters {
        if jitter.is_zero() {
            return Err(ConfigError::Invalid {
                field,
                reason: "a zero jitter is not allowed".into(),
            });
        }
    }
    Ok(())
}
