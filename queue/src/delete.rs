//! The delete primitive (queue.md §5.5): inclusive (partition, shard, from, to) ranges removed in one batch
//! from messages, statistics (by 54-byte diff prefix, never 87-byte keys), tail and records.

use std::collections::BTreeSet;

use regolith_formats::ShardIdent;
use regolith_kv::{Batch, KeyRange, Table};

use crate::db::{QueueDb, QueueSnapshot};
use crate::error::Result;
use crate::key::{PartitionIdx, QueueKey};
use crate::storage::CompactionJob;
use crate::tables::{
    DiffInfoKey, DiffPrefix, IntMsgDiffInfo, IntMsgDiffsTail, IntMsgStatistics, MessageKey,
    QueueTables, ShardIntMessages, TailKey, TailSeqno,
};

/// Adds a range delete of `range` in table `T` to the batch, and its compaction to the jobs.
fn push<T: Table<Schema = QueueTables>>(
    db: &QueueDb,
    batch: &mut Batch<QueueTables>,
    jobs: &mut Vec<CompactionJob>,
    range: KeyRange,
) {
    db.batch_delete_range::<T>(batch, &range);
    jobs.push(CompactionJob::of::<T>(range));
}

/// An inclusive delete range of one partition of one source shard (public only for the `test-utils` hook
/// `QueueStorage::delete_ranges`).
#[cfg_attr(not(feature = "test-utils"), allow(unreachable_pub))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeleteRange {
    /// Partition.
    pub partition: PartitionIdx,
    /// Source shard.
    pub shard: ShardIdent,
    /// First key (inclusive).
    pub from: QueueKey,
    /// Last key (inclusive).
    pub to: QueueKey,
}

/// What a delete call removed, for logs, metrics and compaction.
#[derive(Debug, Default)]
pub(crate) struct DeleteOutcome {
    pub compactions: Vec<CompactionJob>,
    pub tail_entries: usize,
}

/// Deletes the ranges in one batch; scans the tail on one snapshot.
pub(crate) fn delete(
    db: &std::sync::Arc<QueueDb>,
    ranges: &[DeleteRange],
) -> Result<DeleteOutcome> {
    let snapshot = QueueSnapshot::new(db.clone());
    let mut batch = Batch::new();
    let mut outcome = DeleteOutcome::default();
    let mut tail_done = BTreeSet::new();

    for range in ranges {
        if range.from > range.to {
            continue;
        }
        let (p, shard) = (range.partition, range.shard);

        let message = |key| MessageKey {
            partition: p,
            shard,
            key,
        };
        push::<ShardIntMessages>(
            db,
            &mut batch,
            &mut outcome.compactions,
            KeyRange::inclusive(&message(range.from), &message(range.to)),
        );

        let diff = |max_message| DiffPrefix {
            shard,
            partition: p,
            max_message,
        };
        push::<IntMsgStatistics>(
            db,
            &mut batch,
            &mut outcome.compactions,
            KeyRange::inclusive(&diff(range.from), &diff(range.to)),
        );

        // Tail entries and records belong to the shard: one scan per distinct (shard, from, to).
        if !tail_done.insert((shard, range.from, range.to)) {
            continue;
        }
        let tail = |max_message| TailKey { shard, max_message };
        let tail_range = KeyRange::inclusive(&tail(range.from), &tail(range.to));
        let mut seqnos: Option<(u32, u32)> = None;
        for row in snapshot.iter::<IntMsgDiffsTail>(tail_range.clone()) {
            let (_, TailSeqno(seqno)) = row?;
            outcome.tail_entries += 1;
            seqnos = Some(match seqnos {
                None => (seqno, seqno),
                Some((lo, hi)) => (lo.min(seqno), hi.max(seqno)),
            });
        }
        // Seqno 0 included: the record range is [min_found, max_found] whatever the values.
        if let Some((lo, hi)) = seqnos {
            push::<IntMsgDiffsTail>(db, &mut batch, &mut outcome.compactions, tail_range);
            push::<IntMsgDiffInfo>(
                db,
                &mut batch,
                &mut outcome.compactions,
                KeyRange::inclusive(
                    &DiffInfoKey { shard, seqno: lo },
                    &DiffInfoKey { shard, seqno: hi },
                ),
            );
        }
    }
    drop(snapshot);

    db.fail_points.delete_batch.check("delete batch")?;
    db.write(batch, "deleting queue ranges")?;
    Ok(outcome)
}
