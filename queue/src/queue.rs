//! The facade (queue.md §7): [`MessageQueue`] (used as `Arc<dyn MessageQueue<V>>`), its implementation
//! [`Queue`], and [`QueueFactory`], which starts the GC task.

use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::sync::Arc;

use regolith_formats::{BlockId, HashBytes, ShardIdent};
use tycho_types::models::BlockIdShort;

use crate::apply::{prepare_diff, PendingDiff};
use crate::config::QueueConfig;
use crate::diff::{CommitPointer, DiffStatistics, QueueDiffWithMessages, TopBlock};
use crate::diff_info::DiffInfo;
use crate::error::{QueueError, Result};
use crate::gc::{GcBounds, GcState, GcTask, GcTickReport};
use crate::iterator::QueueIterator;
use crate::key::{BoundedShardRange, PartitionIdx, QueueKey, ShardRange};
use crate::message::MessageValue;
use crate::router::PartitionRouter;
use crate::stats::{self, AccountStatistics, SeparatedStatistics};
use crate::storage::QueueStorage;
use crate::zone::{self, DiffZone};

/// The queue as collation and sync see it. Blocking methods: call them from a blocking context.
pub trait MessageQueue<V: MessageValue>: Send + Sync {
    /// An iterator over one partition for `for_shard`, with bounds normalised per §2.
    fn create_iterator(
        &self,
        for_shard: ShardIdent,
        partition: PartitionIdx,
        ranges: &[BoundedShardRange],
    ) -> Result<QueueIterator<V>>;
    /// Per destination, the sum over every range × partition of the selected diffs' rows.
    fn statistics(
        &self,
        partitions: &[PartitionIdx],
        ranges: &[BoundedShardRange],
    ) -> Result<AccountStatistics>;
    /// Partition → diff `max_message` → destination → count over one range.
    fn separated_statistics(
        &self,
        partitions: &[PartitionIdx],
        range: &BoundedShardRange,
    ) -> Result<SeparatedStatistics>;
    /// Checks a diff and prepares its batch (§5.1); `None` when there is nothing to write.
    fn prepare_diff(
        &self,
        diff: &QueueDiffWithMessages<V>,
        block: BlockIdShort,
        diff_hash: &HashBytes,
        statistics: &DiffStatistics,
        check_sequence: Option<DiffZone>,
    ) -> Result<Option<PendingDiff>>;
    /// `prepare_diff` followed at once by `write`; returns whether anything was written.
    fn apply_diff(
        &self,
        diff: &QueueDiffWithMessages<V>,
        block: BlockIdShort,
        diff_hash: &HashBytes,
        statistics: &DiffStatistics,
        check_sequence: Option<DiffZone>,
    ) -> Result<bool>;
    /// Commits an mc block and its top shard blocks (§5.2); durable when it returns.
    fn commit(&self, top_blocks: &[TopBlock], partitions: &[PartitionIdx]) -> Result<()>;
    /// Commits several mc blocks in order, each as [`Self::commit`] does, with one log sync for all of them:
    /// every one is durable when it returns. An error stops at its mc block; the commits before it stay.
    fn commit_in_order(
        &self,
        mc_blocks: &[Vec<TopBlock>],
        partitions: &[PartitionIdx],
    ) -> Result<()>;
    /// Deletes the uncommitted zone of the listed shards and partitions (§5.3).
    fn clear_uncommitted(&self, partitions: &[PartitionIdx], shards: &[ShardIdent]) -> Result<()>;
    /// The record (shard, seqno) if it lies in `zone`.
    fn diff_info(&self, shard: ShardIdent, seqno: u32, zone: DiffZone) -> Result<Option<DiffInfo>>;
    /// Whether a record exists for the block (either zone).
    fn diff_exists(&self, block: BlockIdShort) -> Result<bool>;
    /// The highest seqno among the shard's records.
    fn last_applied_seqno(&self, shard: ShardIdent) -> Result<Option<u32>>;
    /// Every shard's commit pointer.
    fn commit_pointers(&self) -> Result<BTreeMap<ShardIdent, CommitPointer>>;
    /// The last committed mc block.
    fn last_committed_mc_block(&self) -> Result<Option<BlockId>>;
    /// The number of the shard's diffs with `max_message > from`.
    fn diffs_tail_len(&self, shard: ShardIdent, from: &QueueKey) -> Result<u32>;
    /// The router of a written block and that partition's statistics of it (§5.7).
    fn router_and_statistics(
        &self,
        block: BlockIdShort,
        record: &DiffInfo,
        partition: PartitionIdx,
    ) -> Result<(PartitionRouter, DiffStatistics)>;
    /// The node-start procedure (§5.4 steps 2–3): the last committed mc block must not be ahead of
    /// `last_applied_mc_block`, then the uncommitted zone of MC and `current_shards` is cleared.
    fn prepare_for_start(
        &self,
        last_applied_mc_block: &BlockId,
        current_shards: &[ShardIdent],
    ) -> Result<()>;
}

/// Builds the queue on an opened storage.
pub struct QueueFactory {
    storage: Arc<QueueStorage>,
    zerostate_id: BlockId,
    config: QueueConfig,
}

impl QueueFactory {
    /// A factory for the network with this zerostate.
    pub fn new(storage: Arc<QueueStorage>, zerostate_id: BlockId, config: QueueConfig) -> Self {
        Self {
            storage,
            zerostate_id,
            config,
        }
    }

    /// Creates the queue and starts its GC task (needs a tokio runtime).
    pub fn create<V: MessageValue>(self) -> Result<Arc<Queue<V>>> {
        self.config.validate()?;
        let gc = Arc::new(GcState::load(self.storage.db())?);
        let task = GcTask::start(
            gc.clone(),
            Arc::downgrade(&self.storage),
            self.config.gc_interval,
        );
        Ok(Arc::new(Queue {
            storage: self.storage,
            zerostate_id: self.zerostate_id,
            gc,
            gc_task: Some(task),
            _message: PhantomData,
        }))
    }

    /// Creates the queue without a GC task (tools and tests that drive ticks with [`Queue::run_gc_tick`]).
    pub fn create_without_gc<V: MessageValue>(self) -> Result<Arc<Queue<V>>> {
        self.config.validate()?;
        let gc = Arc::new(GcState::load(self.storage.db())?);
        Ok(Arc::new(Queue {
            storage: self.storage,
            zerostate_id: self.zerostate_id,
            gc,
            gc_task: None,
            _message: PhantomData,
        }))
    }
}

/// The queue implementation.
pub struct Queue<V> {
    // Field order: the GC task stops (and waits for a running tick) before the storage is released.
    gc_task: Option<GcTask>,
    gc: Arc<GcState>,
    storage: Arc<QueueStorage>,
    zerostate_id: BlockId,
    _message: PhantomData<fn() -> V>,
}

impl<V: MessageValue> Queue<V> {
    /// The storage.
    pub fn storage(&self) -> &Arc<QueueStorage> {
        &self.storage
    }

    /// A copy of the GC bounds set by commits.
    pub fn gc_delete_until(&self) -> GcBounds {
        self.gc.delete_until()
    }

    /// Runs one GC tick now (tools and tests); `None` if GC is stopped.
    pub fn run_gc_tick(&self) -> Option<GcTickReport> {
        self.gc.run_tick(&Arc::downgrade(&self.storage))
    }

    /// Stops the GC task and waits for a running tick to finish.
    pub fn stop_gc(&self) {
        self.gc.stop();
    }

    /// An iterator over normalised ranges.
    pub fn iterator(
        &self,
        partition: PartitionIdx,
        ranges: &[ShardRange],
        for_shard: ShardIdent,
    ) -> Result<QueueIterator<V>> {
        QueueIterator::new(self.storage.snapshot(), partition, ranges, for_shard)
    }
}

impl<V> Drop for Queue<V> {
    fn drop(&mut self) {
        self.gc_task.take();
        self.gc.stop();
    }
}

impl<V: MessageValue> MessageQueue<V> for Queue<V> {
    fn create_iterator(
        &self,
        for_shard: ShardIdent,
        partition: PartitionIdx,
        ranges: &[BoundedShardRange],
    ) -> Result<QueueIterator<V>> {
        let ranges: Vec<ShardRange> = ranges.iter().map(BoundedShardRange::normalize).collect();
        self.iterator(partition, &ranges, for_shard)
    }

    fn statistics(
        &self,
        partitions: &[PartitionIdx],
        ranges: &[BoundedShardRange],
    ) -> Result<AccountStatistics> {
        let ranges: Vec<ShardRange> = ranges.iter().map(BoundedShardRange::normalize).collect();
        stats::statistics(&self.storage.snapshot(), partitions, &ranges)
    }

    fn separated_statistics(
        &self,
        partitions: &[PartitionIdx],
        range: &BoundedShardRange,
    ) -> Result<SeparatedStatistics> {
        stats::separated_statistics(&self.storage.snapshot(), partitions, &range.normalize())
    }

    fn prepare_diff(
        &self,
        diff: &QueueDiffWithMessages<V>,
        block: BlockIdShort,
        diff_hash: &HashBytes,
        statistics: &DiffStatistics,
        check_sequence: Option<DiffZone>,
    ) -> Result<Option<PendingDiff>> {
        prepare_diff(
            &self.storage,
            diff,
            block,
            diff_hash,
            statistics,
            check_sequence,
        )
    }

    fn apply_diff(
        &self,
        diff: &QueueDiffWithMessages<V>,
        block: BlockIdShort,
        diff_hash: &HashBytes,
        statistics: &DiffStatistics,
        check_sequence: Option<DiffZone>,
    ) -> Result<bool> {
        match self.prepare_diff(diff, block, diff_hash, statistics, check_sequence)? {
            Some(pending) => {
                pending.write()?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn commit(&self, top_blocks: &[TopBlock], partitions: &[PartitionIdx]) -> Result<()> {
        crate::commit::commit(
            &self.storage,
            &self.gc,
            self.zerostate_id.seqno,
            top_blocks,
            partitions,
        )
    }

    fn commit_in_order(
        &self,
        mc_blocks: &[Vec<TopBlock>],
        partitions: &[PartitionIdx],
    ) -> Result<()> {
        crate::commit::commit_in_order(
            &self.storage,
            &self.gc,
            self.zerostate_id.seqno,
            mc_blocks,
            partitions,
        )
    }

    fn clear_uncommitted(&self, partitions: &[PartitionIdx], shards: &[ShardIdent]) -> Result<()> {
        crate::clear::clear_uncommitted(&self.storage, partitions, shards)
    }

    fn diff_info(&self, shard: ShardIdent, seqno: u32, zone: DiffZone) -> Result<Option<DiffInfo>> {
        zone::diff_info(&self.storage.snapshot(), shard, seqno, zone)
    }

    fn diff_exists(&self, block: BlockIdShort) -> Result<bool> {
        Ok(self
            .diff_info(block.shard, block.seqno, DiffZone::Both)?
            .is_some())
    }

    fn last_applied_seqno(&self, shard: ShardIdent) -> Result<Option<u32>> {
        Ok(zone::last_record(&self.storage.snapshot(), shard)?.map(|r| r.seqno))
    }

    fn commit_pointers(&self) -> Result<BTreeMap<ShardIdent, CommitPointer>> {
        zone::all_pointers(&self.storage.snapshot())
    }

    fn last_committed_mc_block(&self) -> Result<Option<BlockId>> {
        zone::last_committed_mc_block(&self.storage.snapshot())
    }

    fn diffs_tail_len(&self, shard: ShardIdent, from: &QueueKey) -> Result<u32> {
        stats::diffs_tail_len(&self.storage.snapshot(), shard, from)
    }

    fn router_and_statistics(
        &self,
        block: BlockIdShort,
        record: &DiffInfo,
        partition: PartitionIdx,
    ) -> Result<(PartitionRouter, DiffStatistics)> {
        stats::router_and_statistics(&self.storage.snapshot(), block.shard, record, partition)
    }

    fn prepare_for_start(
        &self,
        last_applied_mc_block: &BlockId,
        current_shards: &[ShardIdent],
    ) -> Result<()> {
        crate::start::check_committed_not_ahead(
            zone::last_committed_mc_block(&self.storage.snapshot())?,
            last_applied_mc_block,
        )?;
        let mut shards = vec![ShardIdent::MASTERCHAIN];
        shards.extend(
            current_shards
                .iter()
                .filter(|s| !s.is_masterchain())
                .copied(),
        );
        self.clear_uncommitted(&[0, 1], &shards)
    }
}

/// Errors helper for callers that need the queue as a trait object.
pub type DynMessageQueue<V> = Arc<dyn MessageQueue<V>>;

#[allow(dead_code)]
fn assert_object_safe<V: MessageValue>(queue: Arc<Queue<V>>) -> DynMessageQueue<V> {
    queue
}

#[allow(dead_code)]
fn assert_send_sync<V: MessageValue>() {
    fn is<T: Send + Sync>() {}
    is::<Queue<V>>();
    let _ = QueueError::NoMasterchainBlock;
}
