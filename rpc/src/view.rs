//! The read-only storage view the service answers from (rpc.md §3.2), and its implementation over
//! [`regolith_storage::Storage`].

use async_trait::async_trait;
use bytes::Bytes;
use regolith_storage::{KeyBlocksDirection, Storage};
use tycho_types::models::BlockId;

use crate::error::ProviderResult;

/// The flags of a block handle the service needs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HandleFlags {
    /// The block data is stored.
    pub has_data: bool,
    /// The proof is stored.
    pub has_proof: bool,
    /// The queue diff is stored.
    pub has_queue_diff: bool,
    /// The next1 connection is recorded.
    pub has_next1: bool,
    /// The block was removed by GC.
    pub is_removed: bool,
}

impl HandleFlags {
    /// Whether the block can be served in full (§3.5).
    pub fn has_all_parts(&self) -> bool {
        self.has_data && self.has_proof && self.has_queue_diff && !self.is_removed
    }
}

/// What getBlockFull serves of one block (§3.5): every part stored, read through one handle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockFullParts {
    /// The first bytes of the compressed block blob, at most the asked chunk.
    pub first_chunk: Bytes,
    /// The size of the whole compressed blob.
    pub size: u64,
    /// The raw proof.
    pub proof: Bytes,
    /// The raw queue diff.
    pub queue_diff: Bytes,
}

/// Read-only access to blocks (§3.2).
#[async_trait]
pub trait BlockStorageView: Send + Sync + 'static {
    /// Everything getBlockFull serves of a block, the blob up to `chunk` bytes; `None` unless every part is
    /// stored and the block is not removed. The default composes the methods below; a storage overrides it
    /// to load the handle once.
    async fn block_full(&self, id: &BlockId, chunk: u64) -> ProviderResult<Option<BlockFullParts>> {
        match self.handle(id).await? {
            Some(flags) if flags.has_all_parts() => {}
            _ => return Ok(None),
        }
        let Some(first_chunk) = self.block_data_range(id, 0, chunk).await? else {
            return Ok(None);
        };
        let size = if (first_chunk.len() as u64) < chunk {
            first_chunk.len() as u64
        } else {
            match self.block_data_size(id).await? {
                Some(size) => size,
                None => return Ok(None),
            }
        };
        let (proof, queue_diff) = futures_util::join!(self.proof(id), self.queue_diff(id));
        Ok(match (proof?, queue_diff?) {
            (Some(proof), Some(queue_diff)) => Some(BlockFullParts {
                first_chunk,
                size,
                proof,
                queue_diff,
            }),
            _ => None,
        })
    }
    /// The handle flags, `None` without a handle.
    async fn handle(&self, id: &BlockId) -> ProviderResult<Option<HandleFlags>>;
    /// Bytes `[offset, offset + len)` of the compressed block blob (shorter at the end, empty past it).
    async fn block_data_range(
        &self,
        id: &BlockId,
        offset: u64,
        len: u64,
    ) -> ProviderResult<Option<Bytes>>;
    /// Size of the compressed block blob.
    async fn block_data_size(&self, id: &BlockId) -> ProviderResult<Option<u64>>;
    /// The raw proof.
    async fn proof(&self, id: &BlockId) -> ProviderResult<Option<Bytes>>;
    /// The raw queue diff.
    async fn queue_diff(&self, id: &BlockId) -> ProviderResult<Option<Bytes>>;
    /// The next1 connection.
    async fn next1(&self, id: &BlockId) -> ProviderResult<Option<BlockId>>;
    /// At most `limit` key block ids with seqno ≥ `seqno`, ascending.
    async fn key_blocks_from(&self, seqno: u32, limit: usize) -> ProviderResult<Vec<BlockId>>;
    /// The zerostate proof, if stored.
    async fn zerostate_proof(&self) -> ProviderResult<Option<Bytes>>;
    /// The shard blocks mc block `mc` is the first to reference (its top shard blocks and their
    /// predecessors back to what an earlier mc block referenced), at most `limit`, in no particular order.
    /// The default knows none: a batch then carries mc blocks alone.
    async fn shard_blocks_of(&self, mc: &BlockId, limit: usize) -> ProviderResult<Vec<BlockId>> {
        let _ = (mc, limit);
        Ok(Vec::new())
    }
}

#[async_trait]
impl<T: BlockStorageView + ?Sized> BlockStorageView for std::sync::Arc<T> {
    async fn block_full(&self, id: &BlockId, chunk: u64) -> ProviderResult<Option<BlockFullParts>> {
        (**self).block_full(id, chunk).await
    }
    async fn handle(&self, id: &BlockId) -> ProviderResult<Option<HandleFlags>> {
        (**self).handle(id).await
    }
    async fn block_data_range(
        &self,
        id: &BlockId,
        offset: u64,
        len: u64,
    ) -> ProviderResult<Option<Bytes>> {
        (**self).block_data_range(id, offset, len).await
    }
    async fn block_data_size(&self, id: &BlockId) -> ProviderResult<Option<u64>> {
        (**self).block_data_size(id).await
    }
    async fn proof(&self, id: &BlockId) -> ProviderResult<Option<Bytes>> {
        (**self).proof(id).await
    }
    async fn queue_diff(&self, id: &BlockId) -> ProviderResult<Option<Bytes>> {
        (**self).queue_diff(id).await
    }
    async fn next1(&self, id: &BlockId) -> ProviderResult<Option<BlockId>> {
        (**self).next1(id).await
    }
    async fn key_blocks_from(&self, seqno: u32, limit: usize) -> ProviderResult<Vec<BlockId>> {
        (**self).key_blocks_from(seqno, limit).await
    }
    async fn zerostate_proof(&self) -> ProviderResult<Option<Bytes>> {
        (**self).zerostate_proof().await
    }
    async fn shard_blocks_of(&self, mc: &BlockId, limit: usize) -> ProviderResult<Vec<BlockId>> {
        (**self).shard_blocks_of(mc, limit).await
    }
}

/// The flags of a stored handle.
fn flags_of(h: &regolith_storage::BlockHandle) -> HandleFlags {
    HandleFlags {
        has_data: h.has_data(),
        has_proof: h.has_proof(),
        has_queue_diff: h.has_queue_diff(),
        has_next1: h.has_next1(),
        is_removed: h.is_removed(),
    }
}

#[async_trait]
impl BlockStorageView for Storage {
    async fn block_full(&self, id: &BlockId, chunk: u64) -> ProviderResult<Option<BlockFullParts>> {
        let Some(handle) = self.handles().load_handle(id)? else {
            return Ok(None);
        };
        if !flags_of(&handle).has_all_parts() {
            return Ok(None);
        }
        let components = self.components();
        let Some(first_chunk) = components.load_block_data_range(&handle, 0, chunk)? else {
            return Ok(None);
        };
        let size = if (first_chunk.len() as u64) < chunk {
            first_chunk.len() as u64
        } else {
            match components.get_compressed_block_data_size(&handle)? {
                Some(size) => size,
                None => return Ok(None),
            }
        };
        let (proof, queue_diff) = futures_util::join!(
            components.load_block_proof_raw(&handle),
            components.load_queue_diff_raw(&handle)
        );
        Ok(Some(BlockFullParts {
            first_chunk,
            size,
            proof: Bytes::from(proof?),
            queue_diff: Bytes::from(queue_diff?),
        }))
    }

    async fn handle(&self, id: &BlockId) -> ProviderResult<Option<HandleFlags>> {
        Ok(self.handles().load_handle(id)?.as_ref().map(flags_of))
    }

    async fn block_data_range(
        &self,
        id: &BlockId,
        offset: u64,
        len: u64,
    ) -> ProviderResult<Option<Bytes>> {
        let Some(handle) = self.handles().load_handle(id)? else {
            return Ok(None);
        };
        Ok(self
            .components()
            .load_block_data_range(&handle, offset, len)?)
    }

    async fn block_data_size(&self, id: &BlockId) -> ProviderResult<Option<u64>> {
        let Some(handle) = self.handles().load_handle(id)? else {
            return Ok(None);
        };
        Ok(self.components().get_compressed_block_data_size(&handle)?)
    }

    async fn proof(&self, id: &BlockId) -> ProviderResult<Option<Bytes>> {
        let Some(handle) = self.handles().load_handle(id)? else {
            return Ok(None);
        };
        if !handle.has_proof() {
            return Ok(None);
        }
        Ok(Some(Bytes::from(
            self.components().load_block_proof_raw(&handle).await?,
        )))
    }

    async fn queue_diff(&self, id: &BlockId) -> ProviderResult<Option<Bytes>> {
        let Some(handle) = self.handles().load_handle(id)? else {
            return Ok(None);
        };
        if !handle.has_queue_diff() {
            return Ok(None);
        }
        Ok(Some(Bytes::from(
            self.components().load_queue_diff_raw(&handle).await?,
        )))
    }

    async fn next1(&self, id: &BlockId) -> ProviderResult<Option<BlockId>> {
        Ok(self
            .connections()
            .load_connection(id, regolith_storage::Direction::Next1)?)
    }

    async fn key_blocks_from(&self, seqno: u32, limit: usize) -> ProviderResult<Vec<BlockId>> {
        let mut out = Vec::with_capacity(limit.min(64));
        for item in self
            .handles()
            .key_blocks_iter(KeyBlocksDirection::ForwardFrom(seqno))
            .take(limit)
        {
            out.push(item?);
        }
        Ok(out)
    }

    async fn zerostate_proof(&self) -> ProviderResult<Option<Bytes>> {
        Ok(self.node_state().load_zerostate_proof()?.map(Bytes::from))
    }

    async fn shard_blocks_of(&self, mc: &BlockId, limit: usize) -> ProviderResult<Vec<BlockId>> {
        use regolith_storage::Direction;
        let Some(handle) = self.handles().load_handle(mc)? else {
            return Ok(Vec::new());
        };
        if !mc.is_masterchain() || !handle.has_data() {
            return Ok(Vec::new());
        }
        let block = self.components().load_block_data(&handle).await?;
        let mut level = block
            .top_shard_blocks()
            .map_err(|e| crate::error::ProviderError::Internal(format!("mc block {mc}: {e}")))?;
        let mut out = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let connections = self.connections();
        while let Some(id) = level.pop() {
            if out.len() >= limit {
                break;
            }
            if !seen.insert(id) {
                continue;
            }
            // A block an earlier mc block referenced is where the walk stops.
            match self.handles().load_handle(&id)? {
                Some(h) if h.ref_by_mc_seqno() == mc.seqno => {}
                _ => continue,
            }
            for direction in [Direction::Prev1, Direction::Prev2] {
                if let Some(prev) = connections.load_connection(&id, direction)? {
                    if !prev.is_masterchain() {
                        level.push(prev);
                    }
                }
            }
            out.push(id);
        }
        Ok(out)
    }
}
