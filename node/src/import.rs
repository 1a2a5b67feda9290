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
use regolith_formats::queue_diff::{queue_diff_hash, QueueDiff};
use regolith_formats::BlockId;
use regolith_queue::DiffZone;
use regolith_storage::{
    BlockHandle, Direction, MaybeExistingHandle, NewBlockMeta, ParsedBlock, Storage,
};
use tycho_types::models::PrevBlockRef;

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

/// A block read from the archive and checked.
struct Checked {
    parsed: ParsedBlock,
    is_key_block: bool,
    gen_utime: u32,
    prev: Vec<BlockId>,
    offset: u64,
}

fn check_block(id: &BlockId, offset: u64, raw: &[u8]) -> Result<Checked> {
    let file_hash = regolith_storage::parsed::file_hash(raw);
    if file_hash != id.file_hash {
        bail!("file hash {file_hash} of the block BOC differs from the id");
    }
    let parsed = ParsedBlock::parse(id, raw)?;
    let info = parsed.block.load_info().context("cannot read block info")?;
    if info.shard != id.shard || info.seqno != id.seqno {
        bail!(
            "the block is {}:{}, not {}",
            info.shard,
            info.seqno,
            id.as_short_id()
        );
    }
    let prev = match info.load_prev_ref().context("cannot read prev ref")? {
        PrevBlockRef::Single(r) => {
            let shard = if info.after_split {
                id.shard
                    .merge()
                    .ok_or_else(|| anyhow!("after_split on a full shard"))?
            } else {
                id.shard
            };
            vec![r.as_block_id(shard)]
        }
        PrevBlockRef::AfterMerge { left, right } => {
            let (l, r) = id
                .shard
                .split()
                .ok_or_else(|| anyhow!("after_merge on an unsplittable shard"))?;
            vec![left.as_block_id(l), right.as_block_id(r)]
        }
    };
    Ok(Checked {
        is_key_block: info.key_block,
        gen_utime: info.gen_utime,
        parsed,
        prev,
        offset,
    })
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
    let (mut parts, order, decompressed_bytes, read_error) = read_entries(path)?;
    let mut report = ImportReport {
        file: path.display().to_string(),
        blocks_in_archive: order.len(),
        decompressed_bytes,
        ..Default::default()
    };

    // Check every block; remember failures so that the import can stop exactly there.
    let mut checked: HashMap<BlockId, Checked> = HashMap::new();
    let mut failures: HashMap<BlockId, anyhow::Error> = HashMap::new();
    for id in &order {
        let (offset, raw) = parts[id].data.as_ref().expect("ordered ids have data");
        match check_block(id, *offset, raw) {
            Ok(c) => {
                checked.insert(*id, c);
            }
            Err(e) => {
                failures.insert(
                    *id,
                    e.context(format!("{}: block {id} at offset {offset}", path.display())),
                );
            }
        }
    }

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
        let mut stack = c.parsed.top_shard_blocks().with_context(|| {
            format!(
                "{}: mc block {mc}: cannot read its shard blocks",
                path.display()
            )
        })?;
        while let Some(shard_id) = stack.pop() {
            if !in_archive.contains(&shard_id) || ref_by.contains_key(&shard_id) {
                continue;
            }
            ref_by.insert(shard_id, mc.seqno);
            if let Some(sc) = checked.get(&shard_id) {
                stack.extend(sc.prev.iter().copied());
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
        let mc_is_key = checked.get(mc).is_some_and(|c| c.is_key_block);
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
    // Mc blocks whose proofs verified in this pass: their shard blocks may be stored.
    let mut verified_mc: HashSet<u32> = HashSet::new();

    progress.start(path, plan.len() as u64);
    let mut bytes_done = 0u64;
    // The first diff of each shard in this pass is applied without the continuity check (queue.md §5.1).
    let mut queue_started: HashSet<regolith_formats::ShardIdent> = HashSet::new();
    for (id, ref_mc, mc_is_key) in plan {
        if ref_mc <= last_mc.seqno {
            report.blocks_already_present += 1;
            progress.advance(1, 0);
            continue;
        }
        if let Some(e) = failures.remove(&id) {
            progress.finish();
            return Err(e);
        }
        if let Some(verifier) = verifier.as_mut() {
            // The referencing mc block first: a shard block is trusted only through it.
            if !verified_mc.contains(&ref_mc) {
                let Some(&mc_id) = mc_by_seqno.get(&ref_mc) else {
                    bail!(
                        "{}: block {id} is planned after mc block {ref_mc}, which is not in the archive",
                        path.display()
                    );
                };
                let result = verify_proof(verifier, path, &mc_id, &parts, &checked).await;
                if result.is_err() {
                    progress.finish();
                }
                result?;
                verified_mc.insert(ref_mc);
            }
            if !id.is_masterchain() {
                let result = verify_proof(verifier, path, &id, &parts, &checked).await;
                if result.is_err() {
                    progress.finish();
                }
                result?;
            }
        }
        let c = checked
            .remove(&id)
            .expect("every planned block was checked");
        let p = parts.remove(&id).unwrap_or_default();
        let at = |what: &str| {
            format!(
                "{}: block {id} (entry at offset {}): {what}",
                path.display(),
                c.offset
            )
        };

        if id.is_masterchain() {
            if id.seqno != expected_prev_mc.seqno + 1 {
                bail!(
                    "{}: the archive continues at mc block {}, but the last applied mc block is {}; import archives in order",
                    path.display(),
                    id.seqno,
                    expected_prev_mc.seqno
                );
            }
            if c.prev.first() != Some(&expected_prev_mc) {
                bail!(at(&format!(
                    "its previous block is not the last applied mc block {expected_prev_mc}"
                )));
            }
        }
        let (_, proof) = p
            .proof
            .ok_or_else(|| anyhow!(at("the archive has no proof for it")))?;
        let (_, diff) = p
            .queue_diff
            .ok_or_else(|| anyhow!(at("the archive has no queue diff for it")))?;
        QueueDiff::parse_for_block(&diff, &id).with_context(|| at("bad queue diff"))?;
        let expected_diff_hash = c.parsed.block.out_msg_queue_updates.diff_hash;
        let diff_hash = queue_diff_hash(&diff);
        if diff_hash != expected_diff_hash {
            bail!(at(&format!(
                "queue diff hash {diff_hash} differs from the block's {expected_diff_hash}"
            )));
        }
        let queue_diff = Bytes::from(diff);
        let data = Bytes::from(p.data.map(|(_, d)| d).unwrap_or_default());
        let data_len = data.len() as u64;

        let meta = NewBlockMeta {
            is_key_block: c.is_key_block,
            gen_utime: c.gen_utime,
            ref_by_mc_seqno: ref_mc,
        };
        let components = storage.components();
        let stored = components
            .store_block_data(&id, data, meta)
            .await
            .with_context(|| at("storing data"))?;
        let handle = stored.handle;
        components
            .store_block_proof(
                &id,
                Bytes::from(proof),
                MaybeExistingHandle::Existing(handle.clone()),
            )
            .await
            .with_context(|| at("storing proof"))?;
        components
            .store_queue_diff(
                &id,
                queue_diff.clone(),
                MaybeExistingHandle::Existing(handle.clone()),
            )
            .await
            .with_context(|| at("storing queue diff"))?;
        store_connections(storage, &handle, &c.prev).with_context(|| at("storing connections"))?;
        storage
            .archives()
            .move_into_archive(&handle, mc_is_key)
            .with_context(|| at("moving into archive"))?;
        let check = if queue_started.insert(id.shard) {
            None
        } else {
            Some(DiffZone::Both)
        };
        queue_sync::apply_block_diff(queue, &c.parsed, &queue_diff, check)
            .with_context(|| at("applying its queue diff"))?;
        if !id.is_masterchain() {
            crate::crash::point("shard-diff-applied");
        }
        if id.is_masterchain() {
            // The block is applied first, then the queue commits on it: a crash in between is repaired at the
            // next start (queue.md §5.4), never the other way round.
            storage.node_state().store_last_mc_block_id(&id)?;
            report.last_mc_seqno = id.seqno;
            expected_prev_mc = id;
            crate::crash::point("mc-block-applied");
            queue_sync::commit_mc_block(queue, &c.parsed)
                .with_context(|| at("committing the queue"))?;
        }
        report.blocks_imported += 1;
        bytes_done += data_len;
        progress.advance(1, data_len);
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
            path.display(),
            unreferenced.len()
        );
    }
    storage.archives().wait_for_archive_commit().await;
    report.elapsed_ms = started.elapsed().as_millis();
    tracing::info!(
        file = %path.display(),
        imported = report.blocks_imported,
        already_present = report.blocks_already_present,
        mib_per_s = bytes_done as f64 / 1048576.0 / started.elapsed().as_secs_f64().max(1e-9),
        "archive imported"
    );
    Ok(report)
}

/// Verifies the archive's proof of `id`; the error names the file, the block, its offset and the reason.
async fn verify_proof(
    verifier: &mut ProofVerifier<'_>,
    path: &Path,
    id: &BlockId,
    parts: &HashMap<BlockId, Parts>,
    checked: &HashMap<BlockId, Checked>,
) -> Result<()> {
    let offset = checked.get(id).map_or(0, |c| c.offset);
    let Some((_, proof)) = parts.get(id).and_then(|p| p.proof.as_ref()) else {
        bail!(
            "{}: block {id} (entry at offset {offset}): the archive has no proof for it",
            path.display()
        );
    };
    verifier.verify(id, proof).await.with_context(|| {
        format!(
            "{}: block {id} (entry at offset {offset}): proof rejected, nothing of it is stored",
            path.display()
        )
    })?;
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
