//! Checks of a block that came from a peer, before anything of it is written: the file hash and root hash
//! match the id, the proof is a proof of this block, and the queue diff belongs to it and hashes to the
//! block's `out_msg_queue_updates.diff_hash`.

use anyhow::{bail, Context, Result};
use regolith_formats::queue_diff::{queue_diff_hash, QueueDiff};
use regolith_formats::BlockId;
use regolith_rpc::client::BlockDataFull;
use regolith_storage::ParsedBlock;

/// A downloaded block that passed the checks.
pub struct CheckedDownload {
    /// The parsed block.
    pub parsed: ParsedBlock,
}

/// Checks a downloaded block; `expected` is the id asked for (none for a next-block download).
pub fn check_downloaded_block(
    expected: Option<&BlockId>,
    data: &BlockDataFull,
) -> Result<CheckedDownload> {
    let id = data.block_id;
    if let Some(expected) = expected {
        if *expected != id {
            bail!("asked for block {expected}, got {id}");
        }
    }
    let file_hash = regolith_storage::parsed::file_hash(&data.block);
    if file_hash != id.file_hash {
        bail!("block {id}: the file hash of the BOC is {file_hash}");
    }
    let parsed = ParsedBlock::parse(&id, &data.block).with_context(|| format!("block {id}"))?;
    let proof = regolith_storage::parsed::parse_proof(&id, &data.proof)
        .with_context(|| format!("the proof of block {id}"))?;
    if proof.proof_for != id {
        bail!("the proof is for block {}, not {id}", proof.proof_for);
    }
    let merkle = proof
        .root
        .parse_exotic::<tycho_types::merkle::MerkleProof>()
        .with_context(|| format!("the proof of block {id} is not a Merkle proof"))?;
    if merkle.hash != id.root_hash {
        bail!(
            "the proof of block {id} proves root {}, not the block's",
            merkle.hash
        );
    }
    QueueDiff::parse_for_block(&data.queue_diff, &id)
        .with_context(|| format!("the queue diff of block {id}"))?;
    let expected_hash = parsed.block.out_msg_queue_updates.diff_hash;
    let diff_hash = queue_diff_hash(&data.queue_diff);
    if diff_hash != expected_hash {
        bail!(
            "block {id}: the queue diff hashes to {diff_hash}, the block declares {expected_hash}"
        );
    }
    Ok(CheckedDownload { parsed })
}
