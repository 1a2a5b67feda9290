//! The delete primitive (queue.md §5.5): inclusive (partition, shard, from, to) ranges removed in one batch
//! from messages, statistics (by 54-byte diff prefix, never 87-byte keys), tail and records.

use std::collections::BTreeSet;

use regolith_formats::ShardIdent;
use rocksdb::WriteBatch;

use crate::db::{iter_status, FailPoints, QueueDb, QueueSnapshot};
use crate::error::Result;
use crate::key::{increment_be, PartitionIdx, QueueKey};
use crate::storage::CompactionJob;
use crate::tables::{
    diff_prefix, Codec, DiffInfoKey, IntMsgDiffInfo, IntMsgDiffsTail, IntMsgStatistics, MessageKey,
    ShardIntMessages, Table, TailKey, TailSeqno,
};

/// An inclusive delete range of one partition of one source shard.
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

/// The exclusive end of an inclusive range: the key plus one as a big-endian number of the same width;
/// on overflow, a longer all-ff key that sorts after every key of the family.
fn exclusive_end(inclusive_end: &[u8]) -> Vec<u8> {
    let mut end = inclusive_end.to_vec();
    if increment_be(&mut end) {
        end
    } else {
        vec![0xff; inclusive_end.len() + 1]
    }
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
    let mut batch = WriteBatch::default();
    let mut outcome = DeleteOutcome::default();
    let mut tail_done = BTreeSet::new();

    let push = |batch: &mut WriteBatch,
                jobs: &mut Vec<CompactionJob>,
                table: &'static str,
                from: Vec<u8>,
                to: Vec<u8>| {
        batch.delete_range_cf(db.cf_by_name(table), &from, &to);
        jobs.push(CompactionJob { table, from, to });
    };

    for range in ranges {
        if range.from > range.to {
            continue;
        }
        let (p, shard) = (range.partition, range.shard);

        let from = MessageKey {
            partition: p,
            shard,
            key: range.from,
        }
        .to_bytes()
        .to_vec();
        let to = exclusive_end(
            &MessageKey {
                partition: p,
                shard,
                key: range.to,
            }
            .to_bytes(),
        );
        push(
            &mut batch,
            &mut outcome.compactions,
            ShardIntMessages::NAME,
            from,
            to,
        );

        let from = diff_prefix(&shard, p, &range.from).to_vec();
        let to = exclusive_end(&diff_prefix(&shard, p, &range.to));
        push(
            &mut batch,
            &mut outcome.compactions,
            IntMsgStatistics::NAME,
            from,
            to,
        );

        // Tail entries and records belong to the shard: one scan per distinct (shard, from, to).
        if !tail_done.insert((shard, range.from, range.to)) {
            continue;
        }
        let tail_from = TailKey {
            shard,
            max_message: range.from,
        }
        .to_bytes()
        .to_vec();
        let tail_to = exclusive_end(
            &TailKey {
                shard,
                max_message: range.to,
            }
            .to_bytes(),
        );
        let mut seqnos: Option<(u32, u32)> = None;
        let mut it = snapshot.iter::<IntMsgDiffsTail>(&tail_from, Some(&tail_to));
        while let Some((_, v)) = it.item() {
            let seqno = TailSeqno::decode(v)?.0;
            outcome.tail_entries += 1;
            seqnos = Some(match seqnos {
                None => (seqno, seqno),
                Some((lo, hi)) => (lo.min(seqno), hi.max(seqno)),
            });
            it.next();
        }
        iter_status(&it, "scanning the diff tail")?;
        drop(it);
        // Seqno 0 included: the record range is [min_found, max_found] whatever the values.
        if let Some((lo, hi)) = seqnos {
            push(
                &mut batch,
                &mut outcome.compactions,
                IntMsgDiffsTail::NAME,
                tail_from,
                tail_to,
            );
            let from = DiffInfoKey { shard, seqno: lo }.encode();
            let to = exclusive_end(&DiffInfoKey { shard, seqno: hi }.encode());
            push(
                &mut batch,
                &mut outcome.compactions,
                IntMsgDiffInfo::NAME,
                from,
                to,
            );
        }
    }
    drop(snapshot);

    FailPoints::hit(&db.fail_points.delete_batch, "delete batch")?;
    db.write(batch, "deleting queue ranges")?;
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exclusive_end_increments_or_extends() {
        assert_eq!(exclusive_end(&[0, 0xff]), vec![1, 0]);
        assert_eq!(exclusive_end(&[0xff, 0xff]), vec![0xff, 0xff, 0xff]);
        // The extended end sorts after every key of the original width.
        assert!([0xffu8, 0xff].as_slice() < exclusive_end(&[0xff, 0xff]).as_slice());
    }
}
