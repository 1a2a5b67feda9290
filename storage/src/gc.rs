//! Block GC (storage.md §9): removal of whole blocks below a target, in crash-safe chunks.

use regolith_formats::{BlockId, BlockKey, ShardIdent};
use regolith_kv::Batch;

use crate::block_cache::BlockCache;
use crate::block_handle::HandleCache;
use crate::block_meta::BlockFlags;
use crate::db::CoreDb;
use crate::error::Result;
use crate::tables::{
    block_range, BlockComponents, BlockConnections, BlockHandles, BlockIds, KeyRange,
    StoredBlockKey, StoredHash,
};

/// What a GC run removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct BlockGcStats {
    /// Masterchain blocks removed.
    pub mc_blocks_removed: usize,
    /// All blocks removed.
    pub total_blocks_removed: usize,
}

/// Whether GC keeps a block (§9.2 and §4 rule 5; first match wins). `flags` are the block's decoded stored
/// flags, if a row exists; a row that does not decode never gets here (it is an error).
pub(crate) fn keeps_block(
    shard: &ShardIdent,
    seqno: u32,
    flags: Option<BlockFlags>,
    target: u32,
    shard_heights: &[(ShardIdent, u32)],
) -> bool {
    if seqno == 0 {
        return true;
    }
    if shard.is_masterchain() {
        if seqno >= target {
            return true;
        }
    } else if shard_heights
        .iter()
        .any(|(top, h)| top.intersects(shard) && *h <= seqno)
    {
        return true;
    }
    flags.is_some_and(BlockFlags::retain_during_gc)
}

struct Chunk {
    blocks: Vec<(BlockKey, BlockId)>,
}

/// Removes every block that §9.2 does not keep. Runs synchronously; call it on a blocking thread.
pub(crate) fn remove_blocks(
    db: &CoreDb,
    cache: &HandleCache,
    block_cache: &BlockCache,
    target: u32,
    shard_heights: &[(ShardIdent, u32)],
    max_blocks_per_batch: usize,
) -> Result<BlockGcStats> {
    cache.gc_handles_cache(target, shard_heights);

    let max_blocks_per_batch = max_blocks_per_batch.max(1);
    let mut stats = BlockGcStats::default();
    let mut removed_ids = Vec::new();
    let mut chunk = Chunk { blocks: Vec::new() };

    let flush =
        |chunk: &mut Chunk, stats: &mut BlockGcStats, removed: &mut Vec<BlockId>| -> Result<()> {
            if chunk.blocks.is_empty() {
                return Ok(());
            }
            let first = chunk.blocks[0].0;
            let last = chunk.blocks[chunk.blocks.len() - 1].0;
            let rows = block_range(first, last);
            let mut batch = Batch::new();
            for (key, _) in &chunk.blocks {
                db.batch_delete::<BlockHandles>(&mut batch, &StoredHash(key.root_hash()));
            }
            db.batch_delete_range::<BlockIds>(&mut batch, &rows);
            db.batch_delete_range::<BlockConnections>(&mut batch, &rows);
            db.batch_delete_range::<BlockComponents>(&mut batch, &rows);
            db.fail_points.gc_batch.check("block GC batch")?;
            db.write(batch, "removing outdated blocks")?;
            for (key, id) in chunk.blocks.drain(..) {
                stats.total_blocks_removed += 1;
                if key.workchain() == -1 {
                    stats.mc_blocks_removed += 1;
                }
                removed.push(id);
            }
            Ok(())
        };

    // Every block is decided before anything is deleted: a row that does not decode stops the run with
    // an error, and no chunk of it has been written.
    let mut chunks = Vec::new();
    let plan = (|| -> Result<()> {
        for row in db.iter::<BlockIds>(KeyRange::all()) {
            let (StoredBlockKey(key), StoredHash(file_hash)) = row?;
            let flags = crate::db::handle_row(db, &key)?.map(|h| h.meta.flags);
            if keeps_block(&key.shard()?, key.seqno(), flags, target, shard_heights) {
                // A kept block closes the run.
                if !chunk.blocks.is_empty() {
                    chunks.push(std::mem::replace(&mut chunk, Chunk { blocks: Vec::new() }));
                }
            } else {
                chunk.blocks.push((key, key.to_block_id(file_hash)?));
                if chunk.blocks.len() >= max_blocks_per_batch {
                    chunks.push(std::mem::replace(&mut chunk, Chunk { blocks: Vec::new() }));
                }
            }
        }
        Ok(())
    })();
    if let Err(e) = plan {
        tracing::error!(target, error = %e, "block GC stopped: nothing was removed");
        return Err(e);
    }
    chunks.push(chunk);
    for mut chunk in chunks {
        flush(&mut chunk, &mut stats, &mut removed_ids)?;
    }

    cache.evict_removed(&removed_ids);
    block_cache.invalidate(&removed_ids);
    if stats.total_blocks_removed > 0 {
        tracing::info!(
            target,
            mc = stats.mc_blocks_removed,
            total = stats.total_blocks_removed,
            "removed outdated blocks"
        );
    }
    Ok(stats)
}
