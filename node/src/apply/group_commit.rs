//! Group commit of the apply path: applied mc block groups become durable, and the queue commits on them, on a
//! worker thread, in apply order, with two log syncs per round however many groups the round takes.
//!
//! The apply thread writes a group (the shard blocks an mc block brings and the mc block: parts, connections,
//! archive entries, queue diffs, and last the last applied mc block), all without a sync, hands the mc block
//! over and goes on with the next group. Each round of the worker takes every group handed over so far and:
//! 1. syncs the core database's log: those groups are durable (the log is one sequence, so a crash, even a
//!    power loss, keeps a prefix of the writes: whole groups up to some point, then at most part of one);
//! 2. commits the queue on each of their mc blocks in order and syncs the queue's log once.
//!
//! A queue commit is written only after the core sync that covers its mc block, so the queue is never
//! committed beyond the blocks that survive a crash (queue.md §5.4 `QueueAheadOfAppliedState` cannot happen).
//! Whatever a crash cuts off is repaired at the next start: a partial group by the startup check and archive
//! recovery (storage.md §7.7, §8.7) and by importing the group again, a queue behind the core by the queue start
//! procedure, which re-applies the diffs of the blocks applied after the last commit. A round's two syncs
//! cover one group when the disk keeps up with the apply thread, and more when it does not: at most 2 fsyncs
//! per mc block.

use std::sync::mpsc;

use anyhow::{Context, Result};
use regolith_formats::{BlockId, CheckedBlock};
use regolith_queue::{MessageQueue, TopBlock};
use regolith_storage::Storage;

use crate::queue_sync::{self, NodeQueue};

/// The worker stopped on an error; [`GroupCommitter::finish`] returns it.
#[derive(Debug)]
pub struct Stopped;

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the group commit stopped")
    }
}

impl std::error::Error for Stopped {}

struct Job {
    mc: BlockId,
    top_blocks: Vec<TopBlock>,
}

/// Makes applied groups durable and commits the queue on them, off the apply thread.
pub struct GroupCommitter {
    tx: Option<mpsc::Sender<Job>>,
    worker: Option<std::thread::JoinHandle<Result<()>>>,
}

impl GroupCommitter {
    /// Starts the worker.
    pub fn start(storage: &Storage, queue: &NodeQueue) -> Result<Self> {
        let (tx, rx) = mpsc::channel::<Job>();
        let storage = storage.clone();
        let queue = queue.clone();
        let worker = std::thread::Builder::new()
            .name("group-commit".into())
            .spawn(move || run(&storage, &queue, &rx))
            .context("cannot start the group commit thread")?;
        Ok(Self {
            tx: Some(tx),
            worker: Some(worker),
        })
    }

    /// Hands over an applied mc block: its group, up to the last applied mc block, is written. Fails with
    /// [`Stopped`] once the worker has stopped on an error.
    pub fn submit(&self, mc: &CheckedBlock) -> Result<()> {
        let job = Job {
            mc: *mc.id(),
            top_blocks: queue_sync::commit_entries(mc.id(), mc.top_shard_blocks()),
        };
        self.tx
            .as_ref()
            .and_then(|tx| tx.send(job).ok())
            .ok_or_else(|| Stopped.into())
    }

    /// Waits until every group handed over is durable and committed; the worker's error, if it stopped.
    pub fn finish(mut self) -> Result<()> {
        self.stop()
    }

    fn stop(&mut self) -> Result<()> {
        self.tx.take();
        match self.worker.take().map(std::thread::JoinHandle::join) {
            None => Ok(()),
            Some(Ok(result)) => result,
            Some(Err(panic)) => std::panic::resume_unwind(panic),
        }
    }
}

impl Drop for GroupCommitter {
    fn drop(&mut self) {
        if let Err(e) = self.stop() {
            tracing::error!(error = format!("{e:#}"), "group commit failed");
        }
    }
}

fn run(storage: &Storage, queue: &NodeQueue, rx: &mpsc::Receiver<Job>) -> Result<()> {
    while let Ok(first) = rx.recv() {
        let jobs: Vec<Job> = std::iter::once(first).chain(rx.try_iter()).collect();
        let (first, last) = (jobs[0].mc, jobs[jobs.len() - 1].mc);
        storage.sync_wal().with_context(|| {
            format!("making mc blocks {}..={} durable", first.seqno, last.seqno)
        })?;
        let top_blocks: Vec<Vec<TopBlock>> = jobs.into_iter().map(|j| j.top_blocks).collect();
        queue
            .commit_in_order(&top_blocks, &queue_sync::PARTITIONS)
            .with_context(|| {
                format!(
                    "committing the queue on mc blocks {}..={}",
                    first.seqno, last.seqno
                )
            })?;
        metrics::counter!("regolith_group_commit_rounds_total").increment(1);
        metrics::histogram!("regolith_group_commit_mc_blocks").record(top_blocks.len() as f64);
    }
    Ok(())
}

/// Registers the group commit's metrics before its first round.
pub(crate) fn register_metrics() {
    let _ = metrics::counter!("regolith_group_commit_rounds_total");
    let _ = metrics::histogram!("regolith_group_commit_mc_blocks");
}
