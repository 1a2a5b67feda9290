//! The import of a persistent queue state file (queue.md §5.9), as a cold boot of the queue does it
//! (`regolith import-queue-state`). The expected diff hash and tail length come from the stored block, or
//! from the caller.

use std::io::Read;
use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use regolith_formats::{BlockId, HashBytes};
use regolith_queue::{ImportSummary, QueueStorage};
use regolith_storage::{StateKind, Storage};

/// zstd frame magic.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
/// zstd level of the served queue-state file.
const STATE_ZSTD_LEVEL: i32 = 3;
/// A decompressed queue state may not exceed this (the TL limits allow far less in practice).
const MAX_STATE_BYTES: u64 = 4 << 30;

/// What the import did.
#[derive(Debug, serde::Serialize)]
pub struct QueueStateReport {
    /// The block the state belongs to.
    pub block: String,
    /// The expected diff hash that was checked.
    pub diff_hash: String,
    /// The expected tail length that was checked.
    pub tail_len: u32,
    /// Whether the file was zstd-compressed.
    pub compressed: bool,
    /// Diffs imported.
    pub diffs: usize,
    /// Messages imported.
    pub messages: usize,
    /// The commit pointer set for the shard (seqno).
    pub pointer_seqno: Option<u32>,
    /// The persistent queue state file now served for the block (under `states/`).
    pub state_file: String,
}

/// The diff hash and tail length the block itself declares (`out_msg_queue_updates`).
async fn expected_from_block(storage: &Storage, id: &BlockId) -> Result<(HashBytes, u32)> {
    let handle = storage.handles().load_handle(id)?.ok_or_else(|| {
        anyhow!("block {id} is not stored: pass the expected --diff-hash and --tail-len")
    })?;
    if !handle.has_data() {
        bail!("block {id} has no data stored: pass the expected --diff-hash and --tail-len");
    }
    let block = storage.components().load_block_data(&handle).await?;
    let updates = &block.block.out_msg_queue_updates;
    Ok((updates.diff_hash, updates.tail_len))
}

/// Decompresses a zstd state file's bytes, stopping at `max` bytes (an error names the file).
pub(crate) fn decompress_bounded(path: &Path, raw: &[u8], max: u64) -> Result<Vec<u8>> {
    let decoder = zstd::stream::read::Decoder::new(raw)
        .with_context(|| format!("{}: not a zstd stream", path.display()))?;
    let mut out = Vec::new();
    decoder
        .take(max + 1)
        .read_to_end(&mut out)
        .with_context(|| format!("{}: corrupted zstd stream", path.display()))?;
    if out.len() as u64 > max {
        bail!("{}: decompresses to more than {max} bytes", path.display());
    }
    Ok(out)
}

/// Reads a queue-state file: zstd-compressed (detected by its magic) or plain TL.
fn read_state_file(path: &Path) -> Result<(Vec<u8>, bool)> {
    let raw = std::fs::read(path)
        .with_context(|| format!("cannot read queue state {}", path.display()))?;
    if !raw.starts_with(&ZSTD_MAGIC) {
        return Ok((raw, false));
    }
    let out = decompress_bounded(path, &raw, MAX_STATE_BYTES)?;
    Ok((out, true))
}

/// Imports `file` as the queue state of block `id`. Any error writes nothing.
pub async fn import(
    data_root: &Path,
    storage: &Storage,
    id: BlockId,
    file: &Path,
    diff_hash: Option<HashBytes>,
    tail_len: Option<u32>,
) -> Result<QueueStateReport> {
    let (diff_hash, tail_len) = match (diff_hash, tail_len) {
        (Some(h), Some(t)) => (h, t),
        (h, t) => {
            let (block_hash, block_tail) = expected_from_block(storage, &id).await?;
            (h.unwrap_or(block_hash), t.unwrap_or(block_tail))
        }
    };
    let (data, compressed) = read_state_file(file)?;
    let queue = QueueStorage::open(data_root)?;
    let (summary, data): (ImportSummary, Vec<u8>) = tokio::task::spawn_blocking({
        let queue = queue.clone();
        move || {
            queue
                .import_queue_state(&id, &diff_hash, tail_len, &data)
                .map(|summary| (summary, data))
        }
    })
    .await
    .context("the import task failed")?
    .with_context(|| format!("importing queue state {} for block {id}", file.display()))?;
    // Served as the block's persistent queue state: zstd-compressed TL, recorded in the state index.
    let served = zstd::bulk::compress(&data, STATE_ZSTD_LEVEL)
        .with_context(|| format!("compressing queue state {}", file.display()))?;
    let record = storage
        .persistent_states()
        .store(&id, StateKind::Queue, &served)
        .with_context(|| format!("recording the queue state of {id}"))?;
    Ok(QueueStateReport {
        block: id.to_string(),
        diff_hash: diff_hash.to_string(),
        tail_len,
        compressed,
        diffs: summary.diffs,
        messages: summary.messages,
        pointer_seqno: summary.pointer.map(|p| p.seqno),
        state_file: record.file,
    })
}
