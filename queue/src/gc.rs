//! The GC task (queue.md §5.5): commits fill `delete_until` (partition → source → bound); every
//! `gc_interval` a tick deletes `[MIN, bound]` for each pair whose bound grew since it was last done.
//!
//! `delete_until` is also stored by every commit (table `int_msg_gc_bounds`, in the commit's batch) and
//! loaded when the queue opens, so a restarted node collects without waiting for its next commit. `done`
//! is in memory only, so after a restart the first delete starts at MIN again. A failed delete is
//! logged and its bound still counts as done (the next larger bound covers it); a panic inside a tick is
//! caught and the task continues; missed ticks are skipped, never burst.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use regolith_formats::ShardIdent;
use tokio::sync::Notify;

use crate::delete::{delete, DeleteRange};
use crate::key::{PartitionIdx, QueueKey};
use crate::storage::{run_compactions, QueueStorage};
use crate::tables::IntMsgGcBounds;

/// Partition → source shard → inclusive bound.
pub type GcBounds = BTreeMap<PartitionIdx, BTreeMap<ShardIdent, QueueKey>>;

/// What one tick did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct GcTickReport {
    /// (partition, shard, bound) pairs deleted successfully.
    pub deleted: Vec<(PartitionIdx, ShardIdent, QueueKey)>,
    /// Pairs whose delete failed (their bounds are recorded as done anyway).
    pub failed: Vec<(PartitionIdx, ShardIdent, QueueKey)>,
    /// Pairs skipped because their bound did not grow.
    pub skipped: usize,
}

/// Shared GC state: `delete_until` (filled by commit) and `done` (the task's own, doubling as the tick lock).
#[derive(Default)]
pub(crate) struct GcState {
    delete_until: Mutex<GcBounds>,
    done: Mutex<GcBounds>,
    stopped: AtomicBool,
}

impl GcState {
    /// The state with `delete_until` as the last commit stored it.
    pub(crate) fn load(db: &crate::db::QueueDb) -> crate::error::Result<Self> {
        let state = Self::default();
        {
            let mut delete_until = state.delete_until.lock();
            for row in db.iter::<IntMsgGcBounds>(regolith_kv::KeyRange::all()) {
                let (key, bound) = row?;
                delete_until
                    .entry(key.partition)
                    .or_default()
                    .insert(key.shard, bound);
            }
        }
        Ok(state)
    }

    /// Overwrites `delete_until[p][src]` for every partition and source.
    pub(crate) fn set_bounds(
        &self,
        partitions: &[PartitionIdx],
        bounds: &BTreeMap<ShardIdent, QueueKey>,
    ) {
        if bounds.is_empty() {
            return;
        }
        let mut delete_until = self.delete_until.lock();
        for p in partitions {
            let entry = delete_until.entry(*p).or_default();
            for (src, bound) in bounds {
                entry.insert(*src, *bound);
            }
        }
    }

    /// A copy of `delete_until`.
    pub(crate) fn delete_until(&self) -> GcBounds {
        self.delete_until.lock().clone()
    }

    /// Runs one tick now; a panic inside it is caught and logged. `None` if GC is stopped or the storage is
    /// gone.
    pub(crate) fn run_tick(&self, storage: &Weak<QueueStorage>) -> Option<GcTickReport> {
        // The `done` lock is the tick lock; take it before upgrading so that a stop that acquired it knows
        // no tick holds the storage any more.
        let mut done = self.done.lock();
        if self.stopped.load(Ordering::Acquire) {
            return None;
        }
        let storage = storage.upgrade()?;
        let started = Instant::now();
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| tick(self, &storage, &mut done)));
        drop(storage);
        metrics::histogram!("regolith_queue_gc_tick_seconds")
            .record(started.elapsed().as_secs_f64());
        match result {
            Ok(report) => Some(report),
            Err(panic) => {
                let msg = panic
                    .downcast_ref::<&str>()
                    .map(ToString::to_string)
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".into());
                tracing::error!(panic = %msg, "queue GC tick panicked; the task continues");
                metrics::counter!("regolith_queue_gc_tick_panics_total").increment(1);
                Some(GcTickReport::default())
            }
        }
    }

    /// Stops GC: no tick starts after this returns, and a running tick has finished.
    pub(crate) fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
        drop(self.done.lock());
    }
}

fn tick(state: &GcState, storage: &QueueStorage, done: &mut GcBounds) -> GcTickReport {
    if state.stopped.load(Ordering::Acquire) {
        return GcTickReport::default();
    }
    if storage.db().fail_points.gc_tick_panic.take() {
        panic!("injected GC tick panic");
    }
    let delete_until = state.delete_until();
    let mut report = GcTickReport::default();
    for (partition, shards) in &delete_until {
        for (shard, bound) in shards {
            let previous = done.get(partition).and_then(|m| m.get(shard));
            if previous.is_some_and(|p| p >= bound) {
                report.skipped += 1;
                continue;
            }
            let range = DeleteRange {
                partition: *partition,
                shard: *shard,
                from: QueueKey::MIN,
                to: *bound,
            };
            match delete(storage.db(), &[range]) {
                Ok(outcome) => {
                    // GC holds no queue lock, so it compacts inline after its batch.
                    run_compactions(storage.db(), &outcome.compactions);
                    metrics::counter!("regolith_queue_gc_deletes_total").increment(1);
                    metrics::counter!("regolith_queue_gc_diffs_removed_total")
                        .increment(outcome.tail_entries as u64);
                    tracing::debug!(partition, %shard, bound = ?bound, diffs = outcome.tail_entries, "queue GC deleted");
                    report.deleted.push((*partition, *shard, *bound));
                }
                Err(e) => {
                    tracing::error!(partition, %shard, bound = ?bound, error = %e, "queue GC delete failed");
                    metrics::counter!("regolith_queue_gc_errors_total").increment(1);
                    report.failed.push((*partition, *shard, *bound));
                }
            }
            done.entry(*partition).or_default().insert(*shard, *bound);
            metrics::gauge!(
                "regolith_queue_gc_bound_lt",
                "partition" => partition.to_string(),
                "shard" => shard.to_string()
            )
            .set(bound.lt as f64);
        }
    }
    report
}

/// The running GC task; dropping it stops the task and waits for a running tick.
pub(crate) struct GcTask {
    state: Arc<GcState>,
    notify: Arc<Notify>,
}

impl GcTask {
    /// Starts the task on the current tokio runtime; the first tick is immediate.
    pub(crate) fn start(
        state: Arc<GcState>,
        storage: Weak<QueueStorage>,
        interval: Duration,
    ) -> Self {
        let notify = Arc::new(Notify::new());
        let task_state = state.clone();
        let task_notify = notify.clone();
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(interval);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                tokio::select! {
                    _ = ticker.tick() => {}
                    _ = task_notify.notified() => break,
                }
                let state = task_state.clone();
                let storage = storage.clone();
                let finished = tokio::task::spawn_blocking(move || state.run_tick(&storage)).await;
                match finished {
                    Ok(Some(_)) => {}
                    Ok(None) => break,
                    Err(e) => tracing::error!(error = %e, "queue GC tick failed to run"),
                }
            }
            tracing::debug!("queue GC task stopped");
        });
        Self { state, notify }
    }
}

impl Drop for GcTask {
    fn drop(&mut self) {
        self.notify.notify_one();
        self.state.stop();
    }
}
