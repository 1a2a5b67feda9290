//! The pipeline's shard states (state.md §7.2–§7.3): the newest state of every chain, kept in memory and
//! advanced by each group's blocks before anything of the group is stored, stored at checkpoints in the batch
//! that makes the group the last applied one, and restored at start from the last checkpoint by applying the
//! stored blocks after it again.
//!
//! A data directory without a checkpoint (its states were never stored: made by an older build, or not yet
//! initialised with cells) gets one from the persistent states of its first block, the zerostate or the boot
//! block of a cold boot, which `init` and the cold boot keep as files.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{anyhow, Context};
use regolith_formats::{BlockId, ParsedBlock};
use regolith_state::{gc, import, ChainStates, NewestStates, StateError, StateStore, StatesConfig};
use regolith_storage::{BlockHandle, StateKind, Storage};
use tycho_types::cell::Cell;

use super::{ApplyError, Group};

/// A decompressed persistent state read to restore the states may not exceed this.
const MAX_STATE_BYTES: u64 = 4 << 30;

/// The states of one pipeline.
pub(crate) struct PipelineStates {
    store: StateStore,
    config: StatesConfig,
    /// `None` until restored (at the first group, or by [`Self::restore`]).
    states: Option<ChainStates>,
    /// The persistent save running in the background, if any.
    save: Option<tokio::task::JoinHandle<()>>,
    /// Where the newest states are published for readers.
    newest: NewestStates,
}

/// A group's states, applied but not yet the pipeline's.
pub(crate) struct AppliedStates(ChainStates);

impl PipelineStates {
    pub(crate) fn new(storage: &Storage, config: StatesConfig) -> Self {
        Self {
            store: StateStore::new(storage),
            config,
            states: None,
            save: None,
            newest: NewestStates::default(),
        }
    }

    /// Starts writing the persistent states of `mc` in the background, once the save before it ended.
    pub(crate) async fn start_persistent_save(&mut self, storage: &Storage, mc: BlockId) {
        self.wait_for_persistent_save().await;
        let (storage, store) = (storage.clone(), self.store.clone());
        self.save = Some(tokio::spawn(async move {
            if let Err(e) = super::persistent::save(&storage, &store, &mc).await {
                metrics::counter!("regolith_states_persistent_failures_total").increment(1);
                tracing::error!(
                    block = %mc,
                    error = %format!("{e:#}"),
                    "writing the persistent states failed; the save resumes at the next start"
                );
            }
        }));
    }

    /// Waits until the background persistent save (if any) ended.
    pub(crate) async fn wait_for_persistent_save(&mut self) {
        if let Some(save) = self.save.take() {
            if let Err(e) = save.await {
                tracing::error!(error = %e, "the persistent-state writer ended abnormally");
            }
        }
    }

    pub(crate) fn set_config(&mut self, config: StatesConfig) {
        self.config = config;
    }

    /// Publishes the newest states to `newest` from now on (and at once, if they are restored).
    pub(crate) fn publish_to(&mut self, newest: NewestStates) {
        if let Some(states) = &self.states {
            newest.publish(states);
        }
        self.newest = newest;
    }

    /// Makes `states` the pipeline's newest and publishes them.
    fn set_states(&mut self, states: ChainStates) {
        self.newest.publish(&states);
        self.states = Some(states);
    }

    /// The newest states, restored first if they are not in memory yet: the last checkpoint's, advanced by
    /// the stored blocks after it up to `last`, the last applied mc block.
    pub(crate) async fn restore(
        &mut self,
        storage: &Storage,
        last: &BlockId,
    ) -> Result<&ChainStates, ApplyError> {
        if self.states.as_ref().is_some_and(|s| s.mc().id == *last) {
            return Ok(self.states.as_ref().expect("checked"));
        }
        self.resume_import(storage).await?;
        let checkpoint = match storage.cells().checkpoint()? {
            Some(checkpoint) => checkpoint,
            None => self.store_first_states(storage).await?,
        };
        let mut states = ChainStates::load(&self.store, &checkpoint).map_err(local)?;
        if last.seqno > checkpoint.seqno {
            let started = Instant::now();
            tracing::info!(
                from = checkpoint.seqno + 1,
                to = last.seqno,
                "re-applying the stored blocks after the last state checkpoint"
            );
            for seqno in checkpoint.seqno + 1..=last.seqno {
                let blocks = stored_group(storage, seqno, &states).await?;
                for block in &blocks {
                    apply_block(&self.store, &mut states, block).map_err(local)?;
                }
            }
            tracing::info!(
                blocks = last.seqno - checkpoint.seqno,
                seconds = started.elapsed().as_secs_f64(),
                "the states are restored"
            );
        }
        if states.mc().id != *last {
            return Err(local(StateError::Inconsistent(format!(
                "the states reached mc block {}, but the last applied mc block is {last}",
                states.mc().id
            ))));
        }
        self.set_states(states);
        if let Some(pending) = storage.cells().pending_persistent()? {
            tracing::info!(block = %pending, "resuming the persistent save a restart interrupted");
            self.start_persistent_save(storage, pending).await;
        }
        Ok(self.states.as_ref().expect("just set"))
    }

    /// Applies every block of `group` to a copy of the newest states: nothing is stored, and the pipeline's
    /// states move only at [`Self::finish_group`].
    pub(crate) async fn apply_group(
        &mut self,
        storage: &Storage,
        group: &Group,
        last: &BlockId,
        origin: &str,
    ) -> Result<AppliedStates, ApplyError> {
        let mut states = self.restore(storage, last).await?.clone();
        for block in group.in_order() {
            let started = Instant::now();
            apply_block(&self.store, &mut states, block.parsed()).map_err(|e| {
                ApplyError::blaming(
                    e.is_invalid_block(),
                    anyhow::Error::new(e).context(format!(
                        "{origin}: block {}: the state update was refused, nothing of its group is stored",
                        block.id()
                    )),
                )
            })?;
            metrics::histogram!("regolith_states_apply_seconds")
                .record(started.elapsed().as_secs_f64());
        }
        Ok(AppliedStates(states))
    }

    /// Makes `applied` (the states after `group`) the newest states and the group the last applied one: at a
    /// checkpoint, one batch stores the states with the last applied mc block, then unkept states go;
    /// otherwise only the last applied mc block is written. Returns whether the group's mc block is a
    /// persistent key block, whose persistent save the caller starts ([`Self::start_persistent_save`]).
    pub(crate) fn finish_group(
        &mut self,
        storage: &Storage,
        group: &Group,
        applied: AppliedStates,
    ) -> Result<bool, ApplyError> {
        let mut states = applied.0;
        let mc = *group.mc_id();
        let persistent = group.mc.is_key_block()
            && storage
                .handles()
                .is_persistent_key_block_at(mc.seqno, group.mc.gen_utime())?;
        if !persistent
            && !self
                .config
                .is_checkpoint(mc.seqno, group.mc.is_key_block(), states.fresh_cells())
        {
            storage.node_state().store_last_mc_block_id(&mc)?;
            self.set_states(states);
            return Ok(false);
        }
        self.checkpoint(storage, &mut states, persistent)?;
        self.set_states(states);
        Ok(persistent)
    }

    /// Stores `states` as a checkpoint with the last applied mc block, reads them back, and removes the
    /// states GC does not keep. At a persistent key block the same batch marks its persistent save pending
    /// and holds its states (SKIP_STATES_GC on the mc block and its top shard blocks).
    fn checkpoint(
        &self,
        storage: &Storage,
        states: &mut ChainStates,
        persistent: bool,
    ) -> Result<(), ApplyError> {
        let mc = states.mc().id;
        let mut all = Vec::with_capacity(states.shards().len() + 1);
        for state in std::iter::once(states.mc()).chain(states.shards()) {
            all.push((handle(storage, &state.id)?, state.root.clone()));
        }
        let written = self
            .store
            .write_states(&all, &format!("mc block {mc}"), |batch| {
                batch.put_checkpoint(&mc);
                batch.put_last_mc_block(&mc);
                if persistent {
                    batch.put_pending_persistent(&mc);
                    for (handle, _) in &all {
                        batch.add_flags(handle, regolith_storage::BlockFlags::SKIP_STATES_GC);
                    }
                }
            })
            .map_err(local)?;
        crate::crash::point("state-checkpoint-written");
        metrics::counter!("regolith_states_checkpoints_total").increment(1);
        metrics::counter!("regolith_states_cells_stored_total").increment(written.new_cells);
        metrics::counter!("regolith_states_checkpoint_bytes_total").increment(written.bytes);
        metrics::histogram!("regolith_states_checkpoint_seconds").record(written.seconds);
        tracing::debug!(
            mc = mc.seqno,
            new_cells = written.new_cells,
            bytes = written.bytes,
            seconds = written.seconds,
            "states stored"
        );
        states.reload(&self.store).map_err(local)?;
        let keep = self.config.keep_checkpoints.max(1) as usize;
        let removed = gc::collect(&self.store, storage, keep, || {
            crate::crash::point("states-gc-removed");
        })
        .map_err(local)?;
        if removed.removed_states > 0 {
            tracing::debug!(
                removed = removed.removed_states,
                cells = removed.deleted_cells,
                "states GC"
            );
        }
        Ok(())
    }

    /// Stores the states of the node's first block (the zerostate, or a cold boot's block) from its
    /// persistent state files as the first checkpoint.
    async fn store_first_states(&self, storage: &Storage) -> Result<BlockId, ApplyError> {
        let first = storage
            .node_state()
            .load_init_mc_block_id()?
            .ok_or_else(|| {
                local_msg("the data directory has no first mc block (was it initialised?)")
            })?;
        let started = Instant::now();
        tracing::info!(block = %first, "storing the states of the first mc block");
        let mc_root = read_state_file(storage, &first).await?;
        let tops = regolith_state::top_shard_blocks(&first, &mc_root).map_err(local)?;
        let mut states = vec![(handle(storage, &first)?, mc_root)];
        for top in &tops {
            states.push((handle(storage, top)?, read_state_file(storage, top).await?));
        }
        let (store, dir) = (self.store.clone(), import_dir(storage));
        let batch_cells = self.config.import_batch_cells as usize;
        let checkpoint = first;
        let written = tokio::task::spawn_blocking(move || {
            import::import_states(
                &store,
                &dir,
                &states,
                Some(&checkpoint),
                batch_cells,
                || {
                    crate::crash::point("state-import-batch-written");
                },
            )
        })
        .await
        .map_err(|e| local_msg(&format!("the state import ended abnormally: {e}")))?
        .map_err(local)?;
        record_import(&written);
        tracing::info!(
            block = %first,
            cells = written.new_cells,
            batches = written.batches,
            bytes = written.bytes,
            seconds = started.elapsed().as_secs_f64(),
            cells_per_s = written.new_cells as f64 / started.elapsed().as_secs_f64().max(1e-9),
            "stored the states of the first mc block"
        );
        Ok(first)
    }

    /// Finishes a state import a crash interrupted (state.md §7.6), before anything reads the cell rows.
    async fn resume_import(&self, storage: &Storage) -> Result<(), ApplyError> {
        let (store, storage, dir) = (self.store.clone(), storage.clone(), import_dir(storage));
        let batch_cells = self.config.import_batch_cells as usize;
        let resumed = tokio::task::spawn_blocking(move || {
            import::resume(&store, &storage, &dir, batch_cells, || {
                crate::crash::point("state-import-batch-written");
            })
        })
        .await
        .map_err(|e| local_msg(&format!("the state import ended abnormally: {e}")))?
        .map_err(local)?;
        if let Some(written) = resumed {
            record_import(&written);
            tracing::info!(
                states = written.states,
                cells = written.new_cells,
                batches = written.batches,
                seconds = written.seconds,
                "finished the state import a restart interrupted"
            );
        }
        Ok(())
    }
}

/// Where a state import keeps its delta file.
pub(crate) fn import_dir(storage: &Storage) -> std::path::PathBuf {
    storage.config().root_dir.join("state_import")
}

fn record_import(written: &import::ImportStats) {
    metrics::counter!("regolith_states_imported_cells_total").increment(written.new_cells);
    metrics::histogram!("regolith_states_import_seconds").record(written.seconds);
}

/// Applies the state update of one block.
fn apply_block(
    store: &StateStore,
    states: &mut ChainStates,
    block: &ParsedBlock,
) -> Result<(), StateError> {
    let id = &block.id;
    let update = block
        .block
        .load_state_update()
        .map_err(|e| StateError::InvalidUpdate {
            block: Box::new(*id),
            reason: format!("its state update does not parse: {e}"),
        })?;
    let prev = block.prev_ids().map_err(|e| StateError::InvalidUpdate {
        block: Box::new(*id),
        reason: e.to_string(),
    })?;
    states.apply(store, id, &prev, &update)
}

/// The stored blocks of mc block `seqno`'s group, in apply order: the shard blocks after the tops of
/// `states` up to the mc block's top shard blocks (by seqno), then the mc block.
async fn stored_group(
    storage: &Storage,
    seqno: u32,
    states: &ChainStates,
) -> Result<Vec<Arc<ParsedBlock>>, ApplyError> {
    let missing = |what: String| {
        local_msg(&format!(
            "cannot restore the states: {what} is not stored (block GC removed it, or the data directory is \
             damaged); a fresh data directory with a cold boot is needed"
        ))
    };
    let mc = storage
        .components()
        .find_mc_block_data(seqno)?
        .ok_or_else(|| missing(format!("mc block {seqno}")))?;
    let mc = Arc::new(mc);
    let mut shard_blocks: Vec<Arc<ParsedBlock>> = Vec::new();
    let mut pending = mc
        .top_shard_blocks()
        .map_err(|e| ApplyError::Local(e.into()))?;
    while let Some(id) = pending.pop() {
        let applied = states
            .shards()
            .iter()
            .any(|s| s.id.shard == id.shard && s.id.seqno >= id.seqno);
        if applied || shard_blocks.iter().any(|b| b.id == id) {
            continue;
        }
        let handle = storage
            .handles()
            .load_handle(&id)?
            .filter(BlockHandle::has_data)
            .ok_or_else(|| missing(format!("shard block {id}")))?;
        let block = storage.components().load_block_data(&handle).await?;
        pending.extend(block.prev_ids().map_err(|e| ApplyError::Local(e.into()))?);
        shard_blocks.push(block);
    }
    shard_blocks.sort_by_key(|b| (b.id.seqno, b.id.shard.workchain(), b.id.shard.prefix()));
    shard_blocks.push(mc);
    Ok(shard_blocks)
}

/// The handle of a block whose state is stored.
fn handle(storage: &Storage, id: &BlockId) -> Result<BlockHandle, ApplyError> {
    storage.handles().load_handle(id)?.ok_or_else(|| {
        local_msg(&format!(
            "block {id} has no handle, its state cannot be stored"
        ))
    })
}

/// The root of the persistent shard state file of block `id`, checked against the block (its root hash for
/// a zerostate, its state update's new hash otherwise).
async fn read_state_file(storage: &Storage, id: &BlockId) -> Result<Cell, ApplyError> {
    let states = storage.persistent_states();
    let record = states.get(id, StateKind::Shard)?.ok_or_else(|| {
        local_msg(&format!(
            "the data directory has no state checkpoint and no persistent state of block {id} to start \
             the states from; a fresh data directory is needed"
        ))
    })?;
    let path = states
        .file_path(&record, regolith_storage::StatePart::Unsplit)
        .ok_or_else(|| local_msg(&format!("the persistent state of {id} is split")))?;
    let expected = if id.seqno == 0 {
        id.root_hash
    } else {
        let handle = handle(storage, id)?;
        let block = storage.components().load_block_data(&handle).await?;
        block
            .block
            .load_state_update()
            .map_err(|e| ApplyError::Local(anyhow!("block {id}: its state update: {e}")))?
            .new_hash
    };
    let root = tokio::task::spawn_blocking(move || -> anyhow::Result<Cell> {
        let compressed =
            std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
        let raw =
            crate::boot::queue_state::decompress_bounded(&path, &compressed, MAX_STATE_BYTES)?;
        tycho_types::boc::Boc::decode(&raw)
            .map_err(|e| anyhow!("{} is not a BOC: {e}", path.display()))
    })
    .await
    .map_err(|e| local_msg(&format!("reading a state: {e}")))?
    .map_err(ApplyError::Local)?;
    if *root.repr_hash() != expected {
        return Err(local_msg(&format!(
            "the persistent state of {id} has root {}, the block's state is {expected}",
            root.repr_hash()
        )));
    }
    Ok(root)
}

fn local(e: StateError) -> ApplyError {
    ApplyError::Local(e.into())
}

fn local_msg(message: &str) -> ApplyError {
    ApplyError::Local(anyhow!("{message}"))
}
