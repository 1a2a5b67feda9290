//! Applying a diff (queue.md §5.1): the checks in order, then one batch with the diff's messages, statistics
//! rows, tail entry and record. [`PendingDiff`] holds the batch and the locks until it is written or dropped.

use std::sync::Arc;

use parking_lot::lock_api::{ArcMutexGuard, ArcRwLockReadGuard};
use parking_lot::{RawMutex, RawRwLock};
use regolith_formats::HashBytes;
use regolith_kv::Batch;
use tycho_types::models::BlockIdShort;

use crate::db::{QueueDb, QueueSnapshot};
use crate::diff::{DiffStatistics, QueueDiffWithMessages};
use crate::diff_info::DiffInfo;
use crate::error::{QueueError, Result};
use crate::message::MessageValue;
use crate::router::RouterAddr;
use crate::storage::QueueStorage;
use crate::tables::QueueTables;
use crate::tables::{
    Count, DiffInfoKey, IntMsgDiffInfo, IntMsgDiffsTail, IntMsgStatistics, MessageEntry,
    MessageKey, ShardIntMessages, StatKey, TailKey, TailSeqno,
};
use crate::zone::{self, DiffZone};

/// A checked diff whose batch is ready. Holds L shared and the shard's mutex until written or dropped.
#[must_use = "a PendingDiff writes nothing until `write` is called"]
pub struct PendingDiff {
    batch: Batch<QueueTables>,
    db: Arc<QueueDb>,
    block: BlockIdShort,
    message_count: usize,
    // Released in declaration order: the shard mutex first, then L.
    _shard_guard: ArcMutexGuard<RawMutex, ()>,
    _global_guard: ArcRwLockReadGuard<RawRwLock, ()>,
}

impl PendingDiff {
    /// Writes the batch, then releases the locks.
    pub fn write(self) -> Result<()> {
        self.db.fail_points.apply_batch.check("apply batch")?;
        let context = format!("writing the diff of {}", self.block);
        let count = self.message_count;
        let db = self.db.clone();
        let block = self.block;
        db.write(self.batch, &context)?;
        metrics::counter!("regolith_queue_diffs_applied_total").increment(1);
        metrics::counter!("regolith_queue_messages_applied_total").increment(count as u64);
        tracing::debug!(%block, messages = count, "queue diff applied");
        Ok(())
    }

    /// The block of the diff.
    pub fn block(&self) -> BlockIdShort {
        self.block
    }

    /// Number of messages in the batch.
    pub fn message_count(&self) -> usize {
        self.message_count
    }

    /// Size of the batch in bytes.
    pub fn batch_bytes(&self) -> usize {
        self.batch.size_in_bytes()
    }
}

/// Runs the checks of §5.1 and builds the batch; `None` when there is nothing to write.
pub(crate) fn prepare_diff<V: MessageValue>(
    storage: &QueueStorage,
    diff: &QueueDiffWithMessages<V>,
    block: BlockIdShort,
    diff_hash: &HashBytes,
    statistics: &DiffStatistics,
    check_sequence: Option<DiffZone>,
) -> Result<Option<PendingDiff>> {
    let global_guard = storage.global.read_arc();
    let shard_guard = storage.shard_lock(block.shard).lock_arc();
    let db = storage.db().clone();
    let snapshot = QueueSnapshot::new(db.clone());
    let shard = block.shard;

    // 1. Duplicate.
    if let Some(existing) = snapshot.get::<IntMsgDiffInfo>(&DiffInfoKey {
        shard,
        seqno: block.seqno,
    })? {
        if existing.hash == *diff_hash {
            return Ok(None);
        }
        return Err(QueueError::DuplicateDiffHashMismatch {
            block,
            existing: existing.hash.to_string(),
            new: diff_hash.to_string(),
        });
    }

    let pointer = zone::pointer(&snapshot, shard)?;

    // 2. Continuity.
    if let Some(zone) = check_sequence {
        if let Some(last) = zone::last_record(&snapshot, shard)? {
            if zone.contains(&last.max_message, pointer.as_ref()) {
                if block.seqno <= last.seqno {
                    return Ok(None);
                }
                if block.seqno != last.seqno + 1 {
                    return Err(QueueError::NonSequentialSeqno {
                        shard,
                        new: block.seqno,
                        last: last.seqno,
                    });
                }
            }
        }
    }

    // 3. Below the commit pointer: the real first message, never the statistics bound.
    if let (Some(pointer), Some(first)) = (pointer, diff.min_message()) {
        if first <= pointer.queue_key {
            return Err(QueueError::BelowCommitPointer {
                block,
                first,
                pointer: pointer.queue_key,
            });
        }
    }

    // 4. Consistency.
    if statistics.shard != shard {
        return Err(QueueError::ShardMismatch {
            block,
            statistics: statistics.shard,
        });
    }
    let tail_key = TailKey {
        shard,
        max_message: statistics.max_message,
    };
    if snapshot.contains::<IntMsgDiffsTail>(&tail_key)? {
        return Err(QueueError::MaxMessageCollision {
            block,
            max_message: statistics.max_message,
        });
    }

    // 5. Batch (the destination check runs while the batch is built; an error discards it).
    let mut batch = Batch::new();
    let mut value = Vec::with_capacity(512);
    for (key, message) in &diff.messages {
        let Some(dest) = RouterAddr::from_int_addr(message.destination()) else {
            return Err(QueueError::NonStdDestination { block, key: *key });
        };
        let partition = diff.router.lookup(message.source(), message.destination());
        let message_key = MessageKey {
            partition,
            shard,
            key: *key,
        };
        value.clear();
        message.serialize(&mut value);
        let entry = MessageEntry {
            dest_workchain: dest.workchain,
            dest_prefix: dest.prefix(),
            body: std::mem::take(&mut value),
        };
        db.batch_put::<ShardIntMessages>(&mut batch, &message_key, &entry);
        value = entry.body;
    }
    for (partition, dests) in &statistics.counts {
        for (dest, count) in dests {
            let key = StatKey {
                shard,
                partition: *partition,
                max_message: statistics.max_message,
                dest: *dest,
            };
            db.batch_put::<IntMsgStatistics>(&mut batch, &key, &Count(*count));
        }
    }
    db.batch_put::<IntMsgDiffsTail>(&mut batch, &tail_key, &TailSeqno(block.seqno));
    let (router_src, router_dst) = diff.router.to_tl();
    let record = DiffInfo {
        min_message: statistics.min_message,
        max_message: statistics.max_message,
        shards_messages_count: statistics.shards_messages_count.clone(),
        hash: *diff_hash,
        processed_to: diff.processed_to.clone(),
        router_src,
        router_dst,
        seqno: block.seqno,
    };
    db.batch_put::<IntMsgDiffInfo>(
        &mut batch,
        &DiffInfoKey {
            shard,
            seqno: block.seqno,
        },
        &record,
    );
    drop(snapshot);

    Ok(Some(PendingDiff {
        batch,
        db,
        block,
        message_count: diff.messages.len(),
        _shard_guard: shard_guard,
        _global_guard: global_guard,
    }))
}
