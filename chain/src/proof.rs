//! Block proofs: a Merkle proof of the block that keeps what a node reads from a proof (the block info and
//! its references, the value flow, the state update, the extra with its message dictionaries' roots, and for
//! masterchain blocks the whole shard hashes and, in key blocks, the whole config), with the validators'
//! signatures for masterchain blocks and none (a proof link) for shard blocks.

use std::collections::HashSet;

use tycho_types::boc::Boc;
use tycho_types::cell::{Cell, CellBuilder, DynCell, UsageTree, UsageTreeMode};
use tycho_types::merkle::MerkleProof;
use tycho_types::models::{Block, BlockId, BlockProof, BlockSignatures};

use crate::error::{build_err, ChainError};

/// Builds the proof BOC of block `id` with root `root`.
pub fn build_proof(
    id: &BlockId,
    root: &Cell,
    signatures: Option<BlockSignatures>,
) -> Result<Vec<u8>, ChainError> {
    let what = || format!("the proof of {id}");
    let usage_tree = UsageTree::new(UsageTreeMode::OnLoad);
    let tracked = usage_tree.track(root);
    let block = tracked.parse::<Block>().map_err(build_err(what()))?;
    let info = block.load_info().map_err(build_err(what()))?;
    info.load_prev_ref().map_err(build_err(what()))?;
    info.load_master_ref().map_err(build_err(what()))?;
    block.load_value_flow().map_err(build_err(what()))?;
    block.load_state_update().map_err(build_err(what()))?;
    let extra = block.load_extra().map_err(build_err(what()))?;
    extra.in_msg_description.load().map_err(build_err(what()))?;
    extra
        .out_msg_description
        .load()
        .map_err(build_err(what()))?;
    extra.account_blocks.load().map_err(build_err(what()))?;
    if let Some(custom) = extra.load_custom().map_err(build_err(what()))? {
        if let Some(shards) = custom.shards.as_dict().root() {
            visit_all(shards.as_ref());
        }
        if let Some(config) = &custom.config {
            if let Some(params) = config.params.as_dict().root() {
                visit_all(params.as_ref());
            }
        }
    }
    let merkle = MerkleProof::create(root.as_ref(), usage_tree)
        .build()
        .map_err(build_err(what()))?;
    let proof = BlockProof {
        proof_for: *id,
        root: CellBuilder::build_from(&merkle).map_err(build_err(what()))?,
        signatures,
    };
    let cell = CellBuilder::build_from(&proof).map_err(build_err(what()))?;
    Ok(Boc::encode(&cell))
}

/// Loads every cell below `cell` through the usage tree that tracks it.
fn visit_all(cell: &DynCell) {
    let mut seen = HashSet::new();
    let mut stack = vec![cell];
    while let Some(cell) = stack.pop() {
        if !seen.insert(*cell.repr_hash()) {
            continue;
        }
        let _ = cell.data();
        stack.extend(cell.references());
    }
}
