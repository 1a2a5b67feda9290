//! The newest state of every chain (the masterchain and each shard), kept in memory between checkpoints, and
//! the apply of a block's state update (state.md §7.2 step 2b).
//!
//! A state here is a tree of fresh cells (made by applying updates) over stored cells read lazily; nothing of
//! it is written until a checkpoint ([`crate::StateStore::write_states`]), after which [`ChainStates::reload`]
//! reads it back from the store so that memory holds only what later blocks touch.

use regolith_formats::{BlockId, ShardIdent};
use tycho_types::cell::Cell;
use tycho_types::merkle::MerkleUpdate;
use tycho_types::models::ShardStateUnsplit;

use crate::error::StateError;
use crate::store::StateStore;

/// One chain's newest state: its block and root.
#[derive(Clone)]
pub struct ChainState {
    /// The block whose state this is.
    pub id: BlockId,
    /// The root cell.
    pub root: Cell,
}

/// The newest states of the masterchain and of every shard.
#[derive(Clone)]
pub struct ChainStates {
    mc: ChainState,
    shards: Vec<ChainState>,
    /// Cells made by applies since the states were last stored.
    fresh_cells: u64,
}

impl ChainStates {
    /// The states stored for the mc block `mc` (a checkpoint): its state and the states of the top shard
    /// blocks its state lists.
    pub fn load(store: &StateStore, mc: &BlockId) -> Result<Self, StateError> {
        let root = store.load_state(mc)?.ok_or_else(|| {
            StateError::Inconsistent(format!("the state of mc block {mc} is not stored"))
        })?;
        let tops = top_shard_blocks(mc, &root).map_err(|e| store.take_read_error().unwrap_or(e))?;
        let mut shards = Vec::with_capacity(tops.len());
        for id in tops {
            let root = store.load_state(&id)?.ok_or_else(|| {
                StateError::Inconsistent(format!(
                    "the state of shard block {id}, a top shard block of mc block {mc}, is not stored"
                ))
            })?;
            shards.push(ChainState { id, root });
        }
        Ok(Self {
            mc: ChainState { id: *mc, root },
            shards,
            fresh_cells: 0,
        })
    }

    /// The masterchain's newest state.
    pub fn mc(&self) -> &ChainState {
        &self.mc
    }

    /// Each shard's newest state, in shard order.
    pub fn shards(&self) -> &[ChainState] {
        &self.shards
    }

    /// The newest state of the chain that holds the account `address`: the masterchain's for workchain -1,
    /// otherwise the shard whose range holds it (`None`: no such shard).
    pub fn chain_of(&self, address: &tycho_types::models::StdAddr) -> Option<&ChainState> {
        if address.workchain == -1 {
            return Some(&self.mc);
        }
        self.shards.iter().find(|s| {
            s.id.shard.workchain() == i32::from(address.workchain)
                && s.id.shard.contains_account(&address.address)
        })
    }

    /// Cells made by applies since the states were loaded or reloaded.
    pub fn fresh_cells(&self) -> u64 {
        self.fresh_cells
    }

    /// Applies the state update of block `id` (whose previous blocks are `prev`) to its chain's newest state:
    /// the update must start from that state's root, its result must have the update's new hash (both checked
    /// by the apply), and the new state must be of the block's shard and seqno.
    pub fn apply(
        &mut self,
        store: &StateStore,
        id: &BlockId,
        prev: &[BlockId],
        update: &MerkleUpdate,
    ) -> Result<(), StateError> {
        let [prev] = prev else {
            return Err(StateError::Unsupported {
                block: Box::new(*id),
                reason: "a shard merge is not supported".into(),
            });
        };
        let chain = if id.is_masterchain() {
            &mut self.mc
        } else {
            self.shards
                .iter_mut()
                .find(|s| s.id.shard == id.shard)
                .ok_or_else(|| StateError::Unsupported {
                    block: Box::new(*id),
                    reason: format!(
                        "shard {} has no state (it was made by a split, which is not supported)",
                        id.shard
                    ),
                })?
        };
        if chain.id != *prev {
            return Err(StateError::Inconsistent(format!(
                "block {id} follows {prev}, but the newest state of its chain is of block {}",
                chain.id
            )));
        }
        let root_hash = chain.root.repr_hash();
        if update.old_hash != *root_hash {
            return Err(StateError::invalid(
                id,
                format!(
                    "its state update starts from state {}, but the state of {prev} is {root_hash}",
                    update.old_hash
                ),
            ));
        }
        let applied = update.apply_with_stats(&chain.root).map_err(|e| {
            store.take_read_error().unwrap_or_else(|| {
                StateError::invalid(id, format!("its state update does not apply: {e}"))
            })
        })?;
        let state = applied.cell.parse::<ShardStateUnsplit>().map_err(|e| {
            store.take_read_error().unwrap_or_else(|| {
                StateError::invalid(id, format!("its new state does not parse: {e}"))
            })
        })?;
        if state.shard_ident != id.shard || state.seqno != id.seqno {
            return Err(StateError::invalid(
                id,
                format!(
                    "its new state is of shard {} seqno {}",
                    state.shard_ident, state.seqno
                ),
            ));
        }
        chain.id = *id;
        chain.root = applied.cell;
        self.fresh_cells += applied.stats.new_cells_count as u64;
        Ok(())
    }

    /// Reads every state back from the store (after they were stored): memory then holds only the roots,
    /// and the fresh-cell count starts again.
    pub fn reload(&mut self, store: &StateStore) -> Result<(), StateError> {
        for chain in std::iter::once(&mut self.mc).chain(self.shards.iter_mut()) {
            let stored = store.cells().state_root(&chain.id)?;
            if stored.as_ref() != Some(chain.root.repr_hash()) {
                return Err(StateError::Inconsistent(format!(
                    "the state of {} is not stored with root {}",
                    chain.id,
                    chain.root.repr_hash()
                )));
            }
            chain.root = store.load_cell(chain.root.repr_hash())?;
        }
        self.fresh_cells = 0;
        Ok(())
    }
}

/// The top shard blocks that the mc state `root` of block `mc` lists, in shard order.
pub fn top_shard_blocks(mc: &BlockId, root: &Cell) -> Result<Vec<BlockId>, StateError> {
    let bad = |what: &str, e: tycho_types::error::Error| {
        StateError::Inconsistent(format!("the state of mc block {mc}: {what}: {e}"))
    };
    let state = root
        .parse::<ShardStateUnsplit>()
        .map_err(|e| bad("the state", e))?;
    let extra = state
        .load_custom()
        .map_err(|e| bad("the mc extra", e))?
        .ok_or_else(|| {
            StateError::Inconsistent(format!("the state of mc block {mc} has no mc extra"))
        })?;
    let mut tops = Vec::new();
    for item in extra.shards.iter() {
        let (shard, descr): (ShardIdent, _) = item.map_err(|e| bad("the shard hashes", e))?;
        tops.push(BlockId {
            shard,
            seqno: descr.seqno,
            root_hash: descr.root_hash,
            file_hash: descr.file_hash,
        });
    }
    tops.sort_by_key(|id| (id.shard.workchain(), id.shard.prefix()));
    Ok(tops)
}
