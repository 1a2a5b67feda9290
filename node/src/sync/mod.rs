//! Sync: `regolith run` follows the chain from its peers. Far behind, it finds the archive holding the next mc
//! block, downloads it (decompressed once into a spill file, framed and indexed as it streams) and applies it
//! group by group; near the tip, it asks for the next mc block with getNextBlockFull, verifies its proof
//! before anything else, then fetches the shard blocks that verified block references, walking back their
//! prev ids to what is applied. Both modes hand the groups to the apply pipeline ([`crate::apply`]), which
//! requires each group to be complete and to continue the applied chain before it stores anything of it.
//!
//! Blame goes only to the liar: the neighbour whose answer failed a check is punished as malicious; an
//! archive that brings nothing new is a useless answer (a lower score, no ban, and the step goes on block by
//! block); a neighbour without a block named by a verified block is not punished; local failures blame
//! nobody. Every failure is logged with its peer and counted by reason.

pub mod block_check;
mod checked_batch;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use regolith_formats::{BlockId, CheckedBlock};
use regolith_rpc::client::{
    ArchiveSearch, BlockchainRpcClient, ClientError, DataRequirement, Neighbour, Punishment,
};
use regolith_storage::Storage;
use tokio::sync::watch;

use crate::apply::{
    ApplyError, ApplySession, ArchiveGroups, Group, ImportOptions, ImportReport, Pipeline,
    Source as ApplySource, SpilledArchive,
};
use crate::progress::Progress;
use crate::queue_sync::NodeQueue;
use crate::sync::block_check::check_downloaded_block;
use crate::sync::checked_batch::CheckedBatch;

/// Where downloads wait for their import (under the data directory).
pub const SYNC_DIR: &str = "sync";

/// Pause when the chain has nothing new.
const IDLE_PAUSE: Duration = Duration::from_secs(1);
/// Pause after a failure, before the next attempt.
const RETRY_PAUSE: Duration = Duration::from_millis(500);
/// After an archive that failed or brought nothing, archives are not asked for this long: the steps go
/// block by block meanwhile (a peer that answers getArchiveInfo with useless archives cannot stall the sync).
const ARCHIVE_BACKOFF: Duration = Duration::from_secs(30);
/// Shard blocks fetched for one mc block at most (a guard against a peer that leads the walk astray).
const MAX_SHARD_WALK: usize = 1000;
/// Neighbours asked for one shard block before the step gives up on it.
const SHARD_BLOCK_ATTEMPTS: usize = 3;
/// Shard blocks of one level of the walk below an mc block downloaded at once.
const SHARD_BLOCK_CONCURRENCY: usize = 8;
/// The most mc blocks applied one getNextBlockFull at a time under one group commit (a stock peer).
const MAX_RUN_MC_BLOCKS: usize = 64;

/// `node.json` `sync`: how `run` follows the chain.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SyncConfig {
    /// Far behind, download whole archives (`false`: every block with getNextBlockFull and getBlockFull).
    pub archives: bool,
    /// Block by block, ask regolith peers for up to 16 mc blocks with their shard blocks in one answer
    /// (`regolith.getNextBlocksFull`); stock peers, which leave it unanswered, get getNextBlockFull.
    pub batches: bool,
}

impl Default for SyncConfig {
    fn default() -> Self {
        Self {
            archives: true,
            batches: true,
        }
    }
}

/// Where a group of blocks came from (the `source` label of `regolith_sync_blocks_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    Archive,
    Block,
}

impl Source {
    fn label(self) -> &'static str {
        match self {
            Self::Archive => "archive",
            Self::Block => "block",
        }
    }
}

/// Blocks applied by the sync, per source (shared with whoever watches it).
#[derive(Debug, Default)]
pub struct SyncStats {
    /// Blocks applied from downloaded archives.
    pub from_archives: std::sync::atomic::AtomicU64,
    /// Blocks applied from getNextBlockFull / getBlockFull downloads.
    pub from_blocks: std::sync::atomic::AtomicU64,
    /// Steps that failed.
    pub failures: std::sync::atomic::AtomicU64,
    /// Batches (`regolith.getNextBlocksFull` answers) applied from.
    pub batches: std::sync::atomic::AtomicU64,
}

/// The sync task's handles.
pub struct Sync {
    stats: Arc<SyncStats>,
    storage: Storage,
    pipeline: Pipeline,
    client: BlockchainRpcClient,
    dir: PathBuf,
    progress: Progress,
    display: SyncProgress,
    tip: TipEstimate,
    /// No archive is asked for before this instant.
    archives_paused_until: Option<Instant>,
    /// Archives are asked for at all (`sync.archives`).
    use_archives: bool,
    /// Set while the node is at its best peer's tip, if anyone asked ([`Self::marking_synced`]).
    synced: Option<Arc<std::sync::atomic::AtomicBool>>,
    /// Batches are asked for at all (`sync.batches`).
    use_batches: bool,
    /// The batch after the one being applied, asked for meanwhile.
    prefetch: Option<Prefetch>,
    /// Turns true when the sync is to stop ([`Self::run`]): a run of blocks ends at the next block.
    stop: Option<watch::Receiver<bool>>,
}

/// A batch asked for ahead: the one after mc block `after`. Dropping it stops the query.
struct Prefetch {
    after: BlockId,
    task: AbortOnDrop<Result<Option<CheckedBatch>, ClientError>>,
}

/// Why a step failed, and who is to blame: the reason is the `reason` label of
/// `regolith_sync_failures_total` and is logged with the peer.
struct StepError {
    reason: &'static str,
    peer: Option<tycho_network::PeerId>,
    error: anyhow::Error,
}

impl StepError {
    fn local(reason: &'static str, error: anyhow::Error) -> Self {
        Self {
            reason,
            peer: None,
            error,
        }
    }
}

impl From<anyhow::Error> for StepError {
    fn from(error: anyhow::Error) -> Self {
        Self::local("local", error)
    }
}

impl Sync {
    /// A sync over `storage` and `queue`, downloading through `client`, with temp files under `data_root`.
    pub fn new(
        storage: Storage,
        queue: NodeQueue,
        client: BlockchainRpcClient,
        data_root: &Path,
    ) -> Result<Self> {
        let dir = data_root.join(SYNC_DIR);
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        // Downloads that a crash interrupted are not imported: they are downloaded again.
        for entry in
            std::fs::read_dir(&dir).with_context(|| format!("cannot list {}", dir.display()))?
        {
            let path = entry?.path();
            if path.is_file() {
                std::fs::remove_file(&path)
                    .with_context(|| format!("cannot remove {}", path.display()))?;
            }
        }
        let pipeline = Pipeline::new(&storage, &queue, &ImportOptions::default())?;
        Ok(Self {
            stats: Arc::default(),
            storage,
            pipeline,
            client,
            dir,
            progress: Progress::new(true),
            display: SyncProgress::new(),
            tip: TipEstimate::default(),
            archives_paused_until: None,
            use_archives: true,
            synced: None,
            use_batches: true,
            prefetch: None,
            stop: None,
        })
    }

    /// Sets `synced` once the node is at its best peer's tip (the account API's getStatus `ready`).
    pub fn marking_synced(mut self, synced: Arc<std::sync::atomic::AtomicBool>) -> Self {
        self.synced = Some(synced);
        self
    }

    /// Publishes the newest applied states to `newest` (for the account API).
    pub fn publishing_states_to(mut self, newest: regolith_state::NewestStates) -> Self {
        self.pipeline.publish_states_to(newest);
        self
    }

    /// Keeps the shard states as `node.json` `states` says.
    pub fn with_states(mut self, config: &regolith_state::StatesConfig) -> Self {
        self.pipeline.set_states_config(config.clone());
        self
    }

    /// Applies `node.json` `sync`.
    pub fn with_config(mut self, config: &SyncConfig) -> Self {
        self.use_archives = config.archives;
        self.use_batches = config.batches;
        self
    }

    /// The counters of this sync.
    pub fn stats(&self) -> Arc<SyncStats> {
        self.stats.clone()
    }

    /// Runs until `stop` turns true.
    pub async fn run(mut self, mut stop: watch::Receiver<bool>) {
        tracing::info!("sync started");
        self.stop = Some(stop.clone());
        loop {
            if *stop.borrow() {
                break;
            }
            let started = Instant::now();
            let pause = match self.step().await {
                Ok(Some(n)) if n > 0 => {
                    // The time the sync works on blocks (its _sum against regolith_sync_blocks_total is the
                    // catch-up rate without the idle pauses).
                    metrics::histogram!("regolith_sync_step_seconds")
                        .record(started.elapsed().as_secs_f64());
                    Duration::ZERO
                }
                Ok(_) => IDLE_PAUSE,
                Err(e) => {
                    self.failed(&e);
                    RETRY_PAUSE
                }
            };
            self.show();
            // Never a loop without a pause unless blocks were applied.
            if pause > Duration::ZERO {
                tokio::select! {
                    _ = tokio::time::sleep(pause) => {}
                    _ = stop.changed() => {}
                }
            }
        }
        self.display.finish();
        tracing::info!("sync stopped");
    }

    /// Takes the result of one group of a run under one session (a batch, or a run of single blocks): true
    /// when the run goes on. A failure at the run's first group is the step's error; a later one is counted
    /// and logged, and what was applied before it stays.
    fn run_goes_on(&self, run: &mut RunOutcome, result: Result<usize, StepError>) -> bool {
        match result {
            Ok(n) => {
                run.applied += n;
                true
            }
            Err(e) if run.applied == 0 => {
                run.stopped = Some(e);
                false
            }
            Err(e) => {
                self.failed(&e);
                false
            }
        }
    }

    /// Counts and logs a failed step (or the failed part of a batch).
    fn failed(&self, e: &StepError) {
        self.stats
            .failures
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        fail(e.reason);
        match e.peer {
            Some(peer) => tracing::warn!(
                %peer,
                reason = e.reason,
                error = %format!("{:#}", e.error),
                "sync step failed"
            ),
            None => tracing::warn!(
                reason = e.reason,
                error = %format!("{:#}", e.error),
                "sync step failed"
            ),
        }
    }

    /// Height, rate, lag behind the best peer and ETA: on the terminal line, in the log, in metrics.
    fn show(&mut self) {
        let Ok(last) = self.last_applied() else {
            return;
        };
        let lag = self.tip.lag(last.seqno);
        // Also after a step that failed part-way: the groups before the failure are applied.
        metrics::gauge!("regolith_sync_last_applied_mc_seqno").set(f64::from(last.seqno));
        metrics::gauge!("regolith_sync_lag_blocks").set(f64::from(lag.unwrap_or(0)));
        if let Some(synced) = &self.synced {
            synced.store(lag == Some(0), std::sync::atomic::Ordering::Release);
        }
        let behind_clock = self
            .storage
            .handles()
            .load_handle(&last)
            .ok()
            .flatten()
            .map(|h| regolith_rpc::network::now_sec().saturating_sub(h.gen_utime()));
        if let Some(seconds) = behind_clock {
            metrics::gauge!("regolith_sync_lag_seconds").set(f64::from(seconds));
        }
        self.display.update(last.seqno, lag, behind_clock);
    }

    fn last_applied(&self) -> Result<BlockId> {
        self.pipeline.last_applied().map_err(ApplyError::into_inner)
    }

    /// One step: an archive when one is found, otherwise (or when it brought nothing) the next mc block.
    /// `Ok(Some(n))`: n blocks applied; `Ok(None)`: nothing new.
    async fn step(&mut self) -> Result<Option<usize>, StepError> {
        if self.client.overlay_client().neighbours().is_empty() {
            // Nobody to sync from yet (a lone node, or peers still being discovered).
            return Ok(None);
        }
        let last = self.last_applied()?;
        let next = last.seqno + 1;
        self.tip.probe(&self.client, last.seqno).await;
        let archives_paused = !self.use_archives
            || self
                .archives_paused_until
                .is_some_and(|t| Instant::now() < t);
        if !archives_paused {
            match self.client.find_archive(next).await {
                Ok(ArchiveSearch::Found(archive)) => {
                    // A committed archive holding `next`: that peer has applied a block after it.
                    self.tip.note_held(next + 1);
                    match self.archive_step(&archive).await {
                        Ok(n) if n > 0 => return Ok(Some(n)),
                        Ok(_) => {
                            // A useless answer, not a forgery: a lower score, no ban, and this step goes
                            // on block by block.
                            fail("useless_archive");
                            archive.neighbour.punish(Punishment::Slow);
                            tracing::warn!(
                                peer = %archive.neighbour.peer_id(),
                                archive = archive.id,
                                "the archive brought no new block; going block by block"
                            );
                            self.pause_archives();
                        }
                        Err(e) => {
                            self.pause_archives();
                            return Err(e);
                        }
                    }
                }
                Ok(ArchiveSearch::TooNew) => {}
                Err(e) => tracing::debug!(error = %e, mc_seqno = next, "no archive"),
            }
        }
        self.next_block(&last).await
    }

    fn pause_archives(&mut self) {
        self.archives_paused_until = Some(Instant::now() + ARCHIVE_BACKOFF);
    }

    /// Downloads an archive into a spill file (decompressed once, framed and indexed as it streams) and
    /// applies it group by group. Returns the blocks applied.
    async fn archive_step(
        &mut self,
        archive: &regolith_rpc::client::PendingArchive,
    ) -> Result<usize, StepError> {
        let neighbour = archive.neighbour.clone();
        let peer = *neighbour.peer_id();
        tracing::info!(
            archive = archive.id,
            size = archive.size,
            %peer,
            "downloading an archive"
        );
        let path = self.dir.join(format!("{}.spill", archive.id));
        let file = std::fs::File::create(&path)
            .with_context(|| format!("cannot create {}", path.display()))
            .map_err(|e| StepError::local("local", e))?;
        // The archive as served is kept beside it and offered to the archive storage, whose commit adopts it
        // when it holds exactly what the node would write for that archive.
        let copy_path = self.dir.join(format!("{}.archive", archive.id));
        let copy = std::fs::File::create(&copy_path)
            .with_context(|| format!("cannot create {}", copy_path.display()))
            .map_err(|e| StepError::local("local", e))?;
        // The client's verifier frames and indexes the stream as it arrives; the spill file is read from that
        // index.
        let downloaded = self
            .client
            .download_archive_indexed(
                archive,
                std::io::BufWriter::new(file),
                Some(Box::new(std::io::BufWriter::new(copy))),
                |_| {},
            )
            .await;
        let (file, index) = match downloaded {
            Ok(downloaded) => downloaded,
            Err(e) => {
                let _ = std::fs::remove_file(&copy_path);
                let _ = std::fs::remove_file(&path);
                return Err(StepError {
                    reason: "archive_download",
                    peer: Some(peer),
                    error: anyhow!("downloading archive {} from {peer}: {e}", archive.id),
                });
            }
        };
        let name = format!("archive {} from {peer}", archive.id);
        let spilled =
            SpilledArchive::downloaded(name.clone(), &path, file, index).map_err(|e| {
                let _ = std::fs::remove_file(&path);
                StepError::local("local", e)
            })?;
        match spilled.archive_id() {
            Some(id) if u64::from(id) == archive.id => self
                .storage
                .archives()
                .offer_archive_file(id, copy_path, true),
            _ => {
                let _ = std::fs::remove_file(&copy_path);
            }
        }
        let mut groups = ArchiveGroups::new(spilled);
        let applied = self
            .pipeline
            .apply(ApplySource::Archive(&mut groups), &name, &self.progress)
            .await;
        self.applied(Source::Archive, applied, &neighbour, "invalid_archive")
    }

    /// Near the tip: the next mc blocks in one batch from a regolith peer that answers
    /// `regolith.getNextBlocksFull`, otherwise a run of mc blocks with getNextBlockFull. Each mc block is
    /// verified (signatures, link to the last applied block) before any of the shard blocks it references
    /// is taken, then applied with them before the next one is looked at.
    async fn next_block(&mut self, last: &BlockId) -> Result<Option<usize>, StepError> {
        if self.use_batches {
            let fetched = match self.prefetch.take() {
                Some(mut ahead) if ahead.after == *last => (&mut ahead.task.0)
                    .await
                    .unwrap_or_else(|e| Err(ClientError::Internal(format!("the batch task: {e}")))),
                // Asked after a block that is not the last applied one (the batch before it failed).
                _ => match self
                    .client
                    .get_next_blocks_full(last, regolith_rpc::proto::MAX_BATCH_MC_BLOCKS)
                    .await
                {
                    Ok(Some(batch)) => Ok(Some(CheckedBatch::check_ahead(batch).await)),
                    Ok(None) => Ok(None),
                    Err(e) => Err(e),
                },
            };
            match fetched {
                Ok(Some(batch)) => {
                    // The next batch is asked for, and its blocks checked, while this one is applied.
                    let after = *batch.last_mc_id();
                    let client = self.client.clone();
                    self.prefetch = Some(Prefetch {
                        after,
                        task: AbortOnDrop(tokio::spawn(async move {
                            let batch = client
                                .get_next_blocks_full(
                                    &after,
                                    regolith_rpc::proto::MAX_BATCH_MC_BLOCKS,
                                )
                                .await?;
                            Ok(match batch {
                                Some(batch) => Some(CheckedBatch::check_ahead(batch).await),
                                None => None,
                            })
                        })),
                    });
                    self.stats
                        .batches
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    metrics::counter!("regolith_sync_batches_total").increment(1);
                    return self.apply_batch(last, batch).await.map(Some);
                }
                Ok(None) => {}
                // A refused batch (its sender is punished already) or a transport failure: counted,
                // and this step goes on with getNextBlockFull.
                Err(e) => self.failed(&StepError {
                    reason: "batch_download",
                    peer: None,
                    error: anyhow!("the batch after {last}: {e}"),
                }),
            }
        }
        self.block_run(last).await
    }

    /// The next mc blocks one getNextBlockFull at a time (a stock peer), up to [`MAX_RUN_MC_BLOCKS`] under one
    /// group commit: the block after each one is asked for as soon as that one arrived and passed its checks,
    /// while it is verified, gets its shard blocks and is applied. A block asked for ahead of one that then
    /// fails is dropped unused, and the run ends after the block being applied when the sync is to stop.
    /// `Ok(None)`: that peer's tip is ours.
    async fn block_run(&mut self, last: &BlockId) -> Result<Option<usize>, StepError> {
        let Some((mut mc_block, mut neighbour)) = next_checked_block(&self.client, *last).await?
        else {
            self.tip.note_held(last.seqno);
            return Ok(None);
        };
        let origin = format!("the blocks after mc block {}", last.seqno);
        let mut session = match self.pipeline.open_session(&origin) {
            Ok(session) => session,
            Err(e) => return Err(StepError::local("local", e.into_inner())),
        };
        let mut last = *last;
        let mut run = RunOutcome::default();
        for n in 1..=MAX_RUN_MC_BLOCKS {
            let ahead = (n < MAX_RUN_MC_BLOCKS).then(|| {
                let client = self.client.clone();
                let after = *mc_block.id();
                AbortOnDrop(tokio::spawn(async move {
                    next_checked_block(&client, after).await
                }))
            });
            let result = self
                .apply_next(&last, mc_block, &neighbour, None, Some(&mut session))
                .await;
            if !self.run_goes_on(&mut run, result) {
                break;
            }
            last = *session.last_applied();
            if self.stop.as_ref().is_some_and(|stop| *stop.borrow()) {
                break;
            }
            let Some(mut ahead) = ahead else { break };
            match (&mut ahead.0).await {
                Ok(Ok(Some(next))) => (mc_block, neighbour) = next,
                Ok(Ok(None)) => {
                    self.tip.note_held(last.seqno);
                    break;
                }
                Ok(Err(e)) => {
                    self.failed(&e);
                    break;
                }
                Err(e) => {
                    self.failed(&StepError::local(
                        "local",
                        anyhow!("asking for the block after {last}: {e}"),
                    ));
                    break;
                }
            }
        }
        if let Err(e) = self
            .pipeline
            .close_session(session, Ok(()), &self.progress)
            .await
        {
            return Err(StepError::local(
                "local",
                e.into_inner().context(format!("making {origin} durable")),
            ));
        }
        match run.stopped {
            Some(e) => Err(e),
            None => Ok(Some(run.applied)),
        }
    }

    /// Applies the mc blocks of a batch in order, each with its shard blocks (from the batch when it
    /// carries them). A failure after the first group stops the batch there: what was applied stays, the
    /// failure is counted and logged, and the next step goes on from the last applied block.
    async fn apply_batch(
        &mut self,
        last: &BlockId,
        mut batch: CheckedBatch,
    ) -> Result<usize, StepError> {
        let neighbour = batch.neighbour().clone();
        let peer = *neighbour.peer_id();
        let mut last = *last;
        let mut run = RunOutcome::default();
        // The batch's groups share one group commit: durable together when the session closes.
        let origin = format!("a batch from {peer}");
        let mut session = match self.pipeline.open_session(&origin) {
            Ok(session) => session,
            Err(e) => return Err(StepError::local("local", e.into_inner())),
        };
        while let Some(mc) = batch.next_mc().await {
            let result = match mc {
                Ok(mc) => {
                    self.apply_next(&last, mc, &neighbour, Some(&mut batch), Some(&mut session))
                        .await
                }
                Err(e) => {
                    neighbour.punish(Punishment::Malicious);
                    Err(StepError {
                        reason: "bad_block",
                        peer: Some(peer),
                        error: e.context(format!(
                            "mc block {} of a batch from {peer}",
                            last.seqno + 1
                        )),
                    })
                }
            };
            if !self.run_goes_on(&mut run, result) {
                break;
            }
            last = *session.last_applied();
        }
        if let Err(e) = self
            .pipeline
            .close_session(session, Ok(()), &self.progress)
            .await
        {
            return Err(StepError::local(
                "local",
                e.into_inner().context(format!("making {origin} durable")),
            ));
        }
        match run.stopped {
            Some(e) => Err(e),
            None => Ok(run.applied),
        }
    }

    /// Checks and verifies mc block `mc`, the one after `last` that `neighbour` sent, fetches the shard
    /// blocks it references (from `batch` first) and applies the group.
    async fn apply_next(
        &mut self,
        last: &BlockId,
        mc_block: CheckedBlock,
        neighbour: &Arc<Neighbour>,
        mut batch: Option<&mut CheckedBatch>,
        session: Option<&mut ApplySession>,
    ) -> Result<usize, StepError> {
        let peer = *neighbour.peer_id();
        let blame = |reason: &'static str, error: anyhow::Error| {
            neighbour.punish(Punishment::Malicious);
            StepError {
                reason,
                peer: Some(peer),
                error,
            }
        };
        let id = *mc_block.id();
        if !id.is_masterchain() || id.seqno != last.seqno + 1 {
            return Err(blame(
                "not_next",
                anyhow!("{peer} answered {id} as the block after {last}"),
            ));
        }
        let origin = format!("mc block {} from {peer}", last.seqno + 1);
        match self.pipeline.verify_next_mc(&mc_block, last, &origin).await {
            Ok(()) => {}
            Err(ApplyError::Invalid(e)) => return Err(blame("bad_proof", e)),
            Err(ApplyError::Local(e)) => return Err(StepError::local("local", e)),
        }
        self.tip.note_held(last.seqno + 1);

        // Shard blocks: from each top block of the verified mc block back by prev ids to what is applied,
        // one level at a time. Their ids come from a verified block: the batch's copy is taken when it has
        // one (a bad one is its sender's fault), the others are downloaded concurrently, and a neighbour
        // without one is not lying.
        let mut shards = Vec::new();
        let mut seen = HashSet::new();
        let mut level: Vec<BlockId> = mc_block.top_shard_blocks().iter().map(|t| t.id).collect();
        while !level.is_empty() {
            let mut wanted = Vec::with_capacity(level.len());
            for id in level.drain(..) {
                if seen.insert(id) && !self.is_applied(&id, last.seqno)? {
                    wanted.push(id);
                }
            }
            if seen.len() > MAX_SHARD_WALK {
                return Err(StepError::local(
                    "shard_walk",
                    anyhow!(
                        "more than {MAX_SHARD_WALK} unknown shard blocks below mc block {}",
                        mc_block.id()
                    ),
                ));
            }
            let mut missing = Vec::with_capacity(wanted.len());
            for id in wanted {
                let carried = match batch.as_deref_mut() {
                    Some(batch) => batch.take_shard(&id).await,
                    None => None,
                };
                let Some(data) = carried else {
                    missing.push(id);
                    continue;
                };
                let block = data.map_err(|e| {
                    blame(
                        "bad_block",
                        e.context(format!("shard block {id} of a batch from {peer}")),
                    )
                })?;
                level.extend(block.prev_ids().iter().copied());
                shards.push(block);
            }
            for chunk in missing.chunks(SHARD_BLOCK_CONCURRENCY) {
                let mut downloads = Vec::with_capacity(chunk.len());
                for id in chunk {
                    downloads.push(self.shard_block(id));
                }
                for block in futures_util::future::join_all(downloads).await {
                    let block = block?;
                    level.extend(block.prev_ids().iter().copied());
                    shards.push(block);
                }
            }
        }
        let group = Group::new(mc_block, shards);
        let applied = match session {
            Some(session) => {
                self.pipeline
                    .apply_in(session, &group, &origin, &self.progress)
                    .await
            }
            None => {
                self.pipeline
                    .apply(ApplySource::Groups(vec![group]), &origin, &self.progress)
                    .await
            }
        };
        self.applied(Source::Block, applied, neighbour, "invalid_group")
    }

    /// A shard block named by a verified mc block, from up to [`SHARD_BLOCK_ATTEMPTS`] neighbours; one whose
    /// answer fails the checks is punished.
    async fn shard_block(&self, id: &BlockId) -> Result<CheckedBlock, StepError> {
        let mut last_error = None;
        for _ in 0..SHARD_BLOCK_ATTEMPTS {
            let got = match self
                .client
                .get_block_full(id, DataRequirement::Optional)
                .await
            {
                Ok(got) => got,
                Err(e) => {
                    last_error = Some(StepError {
                        reason: "block_download",
                        peer: None,
                        error: anyhow!("shard block {id}: {e}"),
                    });
                    continue;
                }
            };
            let peer = *got.neighbour.peer_id();
            let Some(data) = got.data else {
                last_error = Some(StepError {
                    reason: "shard_block_not_found",
                    peer: Some(peer),
                    error: anyhow!("{peer} does not have shard block {id}"),
                });
                continue;
            };
            match check_downloaded_block(Some(id), &data) {
                Ok(block) => return Ok(block),
                Err(e) => {
                    got.neighbour.punish(Punishment::Malicious);
                    last_error = Some(StepError {
                        reason: "bad_block",
                        peer: Some(peer),
                        error: e.context(format!("shard block {id} from {peer}")),
                    });
                }
            }
        }
        Err(last_error.unwrap_or_else(|| {
            StepError::local(
                "no_neighbours",
                anyhow!("nobody to ask for shard block {id}"),
            )
        }))
    }

    fn is_applied(&self, id: &BlockId, last_applied: u32) -> Result<bool, StepError> {
        crate::apply::is_applied(&self.storage, id, last_applied)
            .map_err(|e| StepError::local("local", e))
    }

    /// Counts what the pipeline applied; a failure blames `neighbour` only when its data broke a rule
    /// (local failures blame nobody).
    fn applied(
        &mut self,
        source: Source,
        applied: Result<ImportReport, ApplyError>,
        neighbour: &Arc<Neighbour>,
        reason: &'static str,
    ) -> Result<usize, StepError> {
        match applied {
            Ok(report) => {
                metrics::counter!("regolith_sync_blocks_total", "source" => source.label())
                    .increment(report.blocks_imported as u64);
                let counter = match source {
                    Source::Archive => &self.stats.from_archives,
                    Source::Block => &self.stats.from_blocks,
                };
                counter.fetch_add(
                    report.blocks_imported as u64,
                    std::sync::atomic::Ordering::Relaxed,
                );
                metrics::gauge!("regolith_sync_last_applied_mc_seqno")
                    .set(f64::from(report.last_mc_seqno));
                self.report(report.last_mc_seqno, report.blocks_imported);
                Ok(report.blocks_imported)
            }
            Err(ApplyError::Invalid(e)) => {
                neighbour.punish(Punishment::Malicious);
                Err(StepError {
                    reason,
                    peer: Some(*neighbour.peer_id()),
                    error: e.context(format!("applying the {} download", source.label())),
                })
            }
            Err(ApplyError::Local(e)) => Err(StepError::local(
                "local",
                e.context(format!("applying the {} download", source.label())),
            )),
        }
    }

    fn report(&mut self, last_mc_seqno: u32, imported: usize) {
        self.display.applied(imported as u64);
        tracing::debug!(height = last_mc_seqno, imported, "synced");
    }
}

/// The mc block after `after` from a neighbour (getNextBlockFull), checked as it arrived (hashes, proof,
/// diff; a neighbour that sent a bad one is punished), with that neighbour; `None` when it has none.
async fn next_checked_block(
    client: &BlockchainRpcClient,
    after: BlockId,
) -> Result<Option<(CheckedBlock, Arc<Neighbour>)>, StepError> {
    let got = client
        .get_next_block_full(&after, DataRequirement::Optional)
        .await
        .map_err(|e| StepError {
            reason: "block_download",
            peer: None,
            error: anyhow!("the block after {after}: {e}"),
        })?;
    let Some(data) = got.data else {
        return Ok(None);
    };
    let peer = *got.neighbour.peer_id();
    let checked = tokio::task::spawn_blocking(move || check_downloaded_block(None, &data))
        .await
        .map_err(|e| StepError::local("local", anyhow!("checking the block after {after}: {e}")))?;
    match checked {
        Ok(block) => Ok(Some((block, got.neighbour))),
        Err(e) => {
            got.neighbour.punish(Punishment::Malicious);
            Err(StepError {
                reason: "bad_block",
                peer: Some(peer),
                error: e.context(format!("the next mc block from {peer}")),
            })
        }
    }
}

/// What a run of groups under one session did: the blocks applied, and the error that stopped it at its first
/// group.
#[derive(Default)]
struct RunOutcome {
    applied: usize,
    stopped: Option<StepError>,
}

/// A spawned task aborted when dropped (a block asked for ahead that is no longer wanted).
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn fail(reason: &'static str) {
    metrics::counter!("regolith_sync_failures_total", "reason" => reason).increment(1);
}

/// How often the tip probe runs.
const PROBE_INTERVAL: Duration = Duration::from_secs(10);
/// The probe stops narrowing once the estimate is this close (archives span 100 mc blocks).
const PROBE_PRECISION: u32 = 50;

/// The highest mc seqno a peer is known to hold. Stock peers have no query for their height, so it comes
/// from what they answer: a committed archive holding seqno s means the peer has applied a block after s
/// (getArchiveInfo answers tooNew for the archive being built); getNextBlockFull found/notFound tell the
/// next block exists or that the peer stands where we stand. Far behind, a probe searches the archives by
/// doubling steps, then halves the interval, to archive precision.
#[derive(Debug, Default)]
struct TipEstimate {
    best: Option<u32>,
    last_probe: Option<Instant>,
}

impl TipEstimate {
    fn note_held(&mut self, seqno: u32) {
        self.best = Some(self.best.map_or(seqno, |b| b.max(seqno)));
    }

    /// Blocks behind the best peer; `None` before anything is known.
    fn lag(&self, ours: u32) -> Option<u32> {
        self.best.map(|b| b.saturating_sub(ours))
    }

    async fn probe(&mut self, client: &BlockchainRpcClient, ours: u32) {
        if self
            .last_probe
            .is_some_and(|t| t.elapsed() < PROBE_INTERVAL)
        {
            return;
        }
        self.last_probe = Some(Instant::now());
        let start = self.best.unwrap_or(ours).max(ours);
        let lo = search_held(start, |s| async move {
            matches!(client.find_archive(s).await, Ok(ArchiveSearch::Found(_)))
        })
        .await;
        if lo > ours {
            self.note_held(lo);
        }
    }
}

/// The highest seqno known held, searched from `lo` (held or ours): steps doubling from 100 until one is not
/// held, then bisection to `PROBE_PRECISION`. `held(s)` true means a block after s exists.
async fn search_held<F, Fut>(mut lo: u32, held: F) -> u32
where
    F: Fn(u32) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let mut step = 100u32;
    let mut hi = None;
    for _ in 0..24 {
        let s = lo.saturating_add(step);
        if held(s).await {
            // A peer may claim to hold every seqno: the search ends at u32::MAX, never past it.
            lo = s.saturating_add(1);
            step = step.saturating_mul(2);
            if s == u32::MAX {
                break;
            }
        } else {
            hi = Some(s);
            break;
        }
    }
    if let Some(mut hi) = hi {
        while hi.saturating_sub(lo) > PROBE_PRECISION {
            let mid = lo + (hi - lo) / 2;
            if held(mid).await {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
    }
    lo
}

/// The sync's progress: a line on a terminal (stderr), log lines every few seconds otherwise.
struct SyncProgress {
    bar: Option<indicatif::ProgressBar>,
    /// (when, blocks applied so far): the rate is taken over the last `RATE_WINDOW`.
    samples: std::collections::VecDeque<(Instant, u64)>,
    applied: u64,
    last_log: Option<(Instant, u32)>,
}

/// The window of the blocks/s figure.
const RATE_WINDOW: Duration = Duration::from_secs(30);
/// Log line period when stderr is not a terminal, while the height moves.
const LOG_EVERY: Duration = Duration::from_secs(5);
/// Log line period when the height stands still (at the tip).
const LOG_IDLE_EVERY: Duration = Duration::from_secs(60);

impl SyncProgress {
    fn new() -> Self {
        use std::io::IsTerminal;
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = indicatif::ProgressBar::new_spinner();
            bar.set_style(
                indicatif::ProgressStyle::with_template("{spinner} sync {msg}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
            );
            bar.enable_steady_tick(Duration::from_millis(250));
            bar
        });
        Self {
            bar,
            samples: std::collections::VecDeque::from([(Instant::now(), 0)]),
            applied: 0,
            last_log: None,
        }
    }

    fn applied(&mut self, blocks: u64) {
        self.applied += blocks;
    }

    fn rate(&mut self) -> f64 {
        let now = Instant::now();
        self.samples.push_back((now, self.applied));
        while self.samples.len() > 2 && now.duration_since(self.samples[0].0) > RATE_WINDOW {
            self.samples.pop_front();
        }
        let (t0, n0) = self.samples[0];
        let elapsed = now.duration_since(t0).as_secs_f64();
        if elapsed < 1e-3 {
            0.0
        } else {
            (self.applied - n0) as f64 / elapsed
        }
    }

    fn update(&mut self, height: u32, lag: Option<u32>, behind_clock: Option<u32>) {
        let rate = self.rate();
        let lag_text = match lag {
            Some(0) => "at the tip of the best peer".to_string(),
            Some(n) => format!("≥{n} behind the best peer"),
            None => "best peer's height not known yet".to_string(),
        };
        let eta = match lag {
            Some(n) if n > 0 && rate > 0.0 => {
                format!(
                    ", ETA {}",
                    humantime::format_duration(Duration::from_secs(
                        (f64::from(n) / rate).ceil() as u64
                    ))
                )
            }
            _ => String::new(),
        };
        let clock = behind_clock
            .map(|s| {
                format!(
                    ", {} behind the chain's clock",
                    humantime::format_duration(Duration::from_secs(u64::from(s)))
                )
            })
            .unwrap_or_default();
        let message = format!("height {height}, {rate:.1} blocks/s, {lag_text}{eta}{clock}");
        match &self.bar {
            Some(bar) => bar.set_message(message),
            None => {
                let due = self.last_log.is_none_or(|(t, h)| {
                    let every = if h == height {
                        LOG_IDLE_EVERY
                    } else {
                        LOG_EVERY
                    };
                    t.elapsed() >= every
                });
                if due {
                    self.last_log = Some((Instant::now(), height));
                    tracing::info!(
                        height,
                        blocks_per_s = format!("{rate:.1}"),
                        lag_blocks = lag,
                        behind_clock_s = behind_clock,
                        "sync: {message}"
                    );
                }
            }
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// Registers the sync's metrics before its first step.
pub(crate) fn register_metrics() {
    for source in [Source::Archive, Source::Block] {
        let _ = metrics::counter!("regolith_sync_blocks_total", "source" => source.label());
    }
    let _ = metrics::gauge!("regolith_sync_lag_blocks");
    let _ = metrics::gauge!("regolith_sync_lag_seconds");
    let _ = metrics::gauge!("regolith_sync_last_applied_mc_seqno");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_peer_that_claims_every_seqno_ends_the_tip_search_at_the_top_without_overflow() {
        let queries = std::cell::Cell::new(0);
        let found = search_held(5, |_| {
            queries.set(queries.get() + 1);
            async { true }
        })
        .await;
        // 24 doubling steps from 100 reach far up, and end there: no overflow, a bounded number of queries.
        assert!(found > 1 << 30, "{found}");
        assert!(queries.get() <= 24);
    }

    #[tokio::test]
    async fn the_tip_search_finds_the_peer_height_to_archive_precision() {
        for (ours, peer) in [
            (0u32, 0u32),
            (0, 99),
            (0, 100),
            (5, 1234),
            (1000, 1001),
            (0, 3_000_000),
        ] {
            let queries = std::cell::Cell::new(0);
            let found = search_held(ours, |s| {
                queries.set(queries.get() + 1);
                // Committed archives hold everything below the archive being built (ids 1, 101, ...).
                let building = if peer == 0 {
                    1
                } else {
                    ((peer - 1) / 100) * 100 + 1
                };
                async move { s < building }
            })
            .await;
            let building = if peer == 0 {
                1
            } else {
                ((peer - 1) / 100) * 100 + 1
            };
            assert!(found <= peer.max(ours), "{ours} {peer}: {found}");
            assert!(
                building.saturating_sub(found) <= PROBE_PRECISION + 1,
                "{ours} {peer}: {found}"
            );
            assert!(
                queries.get() < 60,
                "{ours} {peer}: {} queries",
                queries.get()
            );
        }
    }
}
