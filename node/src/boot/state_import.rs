//! `regolith import ... --states DIR`: stores persistent state files (named as rpc.md §4.3.2 names them,
//! zstd-compressed) as the node's served persistent states, after the archives are imported. Each state is
//! checked against its stored block first: a shard state's root is the block's new state hash, and a queue
//! state's newest diff is the block's diff (`diff_hash`) with `tail_len` diffs. The block and, for an mc
//! block, its top shard blocks are marked persistent.

use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use regolith_formats::persistent_state::{parse_state_object_name, StateObject, StatePart};
use regolith_formats::queue_state::QueueState;
use regolith_formats::BlockId;
use regolith_storage::{StateKind, Storage};

/// A decompressed state may not exceed this.
const MAX_STATE_BYTES: u64 = 4 << 30;

/// What `--states` stored.
#[derive(Debug, Default, serde::Serialize)]
pub struct StateImportReport {
    /// Shard states stored.
    pub shard_states: usize,
    /// Queue states stored.
    pub queue_states: usize,
    /// States already recorded.
    pub already_present: usize,
}

fn decompress(path: &Path, raw: &[u8]) -> Result<Vec<u8>> {
    crate::boot::queue_state::decompress_bounded(path, raw, MAX_STATE_BYTES)
}

/// Checks the state of `id` in `raw` (decompressed) against the stored block.
async fn check_state(storage: &Storage, id: &BlockId, kind: StateKind, raw: &[u8]) -> Result<()> {
    let handle = storage
        .handles()
        .load_handle(id)?
        .ok_or_else(|| anyhow!("block {id} is not stored (import its archive first)"))?;
    if !handle.has_data() {
        bail!("block {id} has no data stored");
    }
    let block = storage.components().load_block_data(&handle).await?;
    check_state_of_block(&block, id, kind, raw)
}

/// Checks the state of `id` in `raw` (decompressed) against its block: a shard state's root is the block's
/// new state hash; a queue state is for the block and its newest diff and diff count are the block's.
pub(crate) fn check_state_of_block(
    block: &regolith_storage::ParsedBlock,
    id: &BlockId,
    kind: StateKind,
    raw: &[u8],
) -> Result<()> {
    match kind {
        StateKind::Shard => {
            let root = tycho_types::boc::Boc::decode(raw)
                .map_err(|e| anyhow!("the shard state of {id} is not a BOC: {e}"))?;
            let update = block
                .block
                .load_state_update()
                .map_err(|e| anyhow!("block {id}: state update: {e}"))?;
            if *root.repr_hash() != update.new_hash {
                bail!(
                    "the shard state of {id} has root {}, but the block's new state is {}",
                    root.repr_hash(),
                    update.new_hash
                );
            }
        }
        StateKind::Queue => {
            let state =
                QueueState::parse(raw).map_err(|e| anyhow!("the queue state of {id}: {e}"))?;
            let updates = &block.block.out_msg_queue_updates;
            let header = &state.header;
            if header.shard != id.shard || header.seqno != id.seqno {
                bail!(
                    "the queue state of {id} is for {}:{}",
                    header.shard,
                    header.seqno
                );
            }
            if header.diff_hashes().first() != Some(&updates.diff_hash) {
                bail!("the queue state of {id}: its newest diff is not the block's diff");
            }
            if header.diffs().len() != updates.tail_len as usize {
                bail!(
                    "the queue state of {id} has {} diffs, the block's tail_len is {}",
                    header.diffs().len(),
                    updates.tail_len
                );
            }
        }
    }
    Ok(())
}

/// Stores every unsplit state file of `dir` whose block is stored. Files with other names are skipped.
pub async fn import_states(storage: &Storage, dir: &Path) -> Result<StateImportReport> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .map(|e| Ok(e?.file_name().to_string_lossy().into_owned()))
        .collect::<std::io::Result<_>>()
        .with_context(|| format!("cannot list {}", dir.display()))?;
    names.sort();
    let mut report = StateImportReport::default();
    for name in names {
        let Some(StateObject::State(id, kind, StatePart::Unsplit)) = parse_state_object_name(&name)
        else {
            tracing::warn!(file = %name, "not an unsplit state file name, skipped");
            continue;
        };
        if storage.persistent_states().get(&id, kind)?.is_some() {
            report.already_present += 1;
            continue;
        }
        let path = dir.join(&name);
        let compressed =
            std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
        let raw = decompress(&path, &compressed)?;
        check_state(storage, &id, kind, &raw)
            .await
            .with_context(|| format!("{}", path.display()))?;
        storage
            .persistent_states()
            .store(&id, kind, &compressed)
            .with_context(|| format!("recording {}", path.display()))?;
        if let Some(handle) = storage.handles().load_handle(&id)? {
            storage.handles().set_block_persistent(&handle)?;
        }
        match kind {
            StateKind::Shard => report.shard_states += 1,
            StateKind::Queue => report.queue_states += 1,
        }
    }
    Ok(report)
}
