//! Cold boot: a node whose data directory holds only the zerostate starts from the latest persistent state
//! the network serves instead of replaying the chain from genesis (node.json `boot`).
//!
//! 1. The key blocks are walked from the zerostate, each proof verified against the set of the key block
//!    before it ([`crate::trust::key_blocks`]).
//! 2. The newest key block that the persistent rule marks persistent ((t >> 17) != (p >> 17) against the key
//!    block before it) and whose states a neighbour serves is the boot block; it is written to
//!    `<data>/boot.json`, marked `storing` before the first write, so that a restart after that resumes the
//!    same boot (before it, a restart chooses again).
//! 3. The boot block and its top shard blocks come from getBlockFull and are checked like every block (the
//!    mc block's proof against the verified key blocks); each block's shard state and queue state are
//!    downloaded into temp files under `<data>/boot/` and checked against its block: a shard state's root is
//!    the block's new state hash, a queue state's newest diff and diff count are the block's. A neighbour
//!    whose state fails is punished as malicious and the state is asked from another.
//! 4. Only then is anything stored, each step idempotent: the proofs of the key blocks before it (so that the
//!    node serves the key-block chain from the zerostate on), the blocks (ref by the boot block, not archived),
//!    the queue states (imported into the queue, one batch each), the states as served persistent states;
//!    the last write is the last applied mc block. A kill before it leaves `boot.json` incomplete and the next
//!    start boots from the same block again; nothing unverified is ever stored or served.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use regolith_formats::{BlockId, CheckedBlock, Proven};
use regolith_rpc::client::{BlockchainRpcClient, DataRequirement, Punishment};
use regolith_storage::{StateKind, Storage};
use serde::{Deserialize, Serialize};

use crate::boot_record::{BootRecord, BOOT_FILE};
use crate::queue_sync::NodeQueue;
use crate::trust::key_blocks::KeyBlockChain;

/// Where state downloads wait for their checks (under the data directory).
const BOOT_DIR: &str = "boot";
/// Answers asked for one block or one state before the boot gives up.
const ATTEMPTS: usize = 3;
/// zstd level of the served state files the boot writes.
const STATE_ZSTD_LEVEL: i32 = 3;
/// The persistent-state window: a key block is persistent when its gen_utime starts a new one.
const PERSISTENT_WINDOW_SHIFT: u32 = 17;

/// `node.json` `boot`: how a node with only the zerostate gets its first applied mc block.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum BootConfig {
    /// From the latest persistent state the network serves (genesis when there is none).
    #[default]
    LatestPersistent,
    /// From the zerostate: the node replays the chain.
    Genesis,
}

impl std::str::FromStr for BootConfig {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "latest-persistent" | "latest_persistent" => Ok(Self::LatestPersistent),
            "genesis" => Ok(Self::Genesis),
            other => Err(format!(
                "{other:?} is not a boot mode (latest-persistent or genesis)"
            )),
        }
    }
}

/// What a cold boot did.
#[derive(Debug, Clone)]
pub struct BootReport {
    /// The boot block.
    pub block: BlockId,
    /// Key blocks verified on the way.
    pub key_blocks: usize,
    /// Shard states and queue states stored.
    pub states: usize,
    /// Compressed state bytes downloaded.
    pub bytes: u64,
    /// Wall time.
    pub elapsed: std::time::Duration,
}

/// Whether the node at `storage` should cold-boot: a boot it started to store is unfinished, or it has
/// applied nothing but the zerostate (and `config` asks for a cold boot).
pub fn wanted(storage: &Storage, data_root: &Path, config: BootConfig) -> Result<bool> {
    match BootRecord::load(data_root)? {
        Some(record) if record.complete => return Ok(false),
        Some(record) if record.storing => return Ok(true),
        _ => {}
    }
    if config == BootConfig::Genesis {
        return Ok(false);
    }
    let last = storage.node_state().load_last_mc_block_id()?;
    Ok(last.is_none_or(|id| id.seqno == 0))
}

/// A block and what the boot downloaded for it.
struct BootBlock {
    block: CheckedBlock,
    states: Vec<DownloadedState>,
}

/// A state downloaded into temp files and checked against its block.
struct DownloadedState {
    kind: StateKind,
    /// The unsplit state, or the root of a split one (decompressed).
    path: PathBuf,
    /// 0 for an unsplit state.
    split_depth: u8,
    /// The parts of a split state: (prefix, decompressed file).
    parts: Vec<(u64, PathBuf)>,
    /// Compressed bytes downloaded.
    size: u64,
}

impl DownloadedState {
    fn files(&self) -> impl Iterator<Item = &PathBuf> {
        std::iter::once(&self.path).chain(self.parts.iter().map(|(_, p)| p))
    }
}

/// Runs the cold boot (the client has neighbours). `Ok(None)`: no persistent key block with served states
/// exists, the node goes on from genesis.
pub async fn cold_boot(
    storage: &Storage,
    queue: &NodeQueue,
    client: &BlockchainRpcClient,
    data_root: &Path,
) -> Result<Option<BootReport>> {
    let started = Instant::now();
    let zerostate = storage
        .node_state()
        .load_zerostate_id()?
        .context("the data directory has no zerostate id")?;
    let mut chain = KeyBlockChain::new(crate::trust::proofs::load_checker(storage)?, zerostate);
    let resumed = BootRecord::load(data_root)?.filter(|r| !r.complete && r.storing);
    let until = match &resumed {
        Some(record) => Some(record.block_id()?.seqno),
        None => None,
    };
    tracing::info!("cold boot: walking the key blocks from the zerostate");
    chain
        .walk(client, until)
        .await
        .context("cold boot: the chain of key blocks")?;
    let key_blocks = chain.blocks().len();
    let target = match &resumed {
        Some(record) => {
            let id = record.block_id()?;
            if chain.newest().map(|k| *k.id()) != Some(id) {
                bail!("cold boot: the boot block {id} of {BOOT_FILE} is not among the verified key blocks");
            }
            tracing::info!(block = %id, "cold boot: resuming");
            id
        }
        None => {
            let zerostate_utime = storage
                .handles()
                .load_key_block_handle(0)?
                .map_or(0, |h| h.gen_utime());
            match choose_boot_block(client, &chain, zerostate_utime).await? {
                Some(id) => id,
                None => {
                    tracing::info!(
                        key_blocks,
                        "cold boot: no persistent key block with served states; booting from genesis"
                    );
                    return Ok(None);
                }
            }
        }
    };
    let mut record = BootRecord {
        block: target.to_string(),
        complete: false,
        storing: resumed.is_some(),
        shard_states: 0,
        queue_states: 0,
        bytes: 0,
    };
    if resumed.is_none() {
        record.store(data_root)?;
    }
    tracing::info!(block = %target, key_blocks, "cold boot: booting from this persistent key block");

    let dir = data_root.join(BOOT_DIR);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mc = download_block(client, &target).await?;
    match chain.verify(mc.proof()) {
        Ok(Proven::Signed(_)) => {}
        Ok(Proven::Link) => bail!("cold boot: {target} is not proven by signatures"),
        Err(e) => bail!("cold boot: the proof of {target}: {e:#}"),
    }
    let mut blocks = vec![mc.clone()];
    for top in mc.top_shard_blocks() {
        if top.id.seqno > 0 {
            blocks.push(download_block(client, &top.id).await?);
        }
    }
    let mut boot_blocks = Vec::new();
    let mut bytes = 0u64;
    for block in blocks {
        let mut states = Vec::new();
        for kind in [StateKind::Shard, StateKind::Queue] {
            let state = download_state(client, &block, kind, &dir).await?;
            bytes += state.size;
            states.push(state);
        }
        boot_blocks.push(BootBlock { block, states });
    }

    // Everything is verified: store it. The mc block's queue state is imported after the last applied mc
    // block is stored (the import sets the queue's last committed mc block, which may never be ahead of
    // it); every step before `boot.json` says complete is done again, idempotently, by a resumed boot.
    crate::crash::point("cold-boot-verified");
    if !record.storing {
        record.storing = true;
        record.store(data_root)?;
    }
    // The proofs of the key blocks before the boot block, verified by the walk: the node serves the chain of
    // key blocks from the zerostate onward (getNextKeyBlockIds, getKeyBlockProof) like one that synced it.
    for key_block in chain.blocks() {
        let id = *key_block.id();
        if id.seqno >= target.seqno {
            break;
        }
        let meta = regolith_storage::NewBlockMeta {
            is_key_block: true,
            gen_utime: key_block.gen_utime(),
            ref_by_mc_seqno: id.seqno,
        };
        storage
            .components()
            .store_block_proof(&id, key_block.raw.clone(), meta)
            .await
            .with_context(|| format!("cold boot: storing the proof of key block {id}"))?;
    }
    let (mut shard_states, mut queue_states) = (0, 0);
    let mut mc_queue_state = None;
    for boot in &boot_blocks {
        let id = *boot.block.id();
        let stored = storage
            .components()
            .store_checked_block(&boot.block, target.seqno)
            .await
            .with_context(|| format!("cold boot: storing block {id}"))?;
        crate::crash::point("cold-boot-block-stored");
        for state in &boot.states {
            let kind = state.kind;
            let read = |path: &PathBuf| {
                std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))
            };
            let compress = |raw: &[u8]| {
                zstd::bulk::compress(raw, STATE_ZSTD_LEVEL)
                    .with_context(|| format!("compressing the {kind:?} state of {id}"))
            };
            let raw = read(&state.path)?;
            if storage.persistent_states().get(&id, kind)?.is_none() {
                let served = compress(&raw)?;
                if state.split_depth == 0 {
                    storage.persistent_states().store(&id, kind, &served)
                } else {
                    let mut parts = Vec::with_capacity(state.parts.len());
                    for (prefix, path) in &state.parts {
                        parts.push((*prefix, compress(&read(path)?)?));
                    }
                    let parts: Vec<(u64, &[u8])> =
                        parts.iter().map(|(p, b)| (*p, b.as_slice())).collect();
                    storage
                        .persistent_states()
                        .store_split(&id, state.split_depth, &served, &parts)
                }
                .with_context(|| format!("cold boot: recording the {kind:?} state of {id}"))?;
                crate::crash::point("cold-boot-state-stored");
            }
            match kind {
                StateKind::Shard => shard_states += 1,
                StateKind::Queue if id.is_masterchain() => {
                    mc_queue_state = Some((&boot.block, raw));
                }
                StateKind::Queue => {
                    import_queue_state(queue, &boot.block, raw).await?;
                    queue_states += 1;
                }
            }
        }
        storage.handles().set_block_persistent(&stored.handle)?;
    }
    storage.node_state().store_init_mc_block_id(&target)?;
    storage.node_state().store_last_mc_block_id(&target)?;
    crate::crash::point("cold-boot-last-mc-stored");
    if let Some((block, raw)) = mc_queue_state {
        import_queue_state(queue, block, raw).await?;
        queue_states += 1;
    }
    for boot in &boot_blocks {
        for path in boot.states.iter().flat_map(DownloadedState::files) {
            std::fs::remove_file(path)
                .with_context(|| format!("cannot remove {}", path.display()))?;
        }
    }
    BootRecord {
        complete: true,
        shard_states,
        queue_states,
        bytes,
        ..record
    }
    .store(data_root)?;
    let _ = std::fs::remove_dir(&dir);
    let report = BootReport {
        block: target,
        key_blocks,
        states: shard_states + queue_states,
        bytes,
        elapsed: started.elapsed(),
    };
    tracing::info!(
        block = %target,
        key_blocks,
        states = report.states,
        mib = bytes as f64 / 1048576.0,
        seconds = report.elapsed.as_secs_f64(),
        "cold boot finished"
    );
    Ok(Some(report))
}

/// Imports the (checked) queue state of `block` into the queue, in one batch.
async fn import_queue_state(queue: &NodeQueue, block: &CheckedBlock, raw: Vec<u8>) -> Result<()> {
    let id = *block.id();
    let updates = &block.parsed().block.out_msg_queue_updates;
    let (hash, tail) = (updates.diff_hash, updates.tail_len);
    let queue_storage = Arc::clone(queue.storage());
    tokio::task::spawn_blocking(move || queue_storage.import_queue_state(&id, &hash, tail, &raw))
        .await
        .context("the queue import task failed")?
        .with_context(|| format!("cold boot: importing the queue state of {id}"))?;
    Ok(())
}

/// The newest persistent key block whose shard and queue states a neighbour serves.
async fn choose_boot_block(
    client: &BlockchainRpcClient,
    chain: &KeyBlockChain,
    zerostate_utime: u32,
) -> Result<Option<BlockId>> {
    let blocks = chain.blocks();
    for (i, key_block) in blocks.iter().enumerate().rev() {
        let prev_utime = match i {
            0 => zerostate_utime,
            _ => blocks[i - 1].gen_utime(),
        };
        let persistent = (key_block.gen_utime() >> PERSISTENT_WINDOW_SHIFT)
            != (prev_utime >> PERSISTENT_WINDOW_SHIFT);
        if !persistent {
            continue;
        }
        let id = key_block.id();
        let served = client
            .find_persistent_state(id, StateKind::Shard)
            .await
            .is_ok()
            && client
                .find_persistent_state(id, StateKind::Queue)
                .await
                .is_ok();
        if served {
            return Ok(Some(*id));
        }
        tracing::info!(block = %id, "cold boot: no neighbour serves the states of this persistent key block");
    }
    Ok(None)
}

/// getBlockFull of `id`, checked (hashes, proof structure, queue diff); a neighbour whose answer fails is
/// punished as malicious, one without the block is not (as in the sync: a verified block named it, nobody
/// promised to hold it).
async fn download_block(client: &BlockchainRpcClient, id: &BlockId) -> Result<CheckedBlock> {
    let mut last_error = String::from("no answer");
    for _ in 0..ATTEMPTS {
        let answer = match client.get_block_full(id, DataRequirement::Optional).await {
            Ok(answer) => answer,
            Err(e) => {
                last_error = e.to_string();
                continue;
            }
        };
        let Some(data) = answer.data else {
            last_error = format!("{} does not have it", answer.neighbour.peer_id());
            continue;
        };
        match crate::sync::block_check::check_downloaded_block(Some(id), &data) {
            Ok(block) => return Ok(block),
            Err(e) => {
                answer.neighbour.punish(Punishment::Malicious);
                last_error = format!(
                    "the block from {} failed: {e:#}",
                    answer.neighbour.peer_id()
                );
                tracing::warn!(block = %id, error = %last_error, "cold boot: a block failed its checks");
            }
        }
    }
    bail!("cold boot: block {id}: {last_error}")
}

/// Downloads the `kind` state of `block` into temp files in `dir` (decompressed: the state, or the root and
/// every part of a split state) and checks it against the block. A neighbour whose state fails its check is
/// punished as malicious and the state is asked elsewhere.
async fn download_state(
    client: &BlockchainRpcClient,
    block: &CheckedBlock,
    kind: StateKind,
    dir: &Path,
) -> Result<DownloadedState> {
    let id = *block.id();
    let base = format!(
        "{}_{:016x}_{}_{}",
        id.shard.workchain(),
        id.shard.prefix(),
        id.seqno,
        match kind {
            StateKind::Shard => "state",
            StateKind::Queue => "queue",
        }
    );
    let path = dir.join(format!("{base}.tmp"));
    let mut last_error = String::from("no answer");
    let mut refused = Vec::new();
    for _ in 0..ATTEMPTS {
        let state = match client.find_persistent_state(&id, kind).await {
            Ok(state) => state,
            Err(e) => {
                last_error = e.to_string();
                continue;
            }
        };
        let peer = *state.neighbour.peer_id();
        // The client validated the split metadata (§7.8), so the depth fits.
        let split_depth = u8::try_from(state.split_depth).unwrap_or(u8::MAX);
        let downloaded = DownloadedState {
            kind,
            path: path.clone(),
            split_depth,
            parts: state
                .parts
                .iter()
                .map(|p| {
                    (
                        p.prefix,
                        dir.join(format!("{base}_part_{:016x}.tmp", p.prefix)),
                    )
                })
                .collect(),
            size: state.size + state.parts.iter().map(|p| p.size).sum::<u64>(),
        };
        let objects = std::iter::once((None, &downloaded.path, state.size)).chain(
            downloaded
                .parts
                .iter()
                .zip(&state.parts)
                .map(|((prefix, path), p)| (Some(*prefix), path, p.size)),
        );
        let mut failed = None;
        for (part, path, size) in objects {
            let file = std::fs::File::create(path)
                .with_context(|| format!("cannot create {}", path.display()))?;
            let what = match part {
                None if split_depth > 0 => format!("cold boot: {kind:?} state of {id}, root"),
                None => format!("cold boot: {kind:?} state of {id}"),
                Some(prefix) => format!("cold boot: {kind:?} state of {id}, part {prefix:016x}"),
            };
            let progress = crate::progress::ByteProgress::new(&what, size);
            let got = client
                .download_persistent_state(&state, part, std::io::BufWriter::new(file), move |n| {
                    progress.set(n);
                })
                .await;
            if let Err(e) = got {
                failed = Some(format!("downloading {what} from {peer}: {e}"));
                break;
            }
        }
        if let Some(error) = failed {
            last_error = error;
            continue;
        }
        match check_downloaded(block, &downloaded) {
            Ok(()) => {
                for path in downloaded.files() {
                    std::fs::File::open(path)
                        .and_then(|f| f.sync_all())
                        .with_context(|| format!("cannot sync {}", path.display()))?;
                }
                return Ok(downloaded);
            }
            Err(e) => {
                state.neighbour.punish(Punishment::Malicious);
                let error = format!("the state from {peer} failed its check: {e:#}");
                tracing::warn!(block = %id, ?kind, %error, "cold boot: a state refused");
                refused.push(error);
                for path in downloaded.files() {
                    let _ = std::fs::remove_file(path);
                }
            }
        }
    }
    let _ = std::fs::remove_file(&path);
    if refused.is_empty() || last_error != "no answer" {
        refused.push(last_error);
    }
    bail!(
        "cold boot: the {kind:?} state of {id}: {}",
        refused.join("; ")
    )
}

/// The check of a downloaded state against its block: an unsplit state's root or queue state as
/// `import --states` checks it; a split state's root file and parts as rpc.md §7.7 lays them out.
fn check_downloaded(block: &CheckedBlock, state: &DownloadedState) -> Result<()> {
    let id = block.id();
    let read = |path: &PathBuf| {
        std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))
    };
    let root = read(&state.path)?;
    if state.split_depth == 0 {
        return crate::boot::state_import::check_state_of_block(
            block.parsed(),
            id,
            state.kind,
            &root,
        );
    }
    let parts = state
        .parts
        .iter()
        .map(|(prefix, path)| Ok((*prefix, read(path)?)))
        .collect::<Result<Vec<_>>>()?;
    let parts: Vec<(u64, &[u8])> = parts.iter().map(|(p, b)| (*p, b.as_slice())).collect();
    let update = block
        .parsed()
        .block
        .load_state_update()
        .map_err(|e| anyhow!("block {id}: state update: {e}"))?;
    regolith_formats::split_state::check_split_state(&root, &parts, &update.new_hash)
        .with_context(|| format!("the split shard state of {id}"))
}
