//! Keeps the internal message queue in step with the applied blocks: the diff of every applied block goes
//! into the queue, every applied mc block commits it, and every start runs queue.md §5.4 (check, clear the
//! uncommitted zone, re-apply what was applied after the last commit, commit, clear again).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use anyhow::{anyhow, Context, Result};
use regolith_formats::{BlockId, CheckedBlock, ShardIdent, TopShardBlock};
use regolith_queue::{
    diff_from_block, diff_from_checked, DiffZone, EnqueuedMessage, MessageQueue, Queue,
    QueueConfig, QueueFactory, QueueStorage, TopBlock,
};
use regolith_storage::{Direction, ParsedBlock, Storage};

/// The node's queue of internal messages.
pub type NodeQueue = Arc<Queue<EnqueuedMessage>>;

/// Partitions a commit covers: the main and the low-priority partition (queue.md §5.2).
pub(crate) const PARTITIONS: [u16; 2] = [0, 1];

/// Opens `<data>/int_queue` and runs the start procedure (queue.md §5.4). `with_gc` then starts the GC task
/// (a running node); tools that must leave the committed data exactly as a clean import left it (import) run
/// without it. The GC task starts only after the start procedure, so it never races the catch-up.
pub async fn start(
    data_root: &std::path::Path,
    storage: &Storage,
    config: QueueConfig,
    with_gc: bool,
) -> Result<(NodeQueue, StartReport)> {
    let zerostate_id = storage
        .node_state()
        .load_zerostate_id()?
        .ok_or_else(|| anyhow!("the data directory has no zerostate id (was it initialised?)"))?;
    let queue_storage = QueueStorage::open(data_root).map_err(|e| {
        if e.is_locked() {
            anyhow!(
                "{e}\n(is a regolith node already running on {}? stop it first)",
                data_root.display()
            )
        } else {
            e.into()
        }
    })?;
    let queue = QueueFactory::new(queue_storage.clone(), zerostate_id, config)
        .create_without_gc::<EnqueuedMessage>()?;
    // An unfinished cold boot imports the queue states again and commits the queue on its boot block itself:
    // the queue may hold part of it until then, which the start procedure must not try to repair.
    let report = if crate::boot_record::BootRecord::load(data_root)?
        .is_some_and(|r| !r.complete && r.storing)
    {
        tracing::info!("an unfinished cold boot: the queue start waits for the boot to finish");
        StartReport::default()
    } else {
        prepare_for_start(storage, &queue).await?
    };
    if !with_gc {
        return Ok((queue, report));
    }
    drop(queue);
    let queue = QueueFactory::new(queue_storage, zerostate_id, config).create()?;
    Ok((queue, report))
}

/// Applies the queue diff of a stored block; `check` is `None` for the first block of a shard in a pass and
/// `Some(DiffZone::Both)` after it (queue.md §5.1). Returns whether anything was written.
pub fn apply_block_diff(
    queue: &NodeQueue,
    block: &ParsedBlock,
    tl_diff: &[u8],
    check: Option<DiffZone>,
) -> Result<bool> {
    let built = diff_from_block(&block.id, Some(&block.block), tl_diff)
        .with_context(|| format!("building the queue diff of block {}", block.id))?;
    apply_built(queue, &block.id, built, check)
}

/// [`apply_block_diff`] for a checked block: its TL diff was parsed and hashed when it was checked.
pub fn apply_checked_diff(
    queue: &NodeQueue,
    block: &CheckedBlock,
    check: Option<DiffZone>,
) -> Result<bool> {
    let built = diff_from_checked(block)
        .with_context(|| format!("building the queue diff of block {}", block.id()))?;
    apply_built(queue, block.id(), built, check)
}

fn apply_built(
    queue: &NodeQueue,
    id: &BlockId,
    built: regolith_queue::BlockQueueDiff,
    check: Option<DiffZone>,
) -> Result<bool> {
    queue
        .apply_diff(
            &built.diff,
            id.as_short_id(),
            &built.hash,
            &built.statistics,
            check,
        )
        .with_context(|| format!("applying the queue diff of block {id}"))
}

/// The commit entries of an mc block: the block itself, then its top shard blocks (queue.md §5.2).
pub fn top_blocks(mc: &ParsedBlock) -> Result<Vec<TopBlock>> {
    if !mc.id.is_masterchain() {
        return Err(anyhow!("block {} is not a masterchain block", mc.id));
    }
    let shards = mc
        .shard_descriptions()
        .with_context(|| format!("mc block {}: cannot read its shard blocks", mc.id))?;
    Ok(commit_entries(&mc.id, &shards))
}

/// The commit entries of an mc block from its shard description.
pub(crate) fn commit_entries(mc: &BlockId, shards: &[TopShardBlock]) -> Vec<TopBlock> {
    let mut out = Vec::with_capacity(shards.len() + 1);
    out.push(TopBlock {
        block_id: *mc,
        ref_by_mc_seqno: mc.seqno,
        updated: true,
    });
    out.extend(shards.iter().map(|top| TopBlock {
        block_id: top.id,
        ref_by_mc_seqno: top.reg_mc_seqno,
        updated: top.updated,
    }));
    out
}

/// Commits the queue on an applied mc block.
pub fn commit_mc_block(queue: &NodeQueue, mc: &ParsedBlock) -> Result<()> {
    let top = top_blocks(mc)?;
    queue
        .commit(&top, &PARTITIONS)
        .with_context(|| format!("committing the queue on mc block {}", mc.id))
}

/// What the start procedure did.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct StartReport {
    /// The last applied mc block.
    pub last_applied_mc_seqno: u32,
    /// The last committed mc block before the start.
    pub last_committed_mc_seqno: Option<u32>,
    /// Diffs re-applied because their blocks were applied after the last commit.
    pub reapplied_diffs: usize,
    /// Shards whose uncommitted zone was cleared.
    pub cleared_shards: usize,
}

/// queue.md §5.4, steps 2–4, on an opened queue. Fails if the queue is committed beyond the last applied mc
/// block. Safe to run at any time the queue is not otherwise in use; a crash at any point leaves a state the
/// next run repairs.
async fn prepare_for_start(storage: &Storage, queue: &NodeQueue) -> Result<StartReport> {
    let last_mc = storage
        .node_state()
        .load_last_mc_block_id()?
        .ok_or_else(|| anyhow!("the data directory has no last applied mc block"))?;
    let mc_block = load_block(storage, &last_mc).await?;

    // Every shard of the current mc state, plus every shard the queue knows of: clearing more shards is
    // safe, since everything above the commit pointers is rebuilt from the applied blocks.
    let top = match &mc_block {
        Some(block) => top_blocks(block)?,
        None => Vec::new(),
    };
    let pointers = queue.commit_pointers()?;
    let mut shards: BTreeSet<ShardIdent> = top.iter().map(|t| t.block_id.shard).collect();
    shards.extend(pointers.keys().copied());
    shards.extend(queue.storage().shards_with_diffs()?);
    shards.insert(ShardIdent::MASTERCHAIN);
    let shards: Vec<ShardIdent> = shards.into_iter().collect();

    let committed = queue.last_committed_mc_block()?;
    let mut report = StartReport {
        last_applied_mc_seqno: last_mc.seqno,
        last_committed_mc_seqno: committed.map(|id| id.seqno),
        reapplied_diffs: 0,
        cleared_shards: shards.len(),
    };
    queue
        .prepare_for_start(&last_mc, &shards)
        .context("starting the internal queue")?;

    let Some(mc_block) = mc_block else {
        return Ok(report); // only the zerostate is applied: nothing to re-apply
    };
    if committed == Some(last_mc) {
        return Ok(report);
    }

    // Blocks applied after the last commit: walk back from the top blocks of the last applied mc block (and
    // from the mc block itself) until a block at or below its shard's commit pointer.
    let mut pending: BTreeMap<ShardIdent, BTreeMap<u32, BlockId>> = BTreeMap::new();
    let mut seen: HashSet<BlockId> = HashSet::new();
    let mut stack: Vec<BlockId> = top
        .iter()
        .filter(|t| t.block_id.seqno > 0)
        .map(|t| t.block_id)
        .collect();
    while let Some(id) = stack.pop() {
        if !seen.insert(id) {
            continue;
        }
        if pointers.get(&id.shard).is_some_and(|p| id.seqno <= p.seqno) {
            continue;
        }
        if storage.handles().load_handle(&id)?.is_none() {
            continue; // not stored (zerostate or removed): nothing to re-apply
        }
        pending.entry(id.shard).or_default().insert(id.seqno, id);
        for dir in [Direction::Prev1, Direction::Prev2] {
            if let Some(prev) = storage.connections().load_connection(&id, dir)? {
                if prev.seqno > 0 {
                    stack.push(prev);
                }
            }
        }
    }

    // Shards first, then the masterchain; within a shard by seqno: `None` first, then `Some(Both)`.
    let mut order: Vec<&BTreeMap<u32, BlockId>> = pending
        .iter()
        .filter(|(shard, _)| !shard.is_masterchain())
        .map(|(_, blocks)| blocks)
        .collect();
    if let Some(mc) = pending.get(&ShardIdent::MASTERCHAIN) {
        order.push(mc);
    }
    for blocks in order {
        let mut check = None;
        for id in blocks.values() {
            let handle = storage
                .handles()
                .load_handle(id)?
                .ok_or_else(|| anyhow!("block {id} disappeared during the queue start"))?;
            let block = storage
                .components()
                .load_block_data(&handle)
                .await
                .with_context(|| format!("loading block {id} to re-apply its queue diff"))?;
            let diff = storage
                .components()
                .load_queue_diff_raw(&handle)
                .await
                .with_context(|| format!("loading the queue diff of block {id}"))?;
            if apply_block_diff(queue, &block, &diff, check)? {
                report.reapplied_diffs += 1;
            }
            check = Some(DiffZone::Both);
        }
    }
    commit_mc_block(queue, &mc_block)?;
    queue
        .clear_uncommitted(&PARTITIONS, &shards)
        .context("clearing the uncommitted zone after the start")?;
    tracing::info!(
        last_applied_mc = last_mc.seqno,
        last_committed_mc = ?report.last_committed_mc_seqno,
        reapplied = report.reapplied_diffs,
        "internal queue caught up with the applied blocks"
    );
    Ok(report)
}

/// The parsed data of a stored block; `None` for the zerostate (seqno 0 has no block data).
pub(crate) async fn load_block(
    storage: &Storage,
    id: &BlockId,
) -> Result<Option<Arc<ParsedBlock>>> {
    if id.seqno == 0 {
        return Ok(None);
    }
    let handle = storage
        .handles()
        .load_handle(id)?
        .ok_or_else(|| anyhow!("the last applied mc block {id} has no handle"))?;
    let block = storage
        .components()
        .load_block_data(&handle)
        .await
        .with_context(|| format!("loading the last applied mc block {id}"))?;
    Ok(Some(block))
}
