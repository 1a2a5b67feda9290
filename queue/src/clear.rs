//! Clearing the uncommitted zone (queue.md §5.3) for the caller's shards and partitions.

use regolith_formats::ShardIdent;

use crate::db::QueueSnapshot;
use crate::delete::{delete, DeleteRange};
use crate::error::Result;
use crate::key::{PartitionIdx, QueueKey};
use crate::storage::QueueStorage;
use crate::zone;

/// Deletes, per listed shard and partition, everything strictly above the shard's pointer (or everything,
/// without a pointer) in one delete call. Compaction runs afterwards in the background, outside the lock.
pub(crate) fn clear_uncommitted(
    storage: &QueueStorage,
    partitions: &[PartitionIdx],
    shards: &[ShardIdent],
) -> Result<()> {
    if partitions.is_empty() || shards.is_empty() {
        return Ok(());
    }
    let exclusive = storage.global.write();
    let snapshot = QueueSnapshot::new(storage.db().clone());
    let pointers = zone::all_pointers(&snapshot)?;
    drop(snapshot);

    let mut ranges = Vec::new();
    for shard in shards {
        let from = match pointers.get(shard) {
            // Strictly above the pointer; a pointer at MAX leaves nothing above it.
            Some(p) if p.queue_key == QueueKey::MAX => continue,
            Some(p) => p.queue_key.next_value(),
            None => QueueKey::MIN,
        };
        for partition in partitions {
            ranges.push(DeleteRange {
                partition: *partition,
                shard: *shard,
                from,
                to: QueueKey::MAX,
            });
        }
    }
    let outcome = delete(storage.db(), &ranges)?;
    drop(exclusive);

    tracing::info!(
        shards = shards.len(),
        partitions = partitions.len(),
        diffs = outcome.tail_entries,
        "cleared the uncommitted queue zone"
    );
    metrics::counter!("regolith_queue_clears_total").increment(1);
    // Every message and statistics row above a pointer belongs to a diff whose tail entry is above it too, so
    // a clear that found no tail entry deleted nothing and has nothing to compact. (A compaction would flush
    // the memtables first: at every node start, several synced table files for nothing.)
    if outcome.tail_entries > 0 {
        storage.compact_in_background(outcome.compactions);
    }
    Ok(())
}
