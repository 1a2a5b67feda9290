//! A group: one mc block and the shard blocks it brings, and the rules a group must meet before anything of
//! it is stored: the mc block follows the last applied one, every shard block between its top shard blocks
//! and the applied ones is in the group, and every queue diff continues the one before it.

use std::collections::{HashMap, HashSet};

use anyhow::{anyhow, Context, Result};
use regolith_formats::{BlockId, CheckedBlock, HashBytes, ShardIdent};
use regolith_storage::Storage;

use super::ApplyError;

/// One mc block and the shard blocks it brings, each checked once.
pub struct Group {
    /// The mc block.
    pub(crate) mc: CheckedBlock,
    /// Its shard blocks in apply order (seqno, then shard).
    pub(crate) shards: Vec<CheckedBlock>,
}

impl Group {
    /// A group; the shard blocks are put in apply order.
    pub fn new(mc: CheckedBlock, mut shards: Vec<CheckedBlock>) -> Self {
        shards.sort_by_key(|b| {
            let id = b.id();
            (id.seqno, id.shard.workchain(), id.shard.prefix())
        });
        Self { mc, shards }
    }

    /// The mc block's id.
    pub fn mc_id(&self) -> &BlockId {
        self.mc.id()
    }

    /// Blocks in the group (never zero: the mc block is one).
    pub fn block_count(&self) -> usize {
        self.shards.len() + 1
    }

    /// The mc block is the one after `last` (seqno and prev id).
    pub(crate) fn check_link(&self, last: &BlockId, origin: &str) -> Result<(), ApplyError> {
        let id = self.mc.id();
        if id.seqno != last.seqno + 1 {
            return Err(ApplyError::Invalid(anyhow!(
                "{origin}: the blocks continue at mc block {}, but the last applied mc block is {}; \
                 import archives in order",
                id.seqno,
                last.seqno
            )));
        }
        if self.mc.prev_ids().first() != Some(last) {
            return Err(ApplyError::Invalid(anyhow!(
                "{origin}: mc block {id}: its previous block is not the last applied mc block {last}"
            )));
        }
        Ok(())
    }

    /// Every shard block from the mc block's top shard blocks back to the applied ones is in the group, and
    /// every shard block of the group is reached that way.
    pub(crate) fn check_complete(
        &self,
        storage: &Storage,
        last_applied: u32,
        origin: &str,
    ) -> Result<(), ApplyError> {
        let in_group: HashMap<BlockId, &CheckedBlock> =
            self.shards.iter().map(|b| (*b.id(), b)).collect();
        let mut reached = HashSet::new();
        let mut pending: Vec<BlockId> = self.mc.top_shard_blocks().iter().map(|t| t.id).collect();
        while let Some(id) = pending.pop() {
            if id.seqno == 0 || !reached.insert(id) {
                continue;
            }
            if let Some(block) = in_group.get(&id) {
                pending.extend(block.prev_ids().iter().copied());
                continue;
            }
            if !is_applied(storage, &id, last_applied).map_err(ApplyError::Local)? {
                return Err(ApplyError::Invalid(anyhow!(
                    "{origin}: mc block {} needs shard block {id}, which is neither applied nor in the \
                     group; nothing of mc block {} is stored",
                    self.mc.id().seqno,
                    self.mc.id().seqno
                )));
            }
        }
        if let Some(extra) = self.shards.iter().find(|b| !reached.contains(b.id())) {
            return Err(ApplyError::Invalid(anyhow!(
                "{origin}: shard block {} is not reached from the top shard blocks of mc block {}",
                extra.id(),
                self.mc.id().seqno
            )));
        }
        Ok(())
    }

    /// The blocks in apply order: the shard blocks, then the mc block.
    pub(crate) fn in_order(&self) -> impl Iterator<Item = &CheckedBlock> + '_ {
        self.shards.iter().chain(std::iter::once(&self.mc))
    }
}

/// Whether `id` is applied: the zerostate (seqno 0), or a stored block with all its parts whose mc block
/// (the one it was stored for) is applied. A block stored for an mc block whose group did not finish (a
/// crash between the two) is not: its group takes it again.
pub fn is_applied(storage: &Storage, id: &BlockId, last_applied: u32) -> Result<bool> {
    if id.seqno == 0 {
        return Ok(true);
    }
    let Some(handle) = storage.handles().load_handle(id)? else {
        return Ok(false);
    };
    Ok(handle.has_data()
        && handle.has_proof()
        && handle.has_queue_diff()
        && handle.ref_by_mc_seqno() <= last_applied)
}

/// The hash of the last queue diff of each shard: what the next diff of that shard must name as its
/// previous one. Filled from the stored blocks, then from each block applied.
#[derive(Default)]
pub(crate) struct DiffChain {
    last: HashMap<ShardIdent, (BlockId, HashBytes)>,
}

impl DiffChain {
    /// Checks that every diff of `group` names the diff of its block's previous block (same shard, one
    /// previous block; the first block after a zerostate names the zero hash). Splits and merges are left to
    /// the queue's own sequence check.
    pub(crate) async fn check(
        &mut self,
        storage: &Storage,
        group: &Group,
        origin: &str,
    ) -> Result<(), ApplyError> {
        let mut pending: HashMap<ShardIdent, (BlockId, HashBytes)> = HashMap::new();
        for block in group.in_order() {
            let id = block.id();
            let [prev] = block.prev_ids() else {
                pending.insert(id.shard, (*id, *block.queue_diff_hash()));
                continue;
            };
            if prev.shard != id.shard {
                pending.insert(id.shard, (*id, *block.queue_diff_hash()));
                continue;
            }
            let expected = match pending.get(&id.shard).or_else(|| self.last.get(&id.shard)) {
                Some((known, hash)) if known == prev => Some(*hash),
                _ => self.stored_diff_hash(storage, prev).await?,
            };
            let actual = block.queue_diff().prev_hash;
            if let Some(expected) = expected {
                if actual != expected {
                    return Err(ApplyError::Invalid(anyhow!(
                        "{origin}: block {id}: its queue diff continues a diff with hash {actual}, but \
                         the diff of its previous block {prev} has hash {expected}"
                    )));
                }
            }
            pending.insert(id.shard, (*id, *block.queue_diff_hash()));
        }
        Ok(())
    }

    /// Records the diffs of an applied group.
    pub(crate) fn applied(&mut self, group: &Group) {
        for block in group.in_order() {
            self.last
                .insert(block.id().shard, (*block.id(), *block.queue_diff_hash()));
        }
    }

    /// The hash of the stored diff of `id` (zero for a zerostate); `None` when it is not stored (a block
    /// removed by GC: nothing to compare with).
    async fn stored_diff_hash(
        &self,
        storage: &Storage,
        id: &BlockId,
    ) -> Result<Option<HashBytes>, ApplyError> {
        if id.seqno == 0 {
            return Ok(Some(HashBytes::ZERO));
        }
        let handle = storage
            .handles()
            .load_handle(id)
            .map_err(|e| ApplyError::Local(e.into()))?;
        let Some(handle) = handle.filter(regolith_storage::BlockHandle::has_queue_diff) else {
            return Ok(None);
        };
        let raw = storage
            .components()
            .load_queue_diff_raw(&handle)
            .await
            .with_context(|| format!("loading the stored queue diff of {id}"))
            .map_err(ApplyError::Local)?;
        Ok(Some(regolith_formats::queue_diff::queue_diff_hash(&raw)))
    }
}
