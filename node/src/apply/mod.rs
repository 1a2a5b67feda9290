//! The apply pipeline: every block the node stores comes through here, whether `regolith import` reads it
//! from an archive file or sync downloads it (an archive, or the next mc block with the shard blocks it
//! brings).
//!
//! A source yields groups ([`Group`]): one mc block and the shard blocks it brings, each checked once
//! ([`regolith_formats::CheckedBlock::check`]). Before anything of a group is stored the pipeline requires:
//! 1. the mc block follows the last applied one (seqno and prev id);
//! 2. its proof is signed by its validators (and each shard block's proof links it);
//! 3. every shard block from its top shard blocks back to the applied ones is in the group;
//! 4. every queue diff continues the diff of its block's previous block.
//!
//! Then it stores each block, its connections and its archive entry, applies its queue diff, stores the last
//! applied mc block and hands the mc block to the group commit. A group that fails a rule stops the apply
//! with an error naming it ([`ApplyError::Invalid`]: the source is to blame); what was applied before stays.

pub mod archive;
mod group;
pub mod group_commit;
pub mod import;
mod persistent;
mod states;

use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

use anyhow::{anyhow, Context};
use regolith_formats::{BlockId, CheckedBlock, ProofError, ShardIdent};
use regolith_queue::DiffZone;
use regolith_storage::{BlockHandle, Direction, Storage};

pub use archive::{ArchiveGroups, SpillWriter, SpilledArchive};
pub use group::{is_applied, Group};

use crate::apply::group_commit::{GroupCommitter, Stopped};
use crate::progress::Progress;
use crate::queue_sync::{self, NodeQueue};
use crate::trust::proofs::ProofVerifier;

/// Why blocks were not applied.
#[derive(Debug)]
pub enum ApplyError {
    /// What was to be applied breaks a rule (a bad block, a missing one, a broken link): its source is to
    /// blame.
    Invalid(anyhow::Error),
    /// Storage, the queue or the group commit failed: nobody outside is to blame.
    Local(anyhow::Error),
}

impl std::fmt::Display for ApplyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Invalid(e) | Self::Local(e) => write!(f, "{e:#}"),
        }
    }
}

impl ApplyError {
    /// `Invalid` when the input is to blame, `Local` otherwise.
    pub(crate) fn blaming(input_is_to_blame: bool, e: anyhow::Error) -> Self {
        if input_is_to_blame {
            Self::Invalid(e)
        } else {
            Self::Local(e)
        }
    }

    /// Whether the input is to blame.
    pub fn is_invalid(&self) -> bool {
        matches!(self, Self::Invalid(_))
    }

    /// The error, with its context.
    pub fn into_inner(self) -> anyhow::Error {
        match self {
            Self::Invalid(e) | Self::Local(e) => e,
        }
    }
}

impl From<regolith_storage::StorageError> for ApplyError {
    fn from(e: regolith_storage::StorageError) -> Self {
        Self::Local(e.into())
    }
}

/// What one apply did.
#[derive(Debug, Default, serde::Serialize)]
pub struct ImportReport {
    /// The archive file (or the download's name).
    pub file: String,
    /// Blocks in the archive (or the download).
    pub blocks_in_archive: usize,
    /// Blocks applied now.
    pub blocks_imported: usize,
    /// Blocks that were already applied.
    pub blocks_already_present: usize,
    /// Decompressed archive bytes.
    pub decompressed_bytes: u64,
    /// Last applied mc seqno after the apply.
    pub last_mc_seqno: u32,
    /// Wall time.
    pub elapsed_ms: u128,
}

/// How the pipeline runs.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// Verify block proofs before storing blocks. Always on, except in the benchmark that measures its cost.
    pub verify_proofs: bool,
    /// How the shard states are kept (checkpoints, states GC).
    pub states: regolith_state::StatesConfig,
}

impl Default for ImportOptions {
    fn default() -> Self {
        Self {
            verify_proofs: true,
            states: Default::default(),
        }
    }
}

/// Where groups come from.
pub enum Source<'s> {
    /// A spilled archive, read group by group.
    Archive(&'s mut ArchiveGroups),
    /// Groups checked already (downloaded blocks).
    Groups(Vec<Group>),
}

/// Each shard's top block seqno in an mc block.
type Tops = HashMap<ShardIdent, u32>;

/// The apply pipeline of one node: its storage, queue and proof verifier (the zerostate parsed once).
pub struct Pipeline {
    storage: Storage,
    queue: NodeQueue,
    verifier: Option<ProofVerifier>,
    chain: group::DiffChain,
    /// The mc block whose proof [`Self::verify_next_mc`] verified last: its group does not verify it again.
    verified_mc: Option<BlockId>,
    /// The top shard blocks of the last mc block this pipeline applied, so that the next archive does not
    /// parse that block again to learn them.
    applied_tops: Option<(BlockId, Tops)>,
    /// The newest shard states.
    states: states::PipelineStates,
}

impl Pipeline {
    /// The pipeline over `storage` and `queue`.
    pub fn new(
        storage: &Storage,
        queue: &NodeQueue,
        options: &ImportOptions,
    ) -> anyhow::Result<Self> {
        Ok(Self {
            storage: storage.clone(),
            queue: queue.clone(),
            verifier: if options.verify_proofs {
                Some(ProofVerifier::new(storage)?)
            } else {
                None
            },
            chain: group::DiffChain::default(),
            verified_mc: None,
            applied_tops: None,
            states: states::PipelineStates::new(storage, options.states.clone()),
        })
    }

    /// Waits until the persistent states of the last persistent key block applied are written (they are
    /// written in the background while later groups are applied).
    pub async fn wait_for_persistent_save(&mut self) {
        self.states.wait_for_persistent_save().await;
    }

    /// Keeps the shard states as `config` says from now on.
    pub fn set_states_config(&mut self, config: regolith_state::StatesConfig) {
        self.states.set_config(config);
    }

    /// Publishes the newest shard states to `newest` after every group (for the account API).
    pub fn publish_states_to(&mut self, newest: regolith_state::NewestStates) {
        self.states.publish_to(newest);
    }

    /// Restores the newest shard states now (they are restored at the first group otherwise): the last
    /// checkpoint's, advanced by the stored blocks after it.
    pub async fn restore_states(&mut self) -> Result<(), ApplyError> {
        let last = self.last_applied()?;
        self.states.restore(&self.storage, &last).await.map(drop)
    }

    /// The last applied mc block.
    pub fn last_applied(&self) -> Result<BlockId, ApplyError> {
        self.storage
            .node_state()
            .load_last_mc_block_id()?
            .ok_or_else(|| {
                ApplyError::Local(anyhow!(
                    "the data directory has no last applied mc block (was it initialised?)"
                ))
            })
    }

    /// Verifies the proof of a checked mc block that is to follow `last`: its link and its signatures, before
    /// anything it references is fetched.
    pub async fn verify_next_mc(
        &mut self,
        mc: &CheckedBlock,
        last: &BlockId,
        origin: &str,
    ) -> Result<(), ApplyError> {
        Group::new(mc.clone(), Vec::new()).check_link(last, origin)?;
        self.verify(mc, origin).await?;
        self.verified_mc = Some(*mc.id());
        Ok(())
    }

    async fn verify(&mut self, block: &CheckedBlock, origin: &str) -> Result<(), ApplyError> {
        let Some(verifier) = self.verifier.as_mut() else {
            return Ok(());
        };
        verifier
            .verify_parsed(block.proof())
            .await
            .map(drop)
            .map_err(|e| {
                let invalid = e.downcast_ref::<ProofError>().is_some()
                    || e.downcast_ref::<regolith_formats::BlockError>().is_some();
                ApplyError::blaming(
                    invalid,
                    e.context(format!(
                        "{origin}: block {}: proof rejected, nothing of it is stored",
                        block.id()
                    )),
                )
            })
    }

    /// Applies the groups of `source` in order until it ends or a group fails. Everything applied is
    /// durable and committed when this returns, also after an error.
    pub async fn apply(
        &mut self,
        source: Source<'_>,
        origin: &str,
        progress: &Progress,
    ) -> Result<ImportReport, ApplyError> {
        let mut session = self.open_session(origin)?;
        let mut groups = match source {
            Source::Archive(archive) => {
                session.report.blocks_in_archive = archive.blocks_in_archive();
                session.report.decompressed_bytes = archive.decompressed_bytes();
                let tops = self.applied_tops(&session.last).await;
                let skipped = tops.and_then(|tops| {
                    archive
                        .skip_applied(&self.storage, session.last.seqno, &tops)
                        .map_err(ApplyError::Local)
                });
                match skipped {
                    Ok(n) => session.report.blocks_already_present = n,
                    Err(e) => return self.close_session(session, Err(e), progress).await,
                }
                Groups::Archive(archive)
            }
            Source::Groups(groups) => {
                session.report.blocks_in_archive = groups.iter().map(Group::block_count).sum();
                Groups::Given(groups.into_iter())
            }
        };
        progress.start(Path::new(origin), session.report.blocks_in_archive as u64);
        progress.advance(session.report.blocks_already_present as u64, 0);
        let result: Result<(), ApplyError> = async {
            while let Some(group) = groups.next(&self.storage, session.last.seqno) {
                self.apply_in(&mut session, &group?, origin, progress)
                    .await?;
            }
            groups.finish()
        }
        .await;
        self.close_session(session, result, progress).await
    }

    /// Starts applying groups one at a time ([`Self::apply_in`]) under one group commit, as [`Self::apply`]
    /// does for a source; [`Self::close_session`] makes them durable. The sync applies a batch this way, so
    /// that its mc blocks share the log syncs instead of waiting for two each.
    pub fn open_session(&mut self, origin: &str) -> Result<ApplySession, ApplyError> {
        let last = self.last_applied()?;
        let committer =
            GroupCommitter::start(&self.storage, &self.queue).map_err(ApplyError::Local)?;
        Ok(ApplySession {
            committer,
            started: Instant::now(),
            last,
            bytes_done: 0,
            report: ImportReport {
                file: origin.to_string(),
                last_mc_seqno: last.seqno,
                ..Default::default()
            },
        })
    }

    /// Applies one group in `session` (skipped when its mc block is applied already). Returns what this
    /// group did; it is durable once the session is closed.
    pub async fn apply_in(
        &mut self,
        session: &mut ApplySession,
        group: &Group,
        origin: &str,
        progress: &Progress,
    ) -> Result<ImportReport, ApplyError> {
        let mut report = ImportReport {
            file: origin.to_string(),
            blocks_in_archive: group.block_count(),
            last_mc_seqno: session.last.seqno,
            ..Default::default()
        };
        if group.mc_id().seqno <= session.last.seqno {
            // Downloaded twice, or applied meanwhile.
            report.blocks_already_present = group.block_count();
            session.report.blocks_already_present += group.block_count();
            return Ok(report);
        }
        let started = Instant::now();
        let bytes = self
            .apply_group(group, &session.last, origin, &session.committer, progress)
            .await?;
        session.last = *group.mc_id();
        session.report.last_mc_seqno = session.last.seqno;
        session.report.blocks_imported += group.block_count();
        session.bytes_done += bytes;
        report.last_mc_seqno = session.last.seqno;
        report.blocks_imported = group.block_count();
        report.elapsed_ms = started.elapsed().as_millis();
        Ok(report)
    }

    /// Ends a session: waits until everything it applied is durable and committed, also after `result`, the
    /// error that stopped it, which is returned then.
    pub async fn close_session(
        &mut self,
        session: ApplySession,
        result: Result<(), ApplyError>,
        progress: &Progress,
    ) -> Result<ImportReport, ApplyError> {
        let ApplySession {
            committer,
            started,
            mut report,
            bytes_done,
            ..
        } = session;
        let committed = tokio::task::spawn_blocking(move || committer.finish())
            .await
            .map_err(|e| anyhow!("the group commit ended: {e}"))
            .and_then(|r| r);
        progress.finish();
        match (result, committed) {
            (Ok(()), Ok(())) => {}
            (Err(e), Ok(())) => return Err(e),
            (Ok(()), Err(c)) => return Err(ApplyError::Local(c)),
            (Err(ApplyError::Local(e)), Err(c)) if e.is::<Stopped>() => {
                return Err(ApplyError::Local(c))
            }
            (Err(e), Err(c)) => {
                tracing::error!(error = format!("{c:#}"), "the group commit failed too");
                return Err(e);
            }
        }
        self.storage.archives().wait_for_archive_commit().await;
        report.elapsed_ms = started.elapsed().as_millis();
        tracing::info!(
            from = %report.file,
            imported = report.blocks_imported,
            already_present = report.blocks_already_present,
            mib_per_s = bytes_done as f64 / 1048576.0 / started.elapsed().as_secs_f64().max(1e-9),
            "blocks applied"
        );
        Ok(report)
    }

    /// The seqno of each shard's top block in the last applied mc block.
    async fn applied_tops(&self, last: &BlockId) -> Result<Tops, ApplyError> {
        if let Some((id, tops)) = &self.applied_tops {
            if id == last {
                return Ok(tops.clone());
            }
        }
        let block = queue_sync::load_block(&self.storage, last)
            .await
            .map_err(ApplyError::Local)?;
        let Some(block) = block else {
            return Ok(Default::default());
        };
        let tops = block
            .shard_descriptions()
            .map_err(|e| ApplyError::Local(e.into()))?;
        Ok(tops.iter().map(|t| (t.id.shard, t.id.seqno)).collect())
    }

    /// Applies one group: checks it against the rules, stores its blocks, then makes it the last applied
    /// group. Returns the block bytes applied.
    async fn apply_group(
        &mut self,
        group: &Group,
        last: &BlockId,
        origin: &str,
        committer: &GroupCommitter,
        progress: &Progress,
    ) -> Result<u64, ApplyError> {
        self.check_group(group, last, origin).await?;
        let states = self
            .states
            .apply_group(&self.storage, group, last, origin)
            .await?;
        let mut bytes = 0;
        for block in group.in_order() {
            self.store_block(block, group, origin).await?;
            bytes += block.data().len() as u64;
            progress.advance(1, block.data().len() as u64);
        }
        if self.finish_group(group, committer, states)? {
            self.states
                .start_persistent_save(&self.storage, *group.mc_id())
                .await;
        }
        Ok(bytes)
    }

    /// Every rule a group must meet before anything of it is stored: it continues the last applied mc block,
    /// its proofs are signed (the mc block's once: not again after [`Self::verify_next_mc`]), it holds every
    /// shard block its mc block needs, and its queue diffs continue the applied ones.
    async fn check_group(
        &mut self,
        group: &Group,
        last: &BlockId,
        origin: &str,
    ) -> Result<(), ApplyError> {
        group.check_link(last, origin)?;
        if self.verified_mc.take().as_ref() != Some(group.mc_id()) {
            self.verify(&group.mc, origin).await?;
        }
        for shard in &group.shards {
            self.verify(shard, origin).await?;
        }
        group.check_complete(&self.storage, last.seqno, origin)?;
        self.chain.check(&self.storage, group, origin).await
    }

    /// Stores one checked block of `group` as it is (nothing is parsed or hashed again): its data, proof and
    /// diff, its connections, its archive entry, and its queue diff.
    async fn store_block(
        &self,
        block: &CheckedBlock,
        group: &Group,
        origin: &str,
    ) -> Result<(), ApplyError> {
        let id = *block.id();
        let at = |what: &str| format!("{origin}: block {id}: {what}");
        let stored = self
            .storage
            .components()
            .store_checked_block(block, group.mc_id().seqno)
            .await
            .with_context(|| at("storing the block"))
            .map_err(ApplyError::Local)?;
        store_connections(&self.storage, &stored.handle, block.prev_ids())
            .with_context(|| at("storing connections"))
            .map_err(ApplyError::Local)?;
        self.storage
            .archives()
            .move_into_archive(&stored.handle, group.mc.is_key_block())
            .with_context(|| at("moving into archive"))
            .map_err(ApplyError::Local)?;
        // Every diff continues the shard's last one (the first of a pass included, queue.md §5.1).
        queue_sync::apply_checked_diff(&self.queue, block, Some(DiffZone::Both))
            .with_context(|| at("applying its queue diff"))
            .map_err(ApplyError::Local)?;
        if !id.is_masterchain() {
            crate::crash::point("shard-diff-applied");
        }
        Ok(())
    }

    /// The last write of a group: the last applied mc block, in one batch with the states at a checkpoint.
    /// The group commit then makes the group durable and commits the queue on it while the next group is
    /// written: a crash in between is repaired at the next start (queue.md §5.4), never the other way round.
    fn finish_group(
        &mut self,
        group: &Group,
        committer: &GroupCommitter,
        states: states::AppliedStates,
    ) -> Result<bool, ApplyError> {
        let persistent = self.states.finish_group(&self.storage, group, states)?;
        crate::crash::point("mc-block-applied");
        committer.submit(&group.mc).map_err(ApplyError::Local)?;
        self.chain.applied(group);
        let tops = group
            .mc
            .top_shard_blocks()
            .iter()
            .map(|t| (t.id.shard, t.id.seqno))
            .collect();
        self.applied_tops = Some((*group.mc_id(), tops));
        Ok(persistent)
    }
}

/// Groups being applied under one group commit ([`Pipeline::open_session`]).
pub struct ApplySession {
    committer: GroupCommitter,
    started: Instant,
    /// The last applied mc block.
    last: BlockId,
    report: ImportReport,
    bytes_done: u64,
}

impl ApplySession {
    /// The last applied mc block: the session's last group, or the one before the session.
    pub fn last_applied(&self) -> &BlockId {
        &self.last
    }
}

/// The groups being applied.
enum Groups<'s> {
    Archive(&'s mut ArchiveGroups),
    Given(std::vec::IntoIter<Group>),
}

impl Groups<'_> {
    fn next(&mut self, storage: &Storage, last_applied: u32) -> Option<Result<Group, ApplyError>> {
        match self {
            Self::Archive(archive) => archive.next_group(storage, last_applied),
            Self::Given(groups) => groups.next().map(Ok),
        }
    }

    fn finish(&mut self) -> Result<(), ApplyError> {
        match self {
            Self::Archive(archive) => archive.finish(),
            Self::Given(_) => Ok(()),
        }
    }
}

/// Connections of a newly stored block (storage.md §6.4).
fn store_connections(
    storage: &Storage,
    handle: &BlockHandle,
    prev: &[BlockId],
) -> anyhow::Result<()> {
    let connections = storage.connections();
    match prev {
        [prev_id] => {
            if let Some(prev_handle) = storage.handles().load_handle(prev_id)? {
                let id = handle.id();
                let dir = if id.shard != prev_id.shard
                    && id.shard.is_right_child()
                    && prev_id.shard.is_parent_of(&id.shard)
                {
                    Direction::Next2
                } else {
                    Direction::Next1
                };
                connections.store_connection(&prev_handle, dir, id)?;
            }
            connections.store_connection(handle, Direction::Prev1, prev_id)?;
        }
        [left, right] => {
            for p in [left, right] {
                if let Some(prev_handle) = storage.handles().load_handle(p)? {
                    connections.store_connection(&prev_handle, Direction::Next1, handle.id())?;
                }
            }
            connections.store_connection(handle, Direction::Prev1, left)?;
            connections.store_connection(handle, Direction::Prev2, right)?;
        }
        _ => anyhow::bail!("a block has {} previous blocks", prev.len()),
    }
    Ok(())
}
