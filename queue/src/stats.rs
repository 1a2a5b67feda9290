//! Statistics and tail queries (queue.md §5.7). Statistics rows have diff granularity: a range selects whole
//! diffs by their `max_message` (from ≤ max < to). Each query reads from one snapshot.

use std::collections::BTreeMap;

use regolith_formats::ShardIdent;

use regolith_kv::KeyRange;

use crate::db::QueueSnapshot;
use crate::diff::{DiffStatistics, PartitionCounts};
use crate::diff_info::DiffInfo;
use crate::error::Result;
use crate::key::{full_shard, PartitionIdx, QueueKey, ShardRange};
use crate::router::{PartitionRouter, RouterAddr};
use crate::tables::{
    Count, DiffPrefix, IntMsgDiffsTail, IntMsgStatistics, ShardKey, StatKey, TailKey,
};

/// Destination → count.
pub type AccountStatistics = BTreeMap<RouterAddr, u64>;
/// Partition → diff `max_message` → destination → count.
pub type SeparatedStatistics = BTreeMap<PartitionIdx, BTreeMap<QueueKey, AccountStatistics>>;

/// Calls `f(row)` for every statistics row of diffs with from ≤ max_message < to.
fn for_each_row(
    snapshot: &QueueSnapshot,
    partition: PartitionIdx,
    range: &ShardRange,
    mut f: impl FnMut(StatKey, u64),
) -> Result<()> {
    if range.from >= range.to {
        return Ok(());
    }
    // Prefix bounds: a row whose diff max equals `to` sorts after the 54-byte `to` prefix, so it is excluded.
    let prefix = |key: &QueueKey| DiffPrefix {
        shard: range.shard,
        partition,
        max_message: *key,
    };
    let rows = KeyRange::between(&prefix(&range.from), &prefix(&range.to));
    for row in snapshot.iter::<IntMsgStatistics>(rows) {
        let (key, Count(count)) = row?;
        f(key, count);
    }
    Ok(())
}

/// Sums per destination the rows of every range × partition.
pub(crate) fn statistics(
    snapshot: &QueueSnapshot,
    partitions: &[PartitionIdx],
    ranges: &[ShardRange],
) -> Result<AccountStatistics> {
    let mut out = AccountStatistics::new();
    for range in ranges {
        for partition in partitions {
            for_each_row(snapshot, *partition, range, |key, count| {
                *out.entry(key.dest).or_default() += count;
            })?;
        }
    }
    Ok(out)
}

/// Per partition, per diff `max_message`, the destination counts.
pub(crate) fn separated_statistics(
    snapshot: &QueueSnapshot,
    partitions: &[PartitionIdx],
    range: &ShardRange,
) -> Result<SeparatedStatistics> {
    let mut out = SeparatedStatistics::new();
    for partition in partitions {
        for_each_row(snapshot, *partition, range, |key, count| {
            *out.entry(*partition)
                .or_default()
                .entry(key.max_message)
                .or_default()
                .entry(key.dest)
                .or_default() += count;
        })?;
    }
    Ok(out)
}

/// The number of the shard's diffs with `max_message > from`.
pub(crate) fn diffs_tail_len(
    snapshot: &QueueSnapshot,
    shard: ShardIdent,
    from: &QueueKey,
) -> Result<u32> {
    if *from == QueueKey::MAX {
        return Ok(0);
    }
    let start = TailKey {
        shard,
        max_message: from.next_value(),
    };
    let rows = KeyRange::prefix(&ShardKey(shard)).at_least(&start);
    let mut count = 0u32;
    for key in snapshot.keys::<IntMsgDiffsTail>(rows) {
        key?;
        count += 1;
    }
    Ok(count)
}

/// The router of a written block and its statistics in one partition (§5.7 `router_and_statistics`).
pub(crate) fn router_and_statistics(
    snapshot: &QueueSnapshot,
    shard: ShardIdent,
    record: &DiffInfo,
    partition: PartitionIdx,
) -> Result<(PartitionRouter, DiffStatistics)> {
    let range = ShardRange {
        shard,
        from: record.min_message,
        to: record.max_message.next_value(),
    };
    let counts = statistics(snapshot, &[partition], &[range])?;
    let mut shards_messages_count = BTreeMap::new();
    for (dest, count) in &counts {
        *shards_messages_count
            .entry(full_shard(i32::from(dest.workchain)))
            .or_default() += count;
    }
    let mut by_partition = PartitionCounts::new();
    if !counts.is_empty() {
        by_partition.insert(partition, counts);
    }
    Ok((
        record.router(),
        DiffStatistics {
            shard,
            min_message: record.min_message,
            max_message: record.max_message,
            counts: by_partition,
            shards_messages_count,
        },
    ))
}
