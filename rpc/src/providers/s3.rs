//! The S3 provider (§4.3): archives and persistent states in any S3-compatible object store, with
//! process-wide request-rate and bandwidth limits and the frame-limit chunk cap of §4.5.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use governor::{DefaultDirectRateLimiter, Quota};
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path;
use object_store::{BackoffConfig, ObjectStore, RetryConfig};
use tycho_types::models::BlockId;

use super::{
    manifest_object_name, state_object_name, ArchiveLookup, RpcDataProvider, SplitManifest,
    StateChunkRequest, StateInfo, StateKind, StatePart, StatePartInfo,
};
use crate::config::{S3ClientConfig, S3ProxyConfig};
use crate::error::{ConfigError, ProviderError, ProviderResult};

/// Room left in a frame for the answer wrapping (§4.5).
pub const FRAME_RESERVE: u64 = 1024;

/// The served chunk for a configured chunk size and frame limit: `min(chunk_size, max_frame − 1 KiB)`.
pub fn capped_chunk_size(chunk_size: u64, max_frame_size: u64) -> u64 {
    chunk_size
        .min(max_frame_size.saturating_sub(FRAME_RESERVE))
        .max(1)
}

/// Where the objects are.
#[derive(Debug, Clone)]
pub struct S3Settings {
    /// The S3 client section.
    pub client: S3ClientConfig,
    /// The frame limit of the network (`network.max_frame_size`).
    pub max_frame_size: u64,
}

/// Process-wide S3 proxy limits (§4.3.6).
pub struct S3Limits {
    requests: DefaultDirectRateLimiter,
    bandwidth: Option<DefaultDirectRateLimiter>,
}

impl S3Limits {
    /// Limits from the `s3_proxy` section; `chunk` is the served chunk size.
    pub fn new(config: &S3ProxyConfig, chunk: u64) -> Self {
        let rate = NonZeroU32::new(config.rate_limit.max(1)).unwrap_or(NonZeroU32::MIN);
        let requests = DefaultDirectRateLimiter::direct(Quota::per_second(rate).allow_burst(rate));
        let bandwidth = (config.bandwidth_limit.as_u64() > 0).then(|| {
            let bytes_per_sec = clamp_u32(config.bandwidth_limit.as_u64());
            let burst = clamp_u32(config.bandwidth_limit.as_u64().max(chunk));
            DefaultDirectRateLimiter::direct(Quota::per_second(bytes_per_sec).allow_burst(burst))
        });
        Self {
            requests,
            bandwidth,
        }
    }

    fn check_request(&self) -> ProviderResult<()> {
        self.requests
            .check()
            .map_err(|_| ProviderError::LimitExceeded("request rate"))
    }

    fn check_bandwidth(&self, chunk: u64) -> ProviderResult<()> {
        let Some(bandwidth) = &self.bandwidth else {
            return Ok(());
        };
        match bandwidth.check_n(clamp_u32(chunk)) {
            Ok(Ok(())) => Ok(()),
            _ => Err(ProviderError::LimitExceeded("bandwidth")),
        }
    }
}

fn clamp_u32(value: u64) -> NonZeroU32 {
    NonZeroU32::new(value.clamp(1, u64::from(u32::MAX)) as u32).unwrap_or(NonZeroU32::MIN)
}

/// A lookup of the last key block seqno strictly before a seqno (for the archive id estimate).
pub type KeyBlockLookup = Arc<dyn Fn(u32) -> ProviderResult<Option<u32>> + Send + Sync>;

/// Serves archives and persistent states from S3 (§4.3).
#[derive(Clone)]
pub struct S3Provider {
    store: Arc<AmazonS3>,
    archive_prefix: String,
    state_prefix: String,
    chunk: u64,
    limits: Option<Arc<S3Limits>>,
    key_blocks: Option<KeyBlockLookup>,
}

impl S3Provider {
    /// Builds the client (path-style requests, plain HTTP allowed, unsigned without credentials).
    pub fn new(settings: &S3Settings, proxy: Option<&S3ProxyConfig>) -> Result<Self, ConfigError> {
        let c = &settings.client;
        let mut builder = AmazonS3Builder::new()
            .with_region(&c.region)
            .with_endpoint(&c.endpoint)
            .with_bucket_name(&c.bucket)
            .with_allow_http(true)
            .with_virtual_hosted_style_request(false)
            // A dead endpoint must fail a request quickly (err 2), not stall it for minutes.
            .with_retry(RetryConfig {
                backoff: BackoffConfig::default(),
                max_retries: 2,
                retry_timeout: Duration::from_secs(10),
            });
        match &c.credentials {
            Some(creds) => {
                builder = builder
                    .with_access_key_id(&creds.access_key)
                    .with_secret_access_key(&creds.secret_key);
                if let Some(token) = &creds.token {
                    builder = builder.with_token(token);
                }
            }
            None => builder = builder.with_skip_signature(true),
        }
        let chunk = capped_chunk_size(c.chunk_size.as_u64(), settings.max_frame_size);
        Ok(Self {
            store: Arc::new(builder.build()?),
            archive_prefix: c.archive_key_prefix.clone(),
            state_prefix: c.state_key_prefix.clone(),
            chunk,
            limits: proxy.map(|p| Arc::new(S3Limits::new(p, chunk))),
            key_blocks: None,
        })
    }

    /// Uses the local key-block index for the archive id estimate (otherwise no key blocks are known).
    pub fn with_key_block_lookup(mut self, lookup: KeyBlockLookup) -> Self {
        self.key_blocks = Some(lookup);
        self
    }

    /// Uses the key-block index of a block storage.
    pub fn with_storage_key_blocks(self, storage: regolith_storage::Storage) -> Self {
        self.with_key_block_lookup(Arc::new(move |seqno| {
            Ok(storage
                .handles()
                .find_prev_key_block(seqno)?
                .map(|h| h.id().seqno))
        }))
    }

    /// The chunk size served and announced.
    pub fn chunk_size(&self) -> u64 {
        self.chunk
    }

    fn path(&self, prefix: &str, name: &str) -> Path {
        Path::from(format!("{prefix}{name}"))
    }

    /// The archive id estimate of §4.3.3.
    pub fn estimate_archive_id(&self, mc_seqno: u32) -> ProviderResult<u32> {
        let k = match &self.key_blocks {
            Some(lookup) => lookup(mc_seqno)?.unwrap_or(0),
            None => 0,
        };
        let base = k.saturating_add(1);
        Ok(if base < mc_seqno {
            mc_seqno - ((mc_seqno - base) % 100)
        } else {
            mc_seqno
        })
    }

    async fn head_size(&self, path: &Path) -> ProviderResult<Option<u64>> {
        match self.store.head(path).await {
            Ok(meta) if meta.size > 0 => Ok(Some(meta.size)),
            Ok(_) => Ok(None),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    fn check_limits(&self) -> ProviderResult<()> {
        if let Some(limits) = &self.limits {
            limits.check_request()?;
            limits.check_bandwidth(self.chunk)?;
        }
        Ok(())
    }

    fn check_request_rate(&self) -> ProviderResult<()> {
        match &self.limits {
            Some(limits) => limits.check_request(),
            None => Ok(()),
        }
    }
}

#[async_trait]
impl RpcDataProvider for S3Provider {
    async fn archive_info(&self, mc_seqno: u32) -> ProviderResult<ArchiveLookup> {
        self.check_request_rate()?;
        let id = self.estimate_archive_id(mc_seqno)?;
        let path = self.path(&self.archive_prefix, &id.to_string());
        Ok(match self.head_size(&path).await {
            Ok(Some(size)) => ArchiveLookup::Found {
                id,
                size,
                chunk_size: self.chunk,
            },
            Ok(None) => ArchiveLookup::NotFound,
            Err(e) => {
                tracing::debug!(archive_id = id, error = %e, "S3 archive head failed");
                ArchiveLookup::NotFound
            }
        })
    }

    async fn archive_chunk(&self, archive_id: u32, offset: u64) -> ProviderResult<Bytes> {
        if !offset.is_multiple_of(self.chunk) {
            return Err(ProviderError::MisalignedOffset {
                offset,
                chunk_size: self.chunk,
            });
        }
        self.check_limits()?;
        let path = self.path(&self.archive_prefix, &archive_id.to_string());
        Ok(self
            .store
            .get_range(&path, offset..offset.saturating_add(self.chunk))
            .await?)
    }

    async fn state_info(
        &self,
        block: &BlockId,
        kind: StateKind,
    ) -> ProviderResult<Option<StateInfo>> {
        self.check_request_rate()?;
        let unsplit = |size| StateInfo {
            size,
            chunk_size: self.chunk,
            split_depth: 0,
            parts: Vec::new(),
        };
        let object = |part| {
            state_object_name(block, kind, part).map(|name| self.path(&self.state_prefix, &name))
        };
        if kind == StateKind::Queue {
            let Some(path) = object(StatePart::Unsplit) else {
                return Ok(None);
            };
            return Ok(self.head_size(&path).await?.map(unsplit));
        }
        let manifest_name = manifest_object_name(block);
        let manifest_path = self.path(&self.state_prefix, &manifest_name);
        let manifest = match self.store.get(&manifest_path).await {
            Ok(result) => result.bytes().await?,
            Err(object_store::Error::NotFound { .. }) => {
                let Some(path) = object(StatePart::Unsplit) else {
                    return Ok(None);
                };
                return Ok(self.head_size(&path).await?.map(unsplit));
            }
            Err(e) => return Err(e.into()),
        };
        let (split_depth, prefixes) = SplitManifest::parse(&manifest, block).map_err(|reason| {
            ProviderError::InvalidManifest {
                key: manifest_path.to_string(),
                reason,
            }
        })?;
        let Some(root) = object(StatePart::SplitRoot) else {
            return Ok(None);
        };
        let Some(size) = self.head_size(&root).await? else {
            return Ok(None);
        };
        let mut parts = Vec::with_capacity(prefixes.len());
        for prefix in prefixes {
            let Some(path) = object(StatePart::SplitPart(prefix)) else {
                return Ok(None);
            };
            let Some(part_size) = self.head_size(&path).await? else {
                return Ok(None);
            };
            parts.push(StatePartInfo {
                prefix,
                size: part_size,
            });
        }
        Ok(Some(StateInfo {
            size,
            chunk_size: self.chunk,
            split_depth,
            parts,
        }))
    }

    async fn state_chunk(&self, request: &StateChunkRequest) -> ProviderResult<Option<Bytes>> {
        let offset = request.offset;
        if !offset.is_multiple_of(self.chunk) {
            return Ok(None);
        }
        let Some(name) = state_object_name(&request.block, request.kind, request.part) else {
            return Ok(None);
        };
        self.check_limits()?;
        let path = self.path(&self.state_prefix, &name);
        match self
            .store
            .get_range(&path, offset..offset.saturating_add(self.chunk))
            .await
        {
            Ok(bytes) => Ok(Some(bytes)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider(chunk: u64, frame: u64) -> S3Provider {
        let client = serde_json::from_value(serde_json::json!({
            "region": "us-east-1",
            "endpoint": "http://127.0.0.1:1",
            "bucket": "b",
            "chunk_size": chunk,
        }))
        .unwrap();
        S3Provider::new(
            &S3Settings {
                client,
                max_frame_size: frame,
            },
            None,
        )
        .unwrap()
    }

    #[test]
    fn archive_id_estimate_follows_the_last_key_block_before() {
        let p = provider(1 << 20, 8 << 20);
        // no key blocks: base 1
        assert_eq!(p.estimate_archive_id(1).unwrap(), 1);
        assert_eq!(p.estimate_archive_id(100).unwrap(), 1);
        assert_eq!(p.estimate_archive_id(101).unwrap(), 101);
        assert_eq!(p.estimate_archive_id(250).unwrap(), 201);
        // last key block strictly before mc_seqno is 57: base 58
        let p = p.with_key_block_lookup(Arc::new(|seqno| Ok((seqno > 57).then_some(57))));
        assert_eq!(p.estimate_archive_id(58).unwrap(), 58);
        assert_eq!(p.estimate_archive_id(150).unwrap(), 58);
        assert_eq!(p.estimate_archive_id(158).unwrap(), 158);
        assert_eq!(
            p.estimate_archive_id(30).unwrap(),
            1,
            "no key block before 30: base 1"
        );
    }

    #[test]
    fn served_chunk_is_capped_by_the_frame() {
        assert_eq!(provider(1 << 20, 8 << 20).chunk_size(), 1 << 20);
        assert_eq!(provider(10 << 20, 8 << 20).chunk_size(), (8 << 20) - 1024);
        assert_eq!(provider(10 << 20, 4 << 20).chunk_size(), (4 << 20) - 1024);
    }
}
