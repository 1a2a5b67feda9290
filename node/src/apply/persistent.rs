//! Persistent states made by the node (state.md §7.4): at a persistent key block, the shard state of the mc
//! block and of each of its top shard blocks, and the queue state of each, as the files a stock node writes
//! and reads (rpc.md §4.3.2 names; a zstd-compressed one-root BOC, and a zstd-compressed TL
//! `block.queueState`), recorded in the state index and so served.
//!
//! The key block is a checkpoint, and its checkpoint batch marks the save pending and sets SKIP_STATES_GC on
//! the blocks whose states it writes (states GC keeps them). Then [`save`] writes each file that is not
//! recorded yet (storage's temp file, fsync, rename, record), and one last batch sets IS_PERSISTENT and the
//! SKIP_STATES_GC_FINISHED flags and clears the mark. While a save is pending, block GC waits (the queue
//! state needs the blocks of each chain's diff tail); a save a crash interrupted resumes at the next start.

use std::time::Instant;

use anyhow::{anyhow, Context, Result};
use regolith_formats::queue_diff::QueueDiff;
use regolith_formats::queue_state::{message_chunks, write_queue_state, QueueStateHeader};
use regolith_formats::BlockId;
use regolith_state::StateStore;
use regolith_storage::{BlockFlags, StateKind, Storage};
use tycho_types::cell::{Cell, HashBytes};

/// zstd level of the state files the node writes.
const STATE_ZSTD_LEVEL: i32 = 3;

/// What one save wrote.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct SaveReport {
    /// Files written now (shard and queue states).
    pub(crate) files: usize,
    /// Their bytes (compressed).
    pub(crate) bytes: u64,
    /// Seconds the save took.
    pub(crate) seconds: f64,
}

/// Writes the persistent states of the persistent key block `mc` (its states stored by its checkpoint),
/// then finishes the save.
pub(crate) async fn save(
    storage: &Storage,
    store: &StateStore,
    mc: &BlockId,
) -> Result<SaveReport> {
    let started = Instant::now();
    let mut report = SaveReport::default();
    let mc_root = store
        .load_state(mc)?
        .ok_or_else(|| anyhow!("the state of persistent key block {mc} is not stored"))?;
    let mut blocks = regolith_state::top_shard_blocks(mc, &mc_root)?;
    drop(mc_root);
    // The mc block's files last, as stock writes them.
    blocks.push(*mc);
    for id in &blocks {
        let states = storage.persistent_states();
        if states.get(id, StateKind::Shard)?.is_none() {
            let root = storage
                .cells()
                .state_root(id)?
                .ok_or_else(|| anyhow!("the state of block {id} is not stored"))?;
            let bytes = encode_shard_state(store, root)
                .await
                .with_context(|| format!("the shard state of {id}"))?;
            states.store(id, StateKind::Shard, &bytes)?;
            report.files += 1;
            report.bytes += bytes.len() as u64;
            crate::crash::point("persistent-state-file-written");
        }
        if id.seqno > 0 && states.get(id, StateKind::Queue)?.is_none() {
            let bytes = queue_state(storage, id)
                .await
                .with_context(|| format!("the queue state of {id}"))?;
            states.store(id, StateKind::Queue, &bytes)?;
            report.files += 1;
            report.bytes += bytes.len() as u64;
            crate::crash::point("persistent-state-file-written");
        }
    }
    let mut batch = storage.cells().batch();
    for id in &blocks {
        let handle = storage
            .handles()
            .load_handle(id)?
            .ok_or_else(|| anyhow!("block {id} has no handle"))?;
        let mut flags = BlockFlags::SKIP_STATES_GC_FINISHED;
        if id == mc {
            flags = flags | BlockFlags::IS_PERSISTENT;
        }
        batch.add_flags(&handle, flags);
    }
    batch.clear_pending_persistent();
    storage.cells().write(
        batch,
        format_args!("finishing the persistent states of {mc}"),
    )?;
    let rotated = rotate(storage, mc).await?;
    report.seconds = started.elapsed().as_secs_f64();
    metrics::counter!("regolith_states_persistent_bytes_total").increment(report.bytes);
    metrics::histogram!("regolith_states_persistent_seconds").record(report.seconds);
    tracing::info!(
        block = %mc,
        files = report.files,
        bytes = report.bytes,
        seconds = report.seconds,
        rotated,
        "persistent states written"
    );
    Ok(report)
}

/// How much older than a new persistent state the one is from whose predecessor on states are kept (stock's
/// rotation: with a persistent key block every 2^17 s, the three newest stay).
const ROTATION_OFFSET_SECS: u32 = 12 * 3600;

/// Removes the persistent states that the new ones of `mc` make old, as stock rotates them: let S be the
/// newest persistent key block at least [`ROTATION_OFFSET_SECS`] older than `mc`; the states of the key
/// block before S, of S and of every newer one stay (with their top shard blocks'), and so do the zerostates;
/// every other recorded state of a block committed before the oldest kept key block goes. Returns how many
/// were removed.
async fn rotate(storage: &Storage, mc: &BlockId) -> Result<usize> {
    let states = storage.persistent_states();
    let records = states.list()?;
    let handle_of = |id: &BlockId| -> Result<regolith_storage::BlockHandle> {
        storage
            .handles()
            .load_handle(id)?
            .ok_or_else(|| anyhow!("block {id} of a persistent state has no handle"))
    };
    let mut key_blocks: Vec<BlockId> = records
        .iter()
        .filter(|r| r.kind == StateKind::Shard && r.block.is_masterchain())
        .map(|r| r.block)
        .filter(|id| id.seqno > 0 && id.seqno <= mc.seqno)
        .collect();
    key_blocks.sort_by_key(|id| id.seqno);
    let now = handle_of(mc)?.gen_utime();
    let mut older = None;
    for (i, id) in key_blocks.iter().enumerate().rev() {
        if now.saturating_sub(handle_of(id)?.gen_utime()) >= ROTATION_OFFSET_SECS {
            older = Some(i);
            break;
        }
    }
    let Some(s) = older else {
        return Ok(0);
    };
    let keep_from = s.saturating_sub(1);
    let first_kept = key_blocks[keep_from].seqno;
    let mut kept: Vec<BlockId> = Vec::new();
    for id in &key_blocks[keep_from..] {
        kept.push(*id);
        let block = storage
            .components()
            .load_block_data(&handle_of(id)?)
            .await?;
        kept.extend(block.top_shard_blocks()?);
    }
    let mut removed = 0;
    for record in &records {
        let id = &record.block;
        if id.seqno == 0 || kept.contains(id) {
            continue;
        }
        // A block committed at or after the oldest kept key block is not older than what is kept.
        let committed_at = if id.is_masterchain() {
            id.seqno
        } else {
            handle_of(id)?.ref_by_mc_seqno()
        };
        if committed_at >= first_kept {
            continue;
        }
        states.remove(record)?;
        removed += 1;
        crate::crash::point("persistent-state-rotated");
    }
    Ok(removed)
}

/// The served form of a shard state: a one-root BOC (the root is cell 0), zstd-compressed. The BOC is read
/// from the cell rows (each once, none built into a cell) and compressed as it is written, on the blocking
/// pool.
async fn encode_shard_state(store: &StateStore, root: HashBytes) -> Result<Vec<u8>> {
    let store = store.clone();
    tokio::task::spawn_blocking(move || {
        let boc = store.read_state_boc(&root)?;
        let mut encoder = zstd::stream::write::Encoder::new(Vec::new(), STATE_ZSTD_LEVEL)
            .context("compressing")?;
        // The frame names its content size, as a one-shot compression's does.
        encoder
            .set_pledged_src_size(Some(boc.size()))
            .context("compressing")?;
        encoder.include_contentsize(true).context("compressing")?;
        boc.write(&mut encoder)?;
        encoder.finish().context("compressing")
    })
    .await
    .map_err(|e| anyhow!("the state writer ended: {e}"))?
}

/// The served form of the queue state of block `id`: the diffs of its tail (`tail_len` of them, newest
/// first) and their messages (newest diff first, each diff's in hash order) in chunks of at most
/// 10,000 roots (`message_chunks`), zstd-compressed. Diffs and messages come from the stored blocks.
async fn queue_state(storage: &Storage, id: &BlockId) -> Result<Vec<u8>> {
    let mut diffs: Vec<QueueDiff> = Vec::new();
    let mut messages: Vec<Cell> = Vec::new();
    let mut next = Some(*id);
    let mut tail_len = None;
    while let Some(current) = next.take() {
        let handle = storage
            .handles()
            .load_handle(&current)?
            .ok_or_else(|| anyhow!("block {current} of the diff tail is not stored"))?;
        let block = storage.components().load_block_data(&handle).await?;
        let tail = *tail_len.get_or_insert(block.block.out_msg_queue_updates.tail_len as usize);
        let raw = storage.components().load_queue_diff_raw(&handle).await?;
        let built = regolith_queue::diff_from_block(&current, Some(&block.block), &raw)?;
        let diff = QueueDiff::parse_for_block(&raw, &current)
            .map_err(|e| anyhow!("the queue diff of {current}: {e}"))?;
        let mut cells: Vec<Cell> = built
            .diff
            .messages
            .values()
            .map(|m| m.cell.clone())
            .collect();
        cells.sort_by_key(|c| *c.repr_hash());
        messages.extend(cells);
        diffs.push(diff);
        if diffs.len() < tail {
            let prev = block.prev_ids()?;
            match prev.as_slice() {
                [prev] if prev.seqno > 0 => next = Some(*prev),
                [_] => {}
                _ => return Err(anyhow!("block {current} follows a merge")),
            }
        }
    }
    let header = QueueStateHeader::new(id.shard, id.seqno, diffs)?;
    let chunks = message_chunks(&messages);
    let mut raw = Vec::new();
    write_queue_state(&header, &chunks, &mut raw);
    zstd::bulk::compress(&raw, STATE_ZSTD_LEVEL).context("compressing")
}
