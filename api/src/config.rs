//! The API server's settings (api.md §1: body limit, timeout, per-IP rate limit).

use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::time::Duration;

/// The largest request body by default: 256 KiB (`2 << 17`, api.md §1).
pub const DEFAULT_MAX_BODY_BYTES: usize = 2 << 17;
/// The request timeout by default (api.md §1): past it the answer is HTTP 408.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(25);

/// Settings of the API server.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApiConfig {
    /// The address to listen on (port 0: any free port).
    pub listen_addr: SocketAddr,
    /// The largest request body; a larger one is refused (HTTP 413 when its length is declared).
    pub max_body_bytes: usize,
    /// How long one request may take before HTTP 408.
    #[serde(with = "humantime_serde")]
    pub request_timeout: Duration,
    /// The per-IP rate limit; `None` turns it off.
    pub rate_limit: Option<RateLimit>,
}

impl Default for ApiConfig {
    fn default() -> Self {
        Self {
            listen_addr: SocketAddr::from(([127, 0, 0, 1], 8081)),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            rate_limit: None,
        }
    }
}

/// A per-IP rate limit: a steady rate and a burst (HTTP 429 with `Retry-After` past it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimit {
    /// Requests per second from one IP address.
    pub requests_per_second: NonZeroU32,
    /// Requests one IP address may send at once.
    pub burst: NonZeroU32,
}
