//! States GC (state.md §7.5): after a checkpoint, every stored state that nobody needs goes, one batch per
//! state. Kept: the zerostates (seqno 0); the newest `keep_checkpoints` checkpoints (their mc states, and every
//! shard state from the oldest kept checkpoint's top shard blocks on); states whose block has an open
//! SKIP_STATES_GC pair (a persistent save); roots a reader pinned. A kill between two batches only leaves
//! states for the next run.

use std::collections::HashMap;

use regolith_formats::{BlockId, ShardIdent};
use regolith_storage::Storage;

use crate::chain_states::top_shard_blocks;
use crate::error::StateError;
use crate::store::StateStore;

/// What one states-GC run did.
#[derive(Debug, Default, Clone, Copy)]
pub struct StatesGcStats {
    /// States removed.
    pub removed_states: usize,
    /// States kept.
    pub kept_states: usize,
    /// Cells deleted.
    pub deleted_cells: u64,
}

/// Removes the states that are not kept (see the module doc); `keep_checkpoints` is at least 1.
/// `after_each` runs after each state's batch (the node's crash point between them).
pub fn collect(
    store: &StateStore,
    storage: &Storage,
    keep_checkpoints: usize,
    mut after_each: impl FnMut(),
) -> Result<StatesGcStats, StateError> {
    let roots = store.cells().state_roots()?;
    let mut mc: Vec<&BlockId> = roots
        .iter()
        .map(|(id, _)| id)
        .filter(|id| id.is_masterchain() && id.seqno > 0)
        .collect();
    mc.sort_by_key(|id| id.seqno);
    let kept_mc: Vec<&BlockId> = mc
        .iter()
        .rev()
        .take(keep_checkpoints.max(1))
        .copied()
        .collect();
    // Per shard, the lowest top seqno among the kept checkpoints: every shard state from there on stays.
    let mut shard_floor: HashMap<ShardIdent, u32> = HashMap::new();
    for id in &kept_mc {
        let Some(root) = store.load_state(id)? else {
            continue;
        };
        let tops = top_shard_blocks(id, &root).map_err(|e| store.take_read_error().unwrap_or(e))?;
        for top in tops {
            let floor = shard_floor.entry(top.shard).or_insert(top.seqno);
            *floor = (*floor).min(top.seqno);
        }
    }
    let mut stats = StatesGcStats::default();
    for (id, _) in &roots {
        let kept = id.seqno == 0
            || if id.is_masterchain() {
                kept_mc.contains(&id)
            } else {
                // A shard without a floor (no kept checkpoint lists it) keeps everything.
                shard_floor
                    .get(&id.shard)
                    .is_none_or(|floor| id.seqno >= *floor)
            }
            || held_for_persistent(storage, id)?;
        if kept {
            stats.kept_states += 1;
            continue;
        }
        // A state whose root a reader pinned is skipped by the removal itself.
        if let Some(removed) = store.remove_state(id)? {
            stats.removed_states += 1;
            stats.deleted_cells += removed.deleted_cells;
            metrics::counter!("regolith_states_gc_removed_total").increment(1);
            metrics::counter!("regolith_states_gc_cells_deleted_total")
                .increment(removed.deleted_cells);
            after_each();
        } else {
            stats.kept_states += 1;
        }
    }
    Ok(stats)
}

/// Whether the block's SKIP_STATES_GC pair is open (a persistent save holds its state).
fn held_for_persistent(storage: &Storage, id: &BlockId) -> Result<bool, StateError> {
    Ok(storage
        .handles()
        .load_handle(id)?
        .is_some_and(|h| h.flags().skip_states_gc()))
}
