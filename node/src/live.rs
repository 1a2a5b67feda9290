//! The live chain (issue #19 point 4): a node whose data directory holds `live.json` extends its generated
//! chain while it runs. Each `block_interval` it makes the next mc block with its shard blocks (the
//! generator's step API, regolith-chain) and hands the group to the apply pipeline, exactly as sync hands a
//! downloaded one: proofs verified, queue diffs applied, archives written, the block served over RPC. Other
//! nodes follow it through their normal sync.
//!
//! A live node is its own chain's only collator: the external messages it relays (posted to its API, or
//! broadcast to it) also go to its producer, and the next group gives each one to a deployed generated
//! account a transaction (the generator runs no code: the transaction accepts the message and does nothing
//! else, [`regolith_chain::Generator::next_mc_block_with`]). At most [`MAX_EXTERNALS_PER_GROUP`] a group; the
//! rest wait for the next ones.
//!
//! The generator's state is not stored: everything is derived from the options, the seed and the external
//! messages each group took, so at every start it is rebuilt by replaying the chain from the zerostate up to
//! the last applied mc block, and the replayed block must be the stored one (its id covers every block before
//! it). The messages a group took are written to `live-externals/` (one file per group that took any,
//! atomically) before the group is applied: block GC removes old blocks, so the replay cannot read them from
//! there. A crash between two blocks therefore loses nothing durable: the next start removes the files of
//! groups that were never applied and replays to whatever the apply made durable (messages that were waiting
//! in memory are gone, as in any collator's queue; a wallet sends them again).
//!
//! The data directory holds:
//! - `live.json` (mode 0600: the seed derives every validator key): the chain's options, the block
//!   interval and the last mc block to make (`stop_at`, none: run on);
//! - `live-base-zerostate.boc`: the zerostate whose config the generated zerostate uses;
//! - `live-externals/SEQNO.bin`: the external messages the group of mc block SEQNO took, each a BOC after its
//!   length (u32 LE).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use bytes::Bytes;
use regolith_chain::archive::ArchivedBlock;
use regolith_chain::{ChainError, ChainOptions, ChainShape, Generator};
use regolith_formats::CheckedBlock;
use regolith_storage::Storage;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tycho_types::cell::{Cell, HashBytes};

use crate::apply::{ApplyError, Group, ImportOptions, Pipeline, Source};
use crate::config::DataDir;
use crate::files::{parse_json, write_atomically, write_secret_json, UnknownFields};
use crate::progress::Progress;
use crate::queue_sync::NodeQueue;

/// `<data>/live.json`.
pub const LIVE_FILE: &str = "live.json";
/// `<data>/live-base-zerostate.boc`.
pub const BASE_ZEROSTATE_FILE: &str = "live-base-zerostate.boc";
/// How often the replay logs its progress.
const REPLAY_LOG_INTERVAL: Duration = Duration::from_secs(2);
/// A produced block is logged at info level every this many mc blocks (the others at debug level).
const LOG_EVERY: u32 = 10;
/// `<data>/live-externals/`.
pub const EXTERNALS_DIR: &str = "live-externals";
/// External messages a group takes at most.
pub const MAX_EXTERNALS_PER_GROUP: usize = 1_000;
/// External messages waiting for the producer at most; more are dropped.
pub const EXTERNALS_QUEUE: usize = 10_000;

/// `live.json`: every field is required and used.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LiveConfig {
    /// The chain's shape: fixed for a data directory (another shape makes another chain).
    pub chain: ChainShape,
    /// One mc block (with its shard blocks) per interval.
    #[serde(with = "humantime_serde")]
    pub block_interval: Duration,
    /// The last mc block to make; `null`: no end.
    pub stop_at: Option<u32>,
}

impl LiveConfig {
    /// `live.json` of `data`, `None` when the node is not live.
    pub fn load(data: &DataDir) -> Result<Option<Self>> {
        let path = live_file(data);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        let config: Self = parse_json(&text, &path, UnknownFields::Reject)?;
        config.validate(&path)?;
        Ok(Some(config))
    }

    fn validate(&self, path: &Path) -> Result<()> {
        if self.block_interval.is_zero() {
            bail!("invalid config {}: `block_interval` is 0", path.display());
        }
        self.chain
            .validate()
            .with_context(|| format!("invalid config {}: `chain`", path.display()))
    }

    /// Writes `live.json` (0600) and the base zerostate into `data`. A data directory that holds another
    /// chain's options or base zerostate is refused: the generator would make another chain than its blocks.
    pub fn install(&self, data: &DataDir, base_zerostate: &[u8]) -> Result<()> {
        let path = live_file(data);
        self.validate(&path)?;
        if let Some(old) = Self::load(data)? {
            if old.chain != self.chain {
                bail!(
                    "{} was made with other generator options ({}: {:?}, now {:?}); use the same ones or \
                     another directory",
                    data.root.display(),
                    path.display(),
                    old.chain,
                    self.chain
                );
            }
        }
        let base_path = base_file(data);
        match std::fs::read(&base_path) {
            Ok(old) if old != base_zerostate => bail!(
                "{} was made from another base zerostate ({}); use the same one or another directory",
                data.root.display(),
                base_path.display()
            ),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                write_atomically(&base_path, base_zerostate)?;
            }
            Err(e) => {
                return Err(e).with_context(|| format!("cannot read {}", base_path.display()))
            }
        }
        write_secret_json(&path, self)
    }

    /// One line for the start banner.
    pub fn describe(&self) -> String {
        let c = &self.chain;
        format!(
            "an mc block every {} (seed {}, {} shard{}, {} messages of {} B per shard block, a key block every {}, \
             {} validators, a new set every {} key blocks){}",
            humantime::format_duration(self.block_interval),
            c.seed,
            c.shards,
            if c.shards == 1 { "" } else { "s" },
            c.messages,
            c.message_bytes,
            c.key_block_every,
            c.validators,
            c.rotate_every,
            self.stop_at
                .map_or_else(String::new, |s| format!(", up to mc block {s}"))
        )
    }
}

/// Registers the live chain's counters.
pub(crate) fn register_metrics() {
    for name in [
        "regolith_live_blocks_total",
        "regolith_live_externals_taken_total",
        "regolith_live_externals_refused_total",
        "regolith_live_externals_dropped_total",
    ] {
        let _ = metrics::counter!(name);
    }
}

fn live_file(data: &DataDir) -> PathBuf {
    data.root.join(LIVE_FILE)
}

fn base_file(data: &DataDir) -> PathBuf {
    data.root.join(BASE_ZEROSTATE_FILE)
}

/// The producer of a live node.
pub struct LiveProducer {
    config: LiveConfig,
    base_zerostate: Vec<u8>,
    storage: Storage,
    pipeline: Pipeline,
    progress: Progress,
    externals: Option<tokio::sync::mpsc::Receiver<Cell>>,
    externals_dir: PathBuf,
}

impl LiveProducer {
    /// The producer of `data` over its opened storage and queue.
    pub fn new(
        config: LiveConfig,
        data: &DataDir,
        storage: &Storage,
        queue: &NodeQueue,
    ) -> Result<Self> {
        let path = base_file(data);
        let base_zerostate =
            std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
        Ok(Self {
            config,
            base_zerostate,
            storage: storage.clone(),
            pipeline: Pipeline::new(storage, queue, &ImportOptions::default())?,
            progress: Progress::new(true),
            externals: None,
            externals_dir: data.root.join(EXTERNALS_DIR),
        })
    }

    /// Takes the external messages that arrive on `externals` into its next groups.
    pub fn taking_externals_from(mut self, externals: tokio::sync::mpsc::Receiver<Cell>) -> Self {
        self.externals = Some(externals);
        self
    }

    /// The waiting external messages, up to [`MAX_EXTERNALS_PER_GROUP`].
    fn waiting_externals(&mut self) -> Vec<Cell> {
        let mut out = Vec::new();
        if let Some(rx) = &mut self.externals {
            while out.len() < MAX_EXTERNALS_PER_GROUP {
                match rx.try_recv() {
                    Ok(cell) => out.push(cell),
                    Err(_) => break,
                }
            }
        }
        out
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

    /// Rebuilds the generator, then makes a block per interval until `stop` turns true. An error ends it: a
    /// replay that does not give the stored chain, or a block the pipeline refuses.
    pub async fn run(mut self, mut stop: watch::Receiver<bool>) -> Result<()> {
        let Some(mut generator) = self.replay(stop.clone()).await? else {
            return Ok(());
        };
        drop_unapplied_externals(&self.externals_dir, generator.last_mc_block().seqno)?;
        let mut ticker = tokio::time::interval(self.config.block_interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut pending: Option<Vec<ArchivedBlock>> = None;
        let mut said_done = false;
        loop {
            tokio::select! {
                _ = ticker.tick() => {}
                _ = stop.changed() => {}
            }
            if *stop.borrow() {
                break;
            }
            let last = generator.last_mc_block().seqno;
            if pending.is_none() && self.config.stop_at.is_some_and(|s| last >= s) {
                if !said_done {
                    tracing::info!(
                        seqno = last,
                        "the live chain reached stop_at: no more blocks"
                    );
                    said_done = true;
                }
                continue;
            }
            let blocks = match pending.take() {
                Some(blocks) => blocks,
                None => {
                    let externals = self.waiting_externals();
                    let (back, made) = tokio::task::spawn_blocking(move || {
                        let group = generator.next_mc_block_with(&externals);
                        (generator, group.map(|g| (g, externals)))
                    })
                    .await
                    .map_err(|e| anyhow!("the generator thread ended: {e}"))?;
                    generator = back;
                    let (group, externals) = made.context("generating the next mc block")?;
                    log_taken(group.mc.seqno, &externals, &group.externals);
                    // Durable before the group is: the replay gives it the same messages.
                    let taken: Vec<Cell> = externals
                        .into_iter()
                        .filter(|c| group.externals.contains(c.repr_hash()))
                        .collect();
                    write_externals(&self.externals_dir, group.mc.seqno, &taken)?;
                    group.blocks
                }
            };
            match self.apply(&blocks).await {
                Ok(seqno) => {
                    metrics::counter!("regolith_live_blocks_total").increment(blocks.len() as u64);
                    metrics::gauge!("regolith_sync_last_applied_mc_seqno").set(f64::from(seqno));
                    if seqno % LOG_EVERY == 0 {
                        tracing::info!(
                            seqno,
                            blocks = blocks.len(),
                            "live chain: mc block applied"
                        );
                    } else {
                        tracing::debug!(
                            seqno,
                            blocks = blocks.len(),
                            "live chain: mc block applied"
                        );
                    }
                }
                Err(ApplyError::Invalid(e)) => {
                    return Err(e.context("the apply pipeline refused a generated block"));
                }
                Err(ApplyError::Local(e)) => {
                    // Storage or the queue failed: the same blocks are tried again at the next tick.
                    tracing::warn!(error = %format!("{e:#}"), "live chain: applying a block failed; retrying");
                    pending = Some(blocks);
                }
            }
        }
        tracing::info!("live chain stopped");
        Ok(())
    }

    /// Replays the generator to the last applied mc block (`None`: stopped meanwhile).
    async fn replay(&self, stop: watch::Receiver<bool>) -> Result<Option<Generator>> {
        let last = self
            .pipeline
            .last_applied()
            .map_err(ApplyError::into_inner)?;
        let zerostate = self
            .storage
            .node_state()
            .load_zerostate_id()?
            .context("the data directory has no zerostate id (was it initialised?)")?;
        // The node writes archives by its own `storage.archives` settings, so the generator's archive split
        // (used only by `chain generate`) stays at its default.
        let options = self
            .config
            .chain
            .options(0, ChainOptions::default().mc_blocks_per_archive);
        let base = self.base_zerostate.clone();
        let externals_dir = self.externals_dir.clone();
        let started = Instant::now();
        if last.seqno > 0 {
            tracing::info!(
                to = last.seqno,
                "replaying the live chain from the zerostate"
            );
        }
        let replayed = tokio::task::spawn_blocking(move || {
            let mut logged = Instant::now();
            let externals = |seqno| {
                read_externals(&externals_dir, seqno).map_err(|e| ChainError::StoredExternals {
                    seqno,
                    reason: format!("{e:#}"),
                })
            };
            Generator::resume(options, &base, &zerostate, &last, externals, |seqno| {
                if logged.elapsed() >= REPLAY_LOG_INTERVAL {
                    logged = Instant::now();
                    tracing::info!(done = seqno, total = last.seqno, "replaying the live chain");
                }
                if *stop.borrow() {
                    std::ops::ControlFlow::Break(())
                } else {
                    std::ops::ControlFlow::Continue(())
                }
            })
        })
        .await
        .map_err(|e| anyhow!("the replay thread ended: {e}"))?;
        match replayed {
            Ok(generator) => {
                if last.seqno > 0 {
                    tracing::info!(
                        mc_blocks = last.seqno,
                        elapsed_ms = started.elapsed().as_millis() as u64,
                        "live chain replayed: the stored tip is the generated one"
                    );
                }
                Ok(Some(generator))
            }
            Err(ChainError::Stopped) => Ok(None),
            Err(e) => Err(anyhow::Error::new(e).context(format!(
                "cannot resume the live chain of {} ({LIVE_FILE})",
                self.storage.config().root_dir.display()
            ))),
        }
    }

    /// Checks the generated blocks as any downloaded block is checked and applies them as one group.
    async fn apply(&mut self, blocks: &[ArchivedBlock]) -> Result<u32, ApplyError> {
        let mut checked = blocks
            .iter()
            .map(|b| {
                CheckedBlock::check(
                    &b.id,
                    Bytes::from(b.data.clone()),
                    Bytes::from(b.proof.clone()),
                    Bytes::from(b.queue_diff.clone()),
                )
                .with_context(|| format!("generated block {}", b.id))
            })
            .collect::<Result<Vec<_>>>()
            .map_err(ApplyError::Invalid)?;
        let mc = checked
            .pop()
            .filter(|b| b.id().is_masterchain())
            .ok_or_else(|| {
                ApplyError::Invalid(anyhow!("a generated group without its mc block"))
            })?;
        let group = Group::new(mc, checked);
        let report = self
            .pipeline
            .apply(Source::Groups(vec![group]), "live chain", &self.progress)
            .await?;
        Ok(report.last_mc_seqno)
    }
}

fn externals_file(dir: &Path, seqno: u32) -> PathBuf {
    dir.join(format!("{seqno:010}.bin"))
}

/// Writes the external messages the group of mc block `seqno` took (nothing when it took none).
fn write_externals(dir: &Path, seqno: u32, taken: &[Cell]) -> Result<()> {
    if taken.is_empty() {
        return Ok(());
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut bytes = Vec::new();
    for cell in taken {
        let boc = tycho_types::boc::Boc::encode(cell);
        bytes.extend_from_slice(&(boc.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&boc);
    }
    write_atomically(&externals_file(dir, seqno), &bytes)
}

/// The external messages the group of mc block `seqno` took (none without a file).
fn read_externals(dir: &Path, seqno: u32) -> Result<Vec<Cell>> {
    let path = externals_file(dir, seqno);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let mut out = Vec::new();
    let mut rest = bytes.as_slice();
    while !rest.is_empty() {
        let (len, tail) = rest
            .split_first_chunk::<4>()
            .with_context(|| format!("{}: a truncated length", path.display()))?;
        let len = u32::from_le_bytes(*len) as usize;
        let boc = tail
            .get(..len)
            .with_context(|| format!("{}: a truncated message", path.display()))?;
        out.push(
            tycho_types::boc::Boc::decode(boc)
                .with_context(|| format!("{}: a message that is not a BOC", path.display()))?,
        );
        rest = &tail[len..];
    }
    Ok(out)
}

/// Removes the files of groups after `last` (written before a crash that came before their apply) and makes
/// the removal durable.
fn drop_unapplied_externals(dir: &Path, last: u32) -> Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", dir.display())),
    };
    let mut removed = false;
    for entry in entries {
        let path = entry
            .with_context(|| format!("cannot read {}", dir.display()))?
            .path();
        let seqno = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".bin"))
            .and_then(|n| n.parse::<u32>().ok());
        if seqno.is_some_and(|s| s > last) {
            std::fs::remove_file(&path)
                .with_context(|| format!("cannot remove {}", path.display()))?;
            tracing::info!(file = %path.display(), "removed the external messages of a group that was never applied");
            removed = true;
        }
    }
    if removed {
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .with_context(|| format!("cannot sync {}", dir.display()))?;
    }
    Ok(())
}

/// Logs what a group took of the external messages it was offered.
fn log_taken(seqno: u32, offered: &[Cell], taken: &[HashBytes]) {
    if offered.is_empty() {
        return;
    }
    metrics::counter!("regolith_live_externals_taken_total").increment(taken.len() as u64);
    metrics::counter!("regolith_live_externals_refused_total")
        .increment((offered.len() - taken.len()) as u64);
    for cell in offered {
        let hash = cell.repr_hash();
        if taken.contains(hash) {
            tracing::debug!(seqno, %hash, "live chain: external message taken");
        } else {
            tracing::info!(
                seqno,
                %hash,
                "live chain: external message not taken (not to a deployed account of the generated chain)"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(tag: u8) -> Cell {
        let mut b = tycho_types::cell::CellBuilder::new();
        b.store_u8(tag).unwrap();
        b.build().unwrap()
    }

    #[test]
    fn taken_externals_read_back_and_unapplied_groups_are_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path().join(EXTERNALS_DIR);
        assert!(
            read_externals(&dir, 5).unwrap().is_empty(),
            "no file, no messages"
        );
        write_externals(&dir, 5, &[cell(1), cell(2)]).unwrap();
        write_externals(&dir, 7, &[cell(3)]).unwrap();
        write_externals(&dir, 8, &[]).unwrap();
        assert!(
            !externals_file(&dir, 8).exists(),
            "a group that took none has no file"
        );
        assert_eq!(read_externals(&dir, 5).unwrap(), vec![cell(1), cell(2)]);

        // A crash before the apply of 7: the start at 5 drops its file.
        drop_unapplied_externals(&dir, 5).unwrap();
        assert!(read_externals(&dir, 7).unwrap().is_empty());
        assert_eq!(read_externals(&dir, 5).unwrap().len(), 2);

        // A damaged file is an error naming it, not an empty group.
        let path = externals_file(&dir, 5);
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
        let e = read_externals(&dir, 5).unwrap_err();
        assert!(format!("{e:#}").contains("0000000005.bin"), "{e:#}");
    }
}
