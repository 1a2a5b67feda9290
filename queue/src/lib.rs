//! `regolith-queue`: the internal message queue (queue.md).
//!
//! Internal messages wait here, per block diff, until a collation of their destination shard takes them.
//! Diffs enter uncommitted; an mc block commits them; a background GC deletes committed data once every
//! consumer has processed it. The queue has its own RocksDB (`<data>/int_queue`, seven column families: the six of queue.md §4 and the GC bounds).
//!
//! - [`QueueStorage`]: the database, its locks, and the cold-boot import of a persistent queue state;
//! - [`QueueFactory`] / [`Queue`] / [`MessageQueue`]: the facade — apply, commit, clear, iterators, queries,
//!   the node-start procedure, and the GC task;
//! - [`diff_from_block`]: the diff of a block received from the network ([`diff_from_checked`] for a block
//!   checked on the apply path, whose TL diff is already parsed and hashed);

mod apply;
mod block_diff;
mod clear;
mod commit;
mod config;
mod delete;
mod diff;
mod diff_info;
mod error;
mod gc;
mod import;
mod iterator;
mod key;
mod message;
mod message_boc;
mod overview;
mod queue;
mod router;
mod start;
mod stats;
mod storage;
mod zone;
// The raw database and its tables are the crate's own; tests that check rows, arm fail points or run the
// delete primitive directly reach them with `test-utils`.
regolith_kv::test_hook_modules!(db, tables);

pub use apply::PendingDiff;
pub use block_diff::{diff_from_block, diff_from_checked, diff_from_out_msgs, BlockQueueDiff};
pub use config::{QueueConfig, DEFAULT_GC_INTERVAL};
#[cfg(feature = "test-utils")]
pub use db::{FailPoints, QueueDb, QueueSnapshot};
#[cfg(feature = "test-utils")]
pub use delete::DeleteRange;
pub use diff::{CommitPointer, DiffStatistics, PartitionCounts, QueueDiffWithMessages, TopBlock};
pub use diff_info::DiffInfo;
pub use error::{ImportFailure, QueueError, Result};
pub use gc::{GcBounds, GcTickReport};
pub use import::ImportSummary;
pub use iterator::QueueIterator;
pub use key::{BoundedShardRange, PartitionIdx, QueueKey, ShardRange};
pub use message::{EnqueuedMessage, MessageValue};
pub use overview::{DiffOverview, QueueOverview};
pub use queue::{DynMessageQueue, MessageQueue, Queue, QueueFactory};
pub use regolith_kv::KvError;
pub use router::{PartitionRouter, RouterAddr, RouterHalf};
pub use stats::{AccountStatistics, SeparatedStatistics};
pub use storage::{QueueStorage, QUEUE_DB_DIR};
pub use zone::DiffZone;

#[cfg(feature = "test-utils")]
impl QueueStorage {
    /// Runs the delete primitive (§5.5) directly: inclusive ranges, one batch, compaction afterwards.
    pub fn delete_ranges(&self, ranges: &[DeleteRange]) -> Result<()> {
        let outcome = delete::delete(self.db(), ranges)?;
        storage::run_compactions(self.db(), &outcome.compactions);
        Ok(())
    }
}

/// Registers the queue's metrics with the installed recorder, so that a dashboard shows 0, not "no data",
/// before their first event (the GC bounds, labelled per partition and shard, appear with the first GC).
pub fn register_metrics() {
    for name in [
        "regolith_queue_clears_total",
        "regolith_queue_commits_total",
        "regolith_queue_diffs_applied_total",
        "regolith_queue_messages_applied_total",
        "regolith_queue_gc_deletes_total",
        "regolith_queue_gc_diffs_removed_total",
    ] {
        let _ = metrics::counter!(name);
    }
    let _ = metrics::histogram!("regolith_queue_gc_tick_seconds");
}
