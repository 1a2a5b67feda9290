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

/// The `api` section of a node's config: everything of [`ApiConfig`] but the address, which the node keeps
/// in `api_address`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApiSettings {
    /// The largest request body, in bytes (at least 1 KiB).
    pub max_body_bytes: usize,
    /// How long one request may take before HTTP 408 (above 0).
    #[serde(with = "humantime_serde")]
    pub request_timeout: Duration,
    /// The per-IP rate limit; `null` turns it off.
    pub rate_limit: Option<RateLimit>,
    /// Keep the transactions index (`<data>/api/`); without it the index methods answer -32002.
    pub transactions_index: bool,
    /// Transactions GC of the index (api.md §8), at every indexed key block; `null` keeps every transaction.
    pub index_gc: Option<IndexGcConfig>,
}

/// How old transactions leave the index (api.md §8: stock's defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IndexGcConfig {
    /// Transactions older than the newest key block made this long ago go.
    #[serde(with = "humantime_serde")]
    pub ttl: Duration,
    /// Except each account's newest this many.
    pub keep_per_account: u32,
}

impl Default for IndexGcConfig {
    fn default() -> Self {
        Self {
            ttl: Duration::from_secs(7 * 24 * 3600),
            keep_per_account: 10,
        }
    }
}

impl Default for ApiSettings {
    fn default() -> Self {
        Self {
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            rate_limit: None,
            transactions_index: true,
            index_gc: Some(IndexGcConfig::default()),
        }
    }
}

impl ApiSettings {
    /// The server's settings at `listen_addr`.
    pub fn at(&self, listen_addr: SocketAddr) -> ApiConfig {
        ApiConfig {
            listen_addr,
            max_body_bytes: self.max_body_bytes,
            request_timeout: self.request_timeout,
            rate_limit: self.rate_limit,
        }
    }

    /// Checks what serde cannot: a body limit of at least 1 KiB and a timeout above 0; the error names the
    /// field.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_body_bytes < 1024 {
            return Err("api.max_body_bytes must be at least 1024".into());
        }
        if self.request_timeout.is_zero() {
            return Err("api.request_timeout must be above 0".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_parse_with_defaults_and_refuse_what_cannot_work() {
        let settings: ApiSettings = serde_json::from_str(
            r#"{"request_timeout": "5s", "rate_limit": {"requests_per_second": 10, "burst": 20}}"#,
        )
        .unwrap();
        assert_eq!(settings.max_body_bytes, DEFAULT_MAX_BODY_BYTES);
        assert_eq!(settings.request_timeout, Duration::from_secs(5));
        let config = settings.at("127.0.0.1:1".parse().unwrap());
        assert_eq!(config.rate_limit.unwrap().burst.get(), 20);
        assert!(serde_json::from_str::<ApiSettings>(r#"{"unknown": 1}"#).is_err());
        let tiny = ApiSettings {
            max_body_bytes: 10,
            ..Default::default()
        };
        assert!(tiny.validate().unwrap_err().contains("max_body_bytes"));
        let instant = ApiSettings {
            request_timeout: Duration::ZERO,
            ..Default::default()
        };
        assert!(instant.validate().unwrap_err().contains("request_timeout"));
    }
}
