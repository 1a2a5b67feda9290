//! Sync: `regolith run` follows the chain from its peers. Far behind, it finds the archive holding the next mc
//! block, downloads it (verified as it streams) and imports it; near the tip, it asks for the next mc block
//! with getNextBlockFull, fetches the shard blocks that block references by walking back their prev ids to
//! what is stored, and imports that group. Both modes hand the blocks to the one apply path of
//! `regolith import` ([`crate::import`]): an archive is checked block by block as it is read, downloaded blocks
//! are checked once as they arrive ([`check_downloaded_block`]) and applied as the checked values, without
//! being written to a file or parsed again. The apply path writes connections, feeds the queue and moves
//! blocks into archives. A peer whose data fails a check is punished
//! and the data is taken again from another peer.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use regolith_formats::BlockId;
use regolith_rpc::client::{
    ArchiveSearch, BlockchainRpcClient, DataRequirement, Neighbour, Punishment,
};
use regolith_storage::Storage;
use tokio::sync::watch;

use crate::block_check::check_downloaded_block;
use crate::import::CheckedBlocks;
use crate::progress::Progress;
use crate::queue_sync::NodeQueue;

/// Where downloads wait for their import (under the data directory).
pub const SYNC_DIR: &str = "sync";

/// Pause when the chain has nothing new.
const IDLE_PAUSE: Duration = Duration::from_secs(1);
/// Pause after a failure, before the next attempt.
const RETRY_PAUSE: Duration = Duration::from_millis(500);
/// Shard blocks fetched for one mc block at most (a guard against a peer that leads the walk astray).
const MAX_SHARD_WALK: usize = 1000;

/// Where a group of blocks came from (the `source` label of `regolith_sync_blocks_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    Archive,
    Block,
}

/// What a step downloaded: an archive file (checked as it is read), or blocks checked as they arrived.
enum Download {
    Archive(PathBuf),
    Blocks(Box<CheckedBlocks>),
}

impl Download {
    fn source(&self) -> Source {
        match self {
            Self::Archive(_) => Source::Archive,
            Self::Blocks(_) => Source::Block,
        }
    }
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
}

/// The sync task's handles.
pub struct Sync {
    stats: Arc<SyncStats>,
    storage: Storage,
    queue: NodeQueue,
    client: BlockchainRpcClient,
    dir: PathBuf,
    progress: Progress,
    display: SyncProgress,
    tip: TipEstimate,
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
        Ok(Self {
            stats: Arc::default(),
            storage,
            queue,
            client,
            dir,
            progress: Progress::new(true),
            display: SyncProgress::new(),
            tip: TipEstimate::default(),
        })
    }

    /// The counters of this sync.
    pub fn stats(&self) -> Arc<SyncStats> {
        self.stats.clone()
    }

    /// Runs until `stop` turns true.
    pub async fn run(mut self, mut stop: watch::Receiver<bool>) {
        tracing::info!("sync started");
        loop {
            if *stop.borrow() {
                break;
            }
            let pause = match self.step().await {
                Ok(Some(_)) => Duration::ZERO,
                Ok(None) => IDLE_PAUSE,
                Err(e) => {
                    self.stats
                        .failures
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    tracing::warn!(error = %format!("{e:#}"), "sync step failed");
                    RETRY_PAUSE
                }
            };
            self.show();
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

    /// Height, rate, lag behind the best peer and ETA: on the terminal line, in the log, in metrics.
    fn show(&mut self) {
        let Ok(last) = self.last_applied() else {
            return;
        };
        let lag = self.tip.lag(last.seqno);
        metrics::gauge!("regolith_sync_lag_blocks").set(f64::from(lag.unwrap_or(0)));
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
        self.storage
            .node_state()
            .load_last_mc_block_id()?
            .ok_or_else(|| anyhow!("the storage has no applied mc block (not initialised)"))
    }

    /// One step: an archive when one is found, otherwise the next mc block. `Ok(None)`: nothing new.
    async fn step(&mut self) -> Result<Option<usize>> {
        if self.client.overlay_client().neighbours().is_empty() {
            // Nobody to sync from yet (a lone node, or peers still being discovered).
            return Ok(None);
        }
        let last = self.last_applied()?;
        let next = last.seqno + 1;
        self.tip.probe(&self.client, last.seqno).await;
        match self.client.find_archive(next).await {
            Ok(ArchiveSearch::Found(archive)) => {
                // A committed archive holding `next`: that peer has applied a block after it.
                self.tip.note_held(next + 1);
                let path = self.dir.join(format!("{}.archive", archive.id));
                let neighbour = archive.neighbour.clone();
                tracing::info!(
                    archive = archive.id,
                    size = archive.size,
                    peer = %neighbour.peer_id(),
                    "downloading an archive"
                );
                let file = std::fs::File::create(&path)
                    .with_context(|| format!("cannot create {}", path.display()))?;
                let download = self
                    .client
                    .download_archive_compressed(
                        &archive,
                        Box::new(std::io::BufWriter::new(file)),
                        |_| {},
                    )
                    .await;
                if let Err(e) = download {
                    let _ = std::fs::remove_file(&path);
                    fail("archive_download");
                    bail!(
                        "downloading archive {} from {}: {e}",
                        archive.id,
                        neighbour.peer_id()
                    );
                }
                let applied = self
                    .import(Download::Archive(path.clone()), &[neighbour])
                    .await;
                let _ = std::fs::remove_file(&path);
                return applied.map(Some);
            }
            Ok(ArchiveSearch::TooNew) => {}
            Err(e) => tracing::debug!(error = %e, mc_seqno = next, "no archive"),
        }
        self.next_block(&last).await
    }

    /// Near the tip: the next mc block and the shard blocks it brings.
    async fn next_block(&mut self, last: &BlockId) -> Result<Option<usize>> {
        let got = self
            .client
            .get_next_block_full(last, DataRequirement::Optional)
            .await?;
        let Some(mc) = got.data else {
            // That peer's tip is ours.
            self.tip.note_held(last.seqno);
            return Ok(None);
        };
        self.tip.note_held(last.seqno + 1);
        let mut neighbours = vec![got.neighbour.clone()];
        // Every block is checked once, here, as it arrives (hashes, proof, diff): the neighbour that sent a
        // bad one is the one punished, and the apply path takes the checked values as they are.
        let mc_block = match check_downloaded_block(None, &mc) {
            Ok(c) if mc.block_id.is_masterchain() && mc.block_id.seqno == last.seqno + 1 => c,
            Ok(_) => {
                punish(&got.neighbour, "not_next");
                bail!(
                    "{} answered {} as the block after {last}",
                    got.neighbour.peer_id(),
                    mc.block_id
                );
            }
            Err(e) => {
                punish(&got.neighbour, "bad_block");
                return Err(e).context("the next mc block");
            }
        };
        // Shard blocks: from each top block back by prev ids to what is stored.
        let mut group = Vec::new();
        let mut seen = HashSet::new();
        let mut pending: Vec<BlockId> = mc_block.top_shard_blocks().iter().map(|t| t.id).collect();
        while let Some(id) = pending.pop() {
            // Seqno 0 is the shard zerostate: stored at init, never downloaded.
            if id.seqno == 0 || !seen.insert(id) || self.is_stored(&id)? {
                continue;
            }
            if seen.len() > MAX_SHARD_WALK {
                bail!(
                    "more than {MAX_SHARD_WALK} unknown shard blocks below mc block {}",
                    mc.block_id
                );
            }
            let got = self
                .client
                .get_block_full(&id, DataRequirement::Required)
                .await?;
            let Some(data) = got.data else {
                bail!("no neighbour has shard block {id}");
            };
            neighbours.push(got.neighbour.clone());
            let block = check_downloaded_block(Some(&id), &data)
                .inspect_err(|_| punish(&got.neighbour, "bad_block"))
                .with_context(|| format!("shard block {id} from {}", got.neighbour.peer_id()))?;
            pending.extend(block.prev_ids().iter().copied());
            group.push(block);
        }
        group.push(mc_block);
        let origin = format!("mc block {} from the network", last.seqno + 1);
        let blocks = CheckedBlocks::downloaded(origin, group);
        self.import(Download::Blocks(Box::new(blocks)), &neighbours)
            .await
            .map(Some)
    }

    fn is_stored(&self, id: &BlockId) -> Result<bool> {
        Ok(self
            .storage
            .handles()
            .load_handle(id)?
            .is_some_and(|h| h.has_data() && h.has_proof() && h.has_queue_diff()))
    }

    /// Applies a download through the apply path of `regolith import`. A failure punishes the neighbours
    /// it came from: the next attempt asks others.
    async fn import(&mut self, download: Download, neighbours: &[Arc<Neighbour>]) -> Result<usize> {
        let source = download.source();
        let applied = match download {
            Download::Archive(path) => {
                crate::import::import_archive(&self.storage, &self.queue, &path, &self.progress)
                    .await
            }
            Download::Blocks(blocks) => {
                crate::import::apply_checked_blocks(
                    &self.storage,
                    &self.queue,
                    *blocks,
                    &self.progress,
                )
                .await
            }
        };
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
            Err(e) => {
                for n in neighbours {
                    punish(n, "invalid_data");
                }
                Err(e.context(format!("importing the {} download", source.label())))
            }
        }
    }

    fn report(&mut self, last_mc_seqno: u32, imported: usize) {
        self.display.applied(imported as u64);
        tracing::debug!(height = last_mc_seqno, imported, "synced");
    }
}

fn fail(reason: &'static str) {
    metrics::counter!("regolith_sync_failures_total", "reason" => reason).increment(1);
}

fn punish(neighbour: &Neighbour, reason: &'static str) {
    fail(reason);
    neighbour.punish(Punishment::Malicious);
    tracing::warn!(peer = %neighbour.peer_id(), reason, "punished a peer for invalid data");
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
            lo = s + 1;
            step = step.saturating_mul(2);
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

#[cfg(test)]
mod tests {
    use super::*;

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
