//! `regolith import`: streams archives into block storage, verifying every block, in apply order.
//!
//! A block is stored only after its proof verifies: an mc block's by its validators' signatures, a shard
//! block's proof link by its structure, and the shard block is trusted through the mc block that references
//! it (its top shard block, or reached from it by prev ids), whose proof is verified before any of its shard
//! blocks is stored.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use bytes::Bytes;
use regolith_formats::archive::{ArchiveEntryType, ArchiveReader};
use regolith_formats::{BlockId, CheckedBlock};
use regolith_queue::DiffZone;
use regolith_storage::{BlockHandle, Direction, Storage};

use crate::group_commit::{GroupCommitter, Stopped};
use crate::progress::Progress;
use crate::proofs::ProofVerifier;
use crate::queue_sync::{self, NodeQueue};

/// What one archive import did.
#[derive(Debug, Default, serde::Serialize)]
pub struct ImportReport {
    /// The archive file.
    pub file: String,
    /// Blocks in the archive.
    pub blocks_in_archive: usize,
    /// Blocks applied now.
    pub blocks_imported: usize,
    /// Blocks that were already applied.
    pub blocks_already_present: usize,
    /// Decompressed archive bytes.
    pub decompressed_bytes: u64,
    /// Last applied mc seqno after the import.
    pub last_mc_seqno: u32,
    /// Wall time.
    pub elapsed_ms: u128,
}

/// How an import runs.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// Verify block proofs before storing blocks. Always on, except in the benchmark that measures its cost.
    pub verify_proofs: bool,
}

impl Default for ImportOptions {
    fn default() -> Self {
        Self {
            verify_proofs: true,
        }
    }
}

#[derive(Default)]
struct Parts {
    data: Option<(u64, Vec<u8>)>,
    proof: Option<(u64, Vec<u8>)>,
    queue_diff: Option<(u64, Vec<u8>)>,
}

/// The offset of a block's entry in the archive (for error messages).
fn entry_offset(parts: &Parts) -> u64 {
    parts.data.as_ref().map_or(0, |(offset, _)| *offset)
}

/// Checks the parts of one block read from the archive: each is decoded and hashed once, here.
fn check_parts(id: &BlockId, parts: Parts) -> Result<CheckedBlock> {
    let Parts {
        data,
        proof,
        queue_diff,
    } = parts;
    let (_, data) = data.ok_or_else(|| anyhow!("the archive has no data for it"))?;
    let (_, proof) = proof.ok_or_else(|| anyhow!("the archive has no proof for it"))?;
    let (_, queue_diff) =
        queue_diff.ok_or_else(|| anyhow!("the archive has no queue diff for it"))?;
    Ok(CheckedBlock::check(
        id,
        Bytes::from(data),
        Bytes::from(proof),
        Bytes::from(queue_diff),
    )?)
}

/// An archive read into memory: the parts of every block, the blocks in archive order, the decompressed
/// bytes read, and the error that stopped the reading early (what came before it is kept).
type ReadArchive = (
    HashMap<BlockId, Parts>,
    Vec<BlockId>,
    u64,
    Option<anyhow::Error>,
);

fn read_entries(path: &Path) -> Result<ReadArchive> {
    let file = std::fs::File::open(path)
        .with_context(|| format!("cannot open archive {}", path.display()))?;
    let mut reader = ArchiveReader::new_compressed(std::io::BufReader::new(file))
        .with_context(|| format!("cannot start decoding {}", path.display()))?;
    let mut parts: HashMap<BlockId, Parts> = HashMap::new();
    let mut order = Vec::new();
    let mut error = None;
    loop {
        match reader.next_entry() {
            Ok(Some(entry)) => {
                let slot = parts.entry(entry.block_id).or_default();
                let target = match entry.ty {
                    ArchiveEntryType::Block => &mut slot.data,
                    ArchiveEntryType::Proof => &mut slot.proof,
                    ArchiveEntryType::QueueDiff => &mut slot.queue_diff,
                };
                if target.is_some() {
                    error = Some(anyhow!(
                        "{}: duplicate {} entry of block {} at offset {}",
                        path.display(),
                        entry.ty,
                        entry.block_id,
                        entry.offset
                    ));
                    break;
                }
                if entry.ty == ArchiveEntryType::Block {
                    order.push(entry.block_id);
                }
                *target = Some((entry.offset, entry.data));
            }
            Ok(None) => break,
            Err(e) => {
                let block = e
                    .block_id
                    .map(|b| format!(", block {b}"))
                    .unwrap_or_default();
                error = Some(anyhow!(
                    "{}: corrupted archive at offset {}{block}: {}",
                    path.display(),
                    e.offset,
                    e.kind
                ));
                break;
            }
        }
    }
    Ok((parts, order, reader.offset(), error))
}

/// Where checked blocks came from, for messages: the archive file with each block's entry offset, or a
/// download.
struct Origin {
    name: String,
    offsets: HashMap<BlockId, u64>,
}

impl Origin {
    /// "ORIGIN: block ID at offset N" (the offset only for archive entries).
    fn location(&self, id: &BlockId) -> String {
        match self.offsets.get(id) {
            Some(offset) => format!("{}: block {id} at offset {offset}", self.name),
            None => format!("{}: block {id}", self.name),
        }
    }

    /// "ORIGIN: block ID (entry at offset N): WHAT".
    fn at(&self, id: &BlockId, what: &str) -> String {
        match self.offsets.get(id) {
            Some(offset) => format!(
                "{}: block {id} (entry at offset {offset}): {what}",
                self.name
            ),
            None => format!("{}: block {id}: {what}", self.name),
        }
    }
}

/// Blocks checked once each ([`CheckedBlock::check`]) and ready to apply: read from an archive, or
/// downloaded by sync. A block that did not check stays as the error that stops the apply at that block, so
/// that everything before it is still applied.
pub struct CheckedBlocks {
    origin: Origin,
    /// The blocks in the order they came.
    order: Vec<BlockId>,
    checked: HashMap<BlockId, CheckedBlock>,
    failures: HashMap<BlockId, anyhow::Error>,
    /// The error that stopped reading the archive early (what came before it is kept).
    read_error: Option<anyhow::Error>,
    decompressed_bytes: u64,
    /// The archive file, if they were read from one.
    file: String,
}

impl CheckedBlocks {
    /// Reads an archive file and checks every block of it.
    pub fn read_archive(path: &Path) -> Result<Self> {
        let (mut parts, order, decompressed_bytes, read_error) = read_entries(path)?;
        let file = path.display().to_string();
        let mut blocks = Self::new(file.clone(), order.len());
        blocks.read_error = read_error;
        blocks.decompressed_bytes = decompressed_bytes;
        blocks.file = file;
        for id in order {
            let p = parts.remove(&id).unwrap_or_default();
            blocks.origin.offsets.insert(id, entry_offset(&p));
            let checked = check_parts(&id, p);
            blocks.push(id, checked);
        }
        Ok(blocks)
    }

    /// Downloaded blocks, each checked already ([`crate::block_check::check_downloaded_block`]); the apply
    /// order is planned from the blocks' own references, whatever order they come in.
    pub fn downloaded(origin: String, blocks: Vec<CheckedBlock>) -> Self {
        let mut all = Self::new(origin, blocks.len());
        for block in blocks {
            all.push(*block.id(), Ok(block));
        }
        all
    }

    fn new(origin: String, capacity: usize) -> Self {
        Self {
            origin: Origin {
                name: origin,
                offsets: HashMap::new(),
            },
            order: Vec::with_capacity(capacity),
            checked: HashMap::with_capacity(capacity),
            failures: HashMap::new(),
            read_error: None,
            decompressed_bytes: 0,
            file: String::new(),
        }
    }

    fn push(&mut self, id: BlockId, checked: Result<CheckedBlock>) {
        self.order.push(id);
        match checked {
            Ok(c) => {
                self.checked.insert(id, c);
            }
            Err(e) => {
                let at = self.origin.location(&id);
                self.failures.insert(id, e.context(at));
            }
        }
    }
}

/// Imports one archive file. Blocks are applied in order (each mc block after the shard blocks it
/// references); everything stored before a bad entry stays valid.
pub async fn import_archive(
    storage: &Storage,
    queue: &NodeQueue,
    path: &Path,
    progress: &Progress,
) -> Result<ImportReport> {
    import_archive_with(storage, queue, path, progress, &ImportOptions::default()).await
}

/// [`import_archive`] with options.
pub async fn import_archive_with(
    storage: &Storage,
    queue: &NodeQueue,
    path: &Path,
    progress: &Progress,
    options: &ImportOptions,
) -> Result<ImportReport> {
    let started = Instant::now();
    let blocks = CheckedBlocks::read_archive(path)?;
    apply_blocks(storage, queue, blocks, progress, options, started).await
}

/// Applies checked blocks through the apply path of `regolith import`: proofs verified, each mc block after
/// the shard blocks it references, then storage, connections, archives, the queue and the group commit.
/// Nothing of a block is parsed or hashed again.
pub async fn apply_checked_blocks(
    storage: &Storage,
    queue: &NodeQueue,
    blocks: CheckedBlocks,
    progress: &Progress,
) -> Result<ImportReport> {
    let options = ImportOptions::default();
    apply_blocks(storage, queue, blocks, progress, &options, Instant::now()).await
}

async fn apply_blocks(
    storage: &Storage,
    queue: &NodeQueue,
    blocks: CheckedBlocks,
    progress: &Progress,
    options: &ImportOptions,
    started: Instant,
) -> Result<ImportReport> {
    let CheckedBlocks {
        origin,
        order,
        mut checked,
        mut failures,
        read_error,
        decompressed_bytes,
        file,
    } = blocks;
    let mut report = ImportReport {
        file,
        blocks_in_archive: order.len(),
        decompressed_bytes,
        ..Default::default()
    };

    // Which mc block references each shard block: walk back from the top shard blocks of every mc block.
    let mut mc_blocks: Vec<BlockId> = order
        .iter()
        .filter(|id| id.is_masterchain())
        .copied()
        .collect();
    mc_blocks.sort_by_key(|id| id.seqno);
    let in_archive: HashSet<BlockId> = order.iter().copied().collect();
    let mut ref_by: HashMap<BlockId, u32> = HashMap::new();
    for mc in &mc_blocks {
        let Some(c) = checked.get(mc) else { continue };
        let mut stack: Vec<BlockId> = c.top_shard_blocks().iter().map(|top| top.id).collect();
        while let Some(shard_id) = stack.pop() {
            if !in_archive.contains(&shard_id) || ref_by.contains_key(&shard_id) {
                continue;
            }
            ref_by.insert(shard_id, mc.seqno);
            if let Some(sc) = checked.get(&shard_id) {
                stack.extend(sc.prev_ids().iter().copied());
            }
        }
    }

    // Apply order.
    let mut shard_blocks_of: HashMap<u32, Vec<BlockId>> = HashMap::new();
    let mut unreferenced = Vec::new();
    for id in order.iter().filter(|id| !id.is_masterchain()) {
        match ref_by.get(id) {
            Some(mc) => shard_blocks_of.entry(*mc).or_default().push(*id),
            None => unreferenced.push(*id),
        }
    }
    let mut plan: Vec<(BlockId, u32, bool)> = Vec::new(); // (id, ref mc seqno, mc is key block)
    for mc in &mc_blocks {
        let mc_is_key = checked.get(mc).is_some_and(CheckedBlock::is_key_block);
        if let Some(shards) = shard_blocks_of.get_mut(&mc.seqno) {
            shards.sort_by_key(|id| (id.seqno, id.shard.workchain(), id.shard.prefix()));
            plan.extend(shards.iter().map(|id| (*id, mc.seqno, mc_is_key)));
        }
        plan.push((*mc, mc.seqno, mc_is_key));
    }

    let last_mc = storage
        .node_state()
        .load_last_mc_block_id()?
        .ok_or_else(|| {
            anyhow!("the data directory has no last applied mc block (was it initialised?)")
        })?;
    report.last_mc_seqno = last_mc.seqno;
    let mut expected_prev_mc = last_mc;
    let mut verifier = if options.verify_proofs {
        Some(ProofVerifier::new(storage)?)
    } else {
        None
    };
    let mc_by_seqno: HashMap<u32, BlockId> = mc_blocks.iter().map(|id| (id.seqno, *id)).collect();
    // Mc blocks checked (and, with verification, proven) in this pass: their shard blocks may be stored.
    let mut trusted_mc: HashSet<u32> = HashSet::new();

    progress.start(Path::new(&origin.name), plan.len() as u64);
    let mut bytes_done = 0u64;
    // The first diff of each shard in this pass is applied without the continuity check (queue.md §5.1).
    let mut queue_started: HashSet<regolith_formats::ShardIdent> = HashSet::new();
    let committer = GroupCommitter::start(storage, queue)?;
    let result: Result<()> = async {
        for (id, ref_mc, mc_is_key) in plan {
            if ref_mc <= last_mc.seqno {
                report.blocks_already_present += 1;
                progress.advance(1, 0);
                continue;
            }
            // The referencing mc block first: a shard block is trusted only through it, so nothing of a
            // group is stored before its mc block is checked and its proof verified.
            if !trusted_mc.contains(&ref_mc) {
                let Some(&mc_id) = mc_by_seqno.get(&ref_mc) else {
                    bail!(
                        "{}: block {id} is planned after mc block {ref_mc}, which is not in the archive",
                        origin.name
                    );
                };
                if let Some(e) = failures.remove(&mc_id) {
                    return Err(e);
                }
                if let Some(verifier) = verifier.as_mut() {
                    verify_proof(verifier, &origin, &checked[&mc_id]).await?;
                }
                trusted_mc.insert(ref_mc);
            }
            if let Some(e) = failures.remove(&id) {
                return Err(e);
            }
            let c = checked
                .remove(&id)
                .expect("every planned block without a failure was checked");
            if !id.is_masterchain() {
                if let Some(verifier) = verifier.as_mut() {
                    verify_proof(verifier, &origin, &c).await?;
                }
            }
            let at = |what: &str| origin.at(&id, what);
            if id.is_masterchain() {
                if id.seqno != expected_prev_mc.seqno + 1 {
                    bail!(
                        "{}: the archive continues at mc block {}, but the last applied mc block is {}; import archives in order",
                        origin.name,
                        id.seqno,
                        expected_prev_mc.seqno
                    );
                }
                if c.prev_ids().first() != Some(&expected_prev_mc) {
                    bail!(at(&format!(
                        "its previous block is not the last applied mc block {expected_prev_mc}"
                    )));
                }
            }
            let data_len = c.data().len() as u64;

            // Storage and the queue take the checked block as it is: nothing is parsed or hashed again.
            let stored = storage
                .components()
                .store_checked_block(&c, ref_mc)
                .await
                .with_context(|| at("storing the block"))?;
            let handle = stored.handle;
            store_connections(storage, &handle, c.prev_ids())
                .with_context(|| at("storing connections"))?;
            storage
                .archives()
                .move_into_archive(&handle, mc_is_key)
                .with_context(|| at("moving into archive"))?;
            let check = if queue_started.insert(id.shard) {
                None
            } else {
                Some(DiffZone::Both)
            };
            queue_sync::apply_checked_diff(queue, &c, check)
                .with_context(|| at("applying its queue diff"))?;
            if !id.is_masterchain() {
                crate::crash::point("shard-diff-applied");
            }
            if id.is_masterchain() {
                // The last write of the group. The group commit makes the group durable and then commits the
                // queue on it, while the next group is written: a crash in between is repaired at the next
                // start (queue.md §5.4), never the other way round.
                storage.node_state().store_last_mc_block_id(&id)?;
                report.last_mc_seqno = id.seqno;
                expected_prev_mc = id;
                crate::crash::point("mc-block-applied");
                committer.submit(&c)?;
            }
            report.blocks_imported += 1;
            bytes_done += data_len;
            progress.advance(1, data_len);
        }
        Ok(())
    }
    .await;
    // Everything applied is durable and committed before the import returns, also after an error.
    let committed = tokio::task::spawn_blocking(move || committer.finish())
        .await
        .map_err(|e| anyhow!("the group commit ended: {e}"))
        .and_then(|r| r);
    if result.is_err() || committed.is_err() {
        progress.finish();
    }
    match (result, committed) {
        (Ok(()), Ok(())) => {}
        (Err(e), Ok(())) => return Err(e),
        (Ok(()), Err(c)) => return Err(c),
        (Err(e), Err(c)) if e.is::<Stopped>() => return Err(c),
        (Err(e), Err(c)) => {
            tracing::error!(error = format!("{c:#}"), "the group commit failed too");
            return Err(e);
        }
    }
    progress.finish();

    if let Some(e) = failures.into_values().next() {
        return Err(e);
    }
    if let Some(e) = read_error {
        return Err(e);
    }
    if let Some(id) = unreferenced.first() {
        bail!(
            "{}: shard block {id} is not referenced by any masterchain block of the archive ({} such blocks)",
            origin.name,
            unreferenced.len()
        );
    }
    storage.archives().wait_for_archive_commit().await;
    report.elapsed_ms = started.elapsed().as_millis();
    tracing::info!(
        from = %origin.name,
        imported = report.blocks_imported,
        already_present = report.blocks_already_present,
        mib_per_s = bytes_done as f64 / 1048576.0 / started.elapsed().as_secs_f64().max(1e-9),
        "blocks applied"
    );
    Ok(report)
}

/// Verifies the signatures (mc) or the link (shard) of a checked block's proof; the error names the origin,
/// the block, its offset and the reason.
async fn verify_proof(
    verifier: &mut ProofVerifier<'_>,
    origin: &Origin,
    block: &CheckedBlock,
) -> Result<()> {
    verifier
        .verify_parsed(block.proof())
        .await
        .with_context(|| origin.at(block.id(), "proof rejected, nothing of it is stored"))?;
    Ok(())
}

/// Connections of a newly stored block (storage.md §6.4).
fn store_connections(storage: &Storage, handle: &BlockHandle, prev: &[BlockId]) -> Result<()> {
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
        _ => bail!("a block has {} previous blocks", prev.len()),
    }
    Ok(())
}
