//! Data providers for archives and persistent states (rpc.md §4): the public [`RpcDataProvider`] trait and
//! the built-in storage, S3 and hybrid providers.

mod hybrid;
mod s3;
mod storage;

use async_trait::async_trait;
use bytes::Bytes;
use tycho_types::models::BlockId;

use crate::error::ProviderResult;

pub use hybrid::HybridProvider;
pub use regolith_formats::persistent_state::{
    block_key_text, manifest_object_name, state_object_name, validate_split_parts, SplitManifest,
    StateKind, StatePart,
};
pub use s3::{capped_chunk_size, KeyBlockLookup, S3Limits, S3Provider, S3Settings, FRAME_RESERVE};
pub use storage::StorageProvider;
pub use storage::STORAGE_CHUNK_SIZE;

/// What a provider knows about the archive of an mc seqno.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArchiveLookup {
    /// The archive, its compressed size and chunk size.
    Found {
        /// Archive id (seqno of its first mc block).
        id: u32,
        /// Compressed size.
        size: u64,
        /// Chunk size the client must use.
        chunk_size: u64,
    },
    /// Not there yet.
    TooNew,
    /// Unknown.
    NotFound,
}

/// One part of a split state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatePartInfo {
    /// Shard prefix.
    pub prefix: u64,
    /// Compressed size.
    pub size: u64,
}

/// A persistent state descriptor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateInfo {
    /// Compressed size (of the root for a split state).
    pub size: u64,
    /// Chunk size the client must use.
    pub chunk_size: u64,
    /// 0 for an unsplit state.
    pub split_depth: u8,
    /// The parts of a split state.
    pub parts: Vec<StatePartInfo>,
}

/// One chunk of a persistent state, as the four state-chunk requests ask for it (§4.2.3): the block, which
/// state and which part of it, and the offset (a multiple of the chunk size).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateChunkRequest {
    /// The block whose state it is.
    pub block: BlockId,
    /// Shard state or queue state.
    pub kind: StateKind,
    /// The whole state, the root of a split state or one of its parts.
    pub part: StatePart,
    /// Byte offset in the compressed state.
    pub offset: u64,
}

impl StateChunkRequest {
    /// The chunk of `block`'s state at `offset`.
    pub fn new(block: &BlockId, offset: u64, kind: StateKind, part: StatePart) -> Self {
        Self {
            block: *block,
            kind,
            part,
            offset,
        }
    }
}

/// A source of archives and persistent states (§4.1).
#[async_trait]
pub trait RpcDataProvider: Send + Sync + 'static {
    /// The archive holding `mc_seqno`.
    async fn archive_info(&self, mc_seqno: u32) -> ProviderResult<ArchiveLookup>;
    /// Bytes `[offset, offset + chunk)` of an archive.
    async fn archive_chunk(&self, archive_id: u32, offset: u64) -> ProviderResult<Bytes>;
    /// The descriptor of a persistent state.
    async fn state_info(
        &self,
        block: &BlockId,
        kind: StateKind,
    ) -> ProviderResult<Option<StateInfo>>;
    /// A chunk of a persistent state; `None` when absent (or the offset is not a multiple of the chunk size).
    async fn state_chunk(&self, request: &StateChunkRequest) -> ProviderResult<Option<Bytes>>;
}

#[async_trait]
impl<T: RpcDataProvider + ?Sized> RpcDataProvider for std::sync::Arc<T> {
    async fn archive_info(&self, mc_seqno: u32) -> ProviderResult<ArchiveLookup> {
        (**self).archive_info(mc_seqno).await
    }
    async fn archive_chunk(&self, archive_id: u32, offset: u64) -> ProviderResult<Bytes> {
        (**self).archive_chunk(archive_id, offset).await
    }
    async fn state_info(
        &self,
        block: &BlockId,
        kind: StateKind,
    ) -> ProviderResult<Option<StateInfo>> {
        (**self).state_info(block, kind).await
    }
    async fn state_chunk(&self, request: &StateChunkRequest) -> ProviderResult<Option<Bytes>> {
        (**self).state_chunk(request).await
    }
}

#[async_trait]
impl RpcDataProvider for Box<dyn RpcDataProvider> {
    async fn archive_info(&self, mc_seqno: u32) -> ProviderResult<ArchiveLookup> {
        (**self).archive_info(mc_seqno).await
    }
    async fn archive_chunk(&self, archive_id: u32, offset: u64) -> ProviderResult<Bytes> {
        (**self).archive_chunk(archive_id, offset).await
    }
    async fn state_info(
        &self,
        block: &BlockId,
        kind: StateKind,
    ) -> ProviderResult<Option<StateInfo>> {
        (**self).state_info(block, kind).await
    }
    async fn state_chunk(&self, request: &StateChunkRequest) -> ProviderResult<Option<Bytes>> {
        (**self).state_chunk(request).await
    }
}
