//! Commit by mc block (queue.md §5.2): pointers advance to the `max_message` of each listed block's diff, the
//! last committed mc block is recorded, and the GC bounds become the minimum `processed_to` per source.

use std::collections::{BTreeMap, BTreeSet};

use regolith_formats::ShardIdent;
use regolith_kv::Batch;
use tycho_types::models::BlockIdShort;

use crate::db::QueueSnapshot;
use crate::diff::{CommitPointer, TopBlock};
use crate::error::{QueueError, Result};
use crate::gc::GcState;
use crate::key::{PartitionIdx, QueueKey};
use crate::storage::QueueStorage;
use crate::tables::{
    BlockIdBe, DiffInfoKey, GcBoundKey, IntMsgCommitPointer, IntMsgDiffInfo, IntMsgGcBounds,
    IntMsgVar, ShardKey, LAST_COMMITTED_MC_BLOCK_ID,
};

/// Commits the diffs of an mc block and its top shard blocks; durable when this returns.
pub(crate) fn commit(
    storage: &QueueStorage,
    gc: &GcState,
    zerostate_seqno: u32,
    top_blocks: &[TopBlock],
    partitions: &[PartitionIdx],
) -> Result<()> {
    commit_in_order(storage, gc, zerostate_seqno, &[top_blocks], partitions)
}

/// Commits mc blocks one after the other (each exactly as [`commit`] does), then syncs the log once: all of
/// them are durable when this returns. An error stops at its mc block; the commits before it stay, synced.
pub(crate) fn commit_in_order<T: AsRef<[TopBlock]>>(
    storage: &QueueStorage,
    gc: &GcState,
    zerostate_seqno: u32,
    mc_blocks: &[T],
    partitions: &[PartitionIdx],
) -> Result<()> {
    let mut result = Ok(());
    let mut written = false;
    for top_blocks in mc_blocks {
        match commit_unsynced(
            storage,
            gc,
            zerostate_seqno,
            top_blocks.as_ref(),
            partitions,
        ) {
            Ok(w) => written |= w,
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    if written {
        // §5.2 flushes both families after each commit to make it durable. A sync of the write-ahead log gives
        // the same durability (and makes the diffs written before the commits durable too) with one fsync for
        // all of them, instead of two memtable flushes per commit, each syncing a new table file, the manifest
        // and the directory. It runs outside the queue lock, so applies do not wait for the disk.
        storage.db().sync_wal()?;
    }
    result
}

/// One commit's checks and batch under the exclusive lock, without a log sync; `true` if it wrote.
fn commit_unsynced(
    storage: &QueueStorage,
    gc: &GcState,
    zerostate_seqno: u32,
    top_blocks: &[TopBlock],
    partitions: &[PartitionIdx],
) -> Result<bool> {
    let exclusive = storage.global.write();
    let db = storage.db().clone();
    let snapshot = QueueSnapshot::new(db.clone());

    // 1. The mc block.
    let mc = top_blocks
        .iter()
        .find(|b| b.block_id.shard.is_masterchain())
        .ok_or(QueueError::NoMasterchainBlock)?;

    // 2. Idempotency: a repeated or older commit writes nothing and changes no GC bound.
    if let Some(ptr) = snapshot.get::<IntMsgCommitPointer>(&ShardKey(ShardIdent::MASTERCHAIN))? {
        if ptr.seqno >= mc.block_id.seqno {
            tracing::debug!(
                mc = mc.block_id.seqno,
                committed = ptr.seqno,
                "commit skipped: already committed"
            );
            return Ok(false);
        }
    }

    // 3. Records, pointers and bounds.
    let mut seen = BTreeSet::new();
    let mut new_pointers = BTreeMap::new();
    let mut bounds: BTreeMap<ShardIdent, QueueKey> = BTreeMap::new();
    for top in top_blocks {
        let id = &top.block_id;
        if !seen.insert(id.shard) {
            return Err(QueueError::DuplicateShard(id.shard));
        }
        let record = snapshot.get::<IntMsgDiffInfo>(&DiffInfoKey {
            shard: id.shard,
            seqno: id.seqno,
        })?;
        let Some(record) = record else {
            if top.updated && top.ref_by_mc_seqno > zerostate_seqno {
                return Err(QueueError::DiffNotFound {
                    block: BlockIdShort {
                        shard: id.shard,
                        seqno: id.seqno,
                    },
                    ref_by_mc_seqno: top.ref_by_mc_seqno,
                    zerostate_seqno,
                });
            }
            continue;
        };
        let pointer = CommitPointer {
            queue_key: record.max_message,
            seqno: record.seqno,
        };
        if let Some(current) = snapshot.get::<IntMsgCommitPointer>(&ShardKey(id.shard))? {
            if current.queue_key > pointer.queue_key {
                return Err(QueueError::PointerRegression {
                    shard: id.shard,
                    current: current.queue_key,
                    new: pointer.queue_key,
                });
            }
        }
        new_pointers.insert(id.shard, pointer);
        for (src, key) in &record.processed_to {
            bounds
                .entry(*src)
                .and_modify(|b| *b = (*b).min(*key))
                .or_insert(*key);
        }
    }
    drop(snapshot);

    // 4. One batch: the found shards' pointers, the last committed mc block and the GC bounds (so that they
    //    survive a restart), made durable by the caller's log sync.
    let mut batch = Batch::new();
    for (shard, pointer) in &new_pointers {
        db.batch_put::<IntMsgCommitPointer>(&mut batch, &ShardKey(*shard), pointer);
    }
    db.batch_put::<IntMsgVar>(
        &mut batch,
        &LAST_COMMITTED_MC_BLOCK_ID,
        &BlockIdBe(mc.block_id),
    );
    for partition in partitions {
        for (shard, bound) in &bounds {
            let key = GcBoundKey {
                partition: *partition,
                shard: *shard,
            };
            db.batch_put::<IntMsgGcBounds>(&mut batch, &key, bound);
        }
    }
    db.fail_points.commit_batch.check("commit batch")?;
    db.write(
        batch,
        format_args!("committing mc block {}", mc.block_id.seqno),
    )?;

    // 5. GC bounds in memory: a plain overwrite per (partition, source), as in the batch. GC deletes only
    // after this batch in the log, so a crash can never keep a deletion and lose the commit that allowed it.
    gc.set_bounds(partitions, &bounds);
    drop(exclusive);
    metrics::counter!("regolith_queue_commits_total").increment(1);
    tracing::debug!(
        mc = mc.block_id.seqno,
        pointers = new_pointers.len(),
        sources = bounds.len(),
        "queue committed"
    );
    Ok(true)
}
