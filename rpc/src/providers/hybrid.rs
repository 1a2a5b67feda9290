//! The hybrid provider (§4.4): a primary source with an optional fallback.

use async_trait::async_trait;
use bytes::Bytes;
use tycho_types::models::BlockId;

use super::{ArchiveLookup, RpcDataProvider, StateChunkRequest, StateInfo, StateKind};
use crate::error::ProviderResult;

/// Asks `primary` first and `fallback` where §4.4 says so; the fallback's answer is final.
pub struct HybridProvider<P, F> {
    primary: P,
    fallback: Option<F>,
}

impl<P: RpcDataProvider, F: RpcDataProvider> HybridProvider<P, F> {
    /// A primary with an optional fallback.
    pub fn new(primary: P, fallback: Option<F>) -> Self {
        Self { primary, fallback }
    }
}

#[async_trait]
impl<P: RpcDataProvider, F: RpcDataProvider> RpcDataProvider for HybridProvider<P, F> {
    async fn archive_info(&self, mc_seqno: u32) -> ProviderResult<ArchiveLookup> {
        let primary = self.primary.archive_info(mc_seqno).await;
        let Some(fallback) = &self.fallback else {
            return primary;
        };
        match primary {
            Ok(found @ (ArchiveLookup::Found { .. } | ArchiveLookup::TooNew)) => Ok(found),
            Ok(ArchiveLookup::NotFound) | Err(_) => fallback.archive_info(mc_seqno).await,
        }
    }

    async fn archive_chunk(&self, archive_id: u32, offset: u64) -> ProviderResult<Bytes> {
        let primary = self.primary.archive_chunk(archive_id, offset).await;
        match (&self.fallback, primary) {
            (_, Ok(bytes)) => Ok(bytes),
            (None, Err(e)) => Err(e),
            (Some(fallback), Err(e)) => {
                tracing::debug!(archive_id, offset, error = %e, "primary archive chunk failed, using fallback");
                fallback.archive_chunk(archive_id, offset).await
            }
        }
    }

    async fn state_info(
        &self,
        block: &BlockId,
        kind: StateKind,
    ) -> ProviderResult<Option<StateInfo>> {
        let primary = self.primary.state_info(block, kind).await;
        match (&self.fallback, primary) {
            (_, Ok(Some(info))) => Ok(Some(info)),
            (None, other) => other,
            (Some(fallback), _) => fallback.state_info(block, kind).await,
        }
    }

    async fn state_chunk(&self, request: &StateChunkRequest) -> ProviderResult<Option<Bytes>> {
        let primary = self.primary.state_chunk(request).await;
        match (&self.fallback, primary) {
            (_, Ok(Some(bytes))) => Ok(Some(bytes)),
            (None, other) => other,
            (Some(fallback), _) => fallback.state_chunk(request).await,
        }
    }
}
