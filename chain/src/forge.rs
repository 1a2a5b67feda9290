//! Forged chains for the node's tests: a generated chain in which one mc block carries a wrong state update
//! and still passes every per-block check.
//!
//! [`forge_mc_block`] gives mc block N the state update of mc block N - 1 (a valid `MerkleUpdate` cell, but
//! one that starts from the state before N - 1, not from N - 1's state), recomputes its id (root and file
//! hash) and re-signs its proof with the validators that signed the original. Its queue diff is kept as it
//! is: a diff names its block by shard and seqno only, and the block commits to it by `diff_hash`, which the
//! forged block keeps. [`forge_state_update`] rewrites the archives of a chain that `regolith chain generate`
//! wrote so that they end with such a block.

use std::path::{Path, PathBuf};

use tycho_types::boc::Boc;
use tycho_types::cell::CellBuilder;
use tycho_types::dict::Dict;
use tycho_types::models::{
    Block, BlockId, BlockProof, BlockSignature, BlockSignatures, PrevBlockRef,
};

use crate::archive::{read_archive, write_archive, write_file, ArchivedBlock};
use crate::error::{build_err, input_err, io_err, read_err, ChainError};
use crate::keys::ValidatorKeys;
use crate::manifest::load_validator_keys;

/// What [`forge_state_update`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForgedBlock {
    /// The forged mc block (its root and file hash differ from the original's).
    pub forged: BlockId,
    /// The mc block it was forged from.
    pub original: BlockId,
    /// The archive files written into `out_dir/archives`, in order; the last one ends with the forged block.
    pub archives: Vec<PathBuf>,
}

/// The archives of `chain_dir` (a chain `regolith chain generate` wrote: `archives/`, `validators.json`,
/// `zerostate.boc`) rewritten into `out_dir/archives` so that mc block `seqno` carries the state update of mc
/// block `seqno - 1` ([`forge_mc_block`]). The archives before the one holding mc block `seqno` are copied as
/// they are; that one is rewritten with its blocks up to the forged block's group (the same shard blocks as
/// the original's, then the forged block), and the archives after it are left out, since their blocks follow
/// the original block. `zerostate.boc` is copied into `out_dir` too.
///
/// `seqno` must be at least 2 (mc block 1 follows the zerostate, which has no update to take), and
/// `out_dir/archives` must not hold files yet. After an error `out_dir` may hold part of the output.
pub fn forge_state_update(
    chain_dir: &Path,
    seqno: u32,
    out_dir: &Path,
) -> Result<ForgedBlock, ChainError> {
    let forge_err = |reason: String| ChainError::Forge { seqno, reason };
    if seqno < 2 {
        return Err(forge_err(
            "the block before it must be an mc block with a state update (seqno 2 at least)".into(),
        ));
    }
    let keys = load_validator_keys(chain_dir)?;
    let archives = list_archives(&chain_dir.join("archives"))?;
    let out_archives = out_dir.join("archives");
    if out_archives.exists() {
        let mut entries = std::fs::read_dir(&out_archives).map_err(read_err(&out_archives))?;
        if entries.next().is_some() {
            return Err(forge_err(format!(
                "{} already holds files",
                out_archives.display()
            )));
        }
    }
    std::fs::create_dir_all(&out_archives).map_err(io_err(&out_archives))?;
    let zerostate = chain_dir.join("zerostate.boc");
    let zerostate = std::fs::read(&zerostate).map_err(read_err(&zerostate))?;
    write_file(&out_dir.join("zerostate.boc"), &zerostate, None)?;

    let mut written = Vec::new();
    let mut prev: Option<ArchivedBlock> = None;
    for (i, (first, path)) in archives.iter().enumerate() {
        if *first > seqno {
            break;
        }
        let target = out_archives.join(format!("{first:010}.archive"));
        // An archive holds the mc blocks from its id up to the next archive's: only the ones that hold mc
        // block `seqno - 1` or `seqno` are read.
        let next = archives.get(i + 1).map(|(next, _)| *next);
        let holds = |s: u32| s >= *first && next.is_none_or(|next| s < next);
        if !holds(seqno - 1) && !holds(seqno) {
            std::fs::copy(path, &target).map_err(io_err(&target))?;
            written.push(target);
            continue;
        }
        let blocks = read_archive(path)?;
        let is_mc = |b: &&ArchivedBlock, s: u32| b.id.is_masterchain() && b.id.seqno == s;
        let at = blocks.iter().position(|b| is_mc(&b, seqno));
        let before = &blocks[..at.unwrap_or(blocks.len())];
        if let Some(found) = before.iter().rev().find(|b| is_mc(b, seqno - 1)) {
            prev = Some(found.clone());
        }
        let Some(at) = at else {
            std::fs::copy(path, &target).map_err(io_err(&target))?;
            written.push(target);
            continue;
        };
        let prev = prev.ok_or_else(|| {
            forge_err(format!(
                "mc block {} is not in the archives before it",
                seqno - 1
            ))
        })?;
        let original = &blocks[at];
        let forged = forge_mc_block(original, &prev, &keys)?;
        let mut kept = blocks[..at].to_vec();
        kept.push(forged.clone());
        write_archive(&target, &kept)?;
        written.push(target);
        return Ok(ForgedBlock {
            forged: forged.id,
            original: original.id,
            archives: written,
        });
    }
    Err(forge_err(format!(
        "it is not in the archives of {}",
        chain_dir.display()
    )))
}

/// The archive files of `dir` (`{id:010}.archive`, the id being the seqno of the archive's first mc block),
/// by id.
fn list_archives(dir: &Path) -> Result<Vec<(u32, PathBuf)>, ChainError> {
    let mut archives = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(read_err(dir))? {
        let path = entry.map_err(read_err(dir))?.path();
        if path.extension().is_none_or(|ext| ext != "archive") {
            continue;
        }
        let id = path
            .file_stem()
            .and_then(|stem| stem.to_str())
            .and_then(|stem| stem.parse::<u32>().ok())
            .ok_or_else(|| input_err(&path, "an archive file name is its id: {id:010}.archive"))?;
        archives.push((id, path));
    }
    archives.sort();
    Ok(archives)
}

/// Mc block `block` with the state update of `prev`, the mc block it follows, instead of its own: a valid
/// `MerkleUpdate` whose old hash is the state before `prev`, not `prev`'s state. Its id is recomputed, its
/// proof rebuilt and signed by the same validators as the original's (`keys` must hold their keys: the sets
/// of `validators.json`, or [`crate::Generator::sets`]), with the same signature header (validator info,
/// consensus info, count and weight). Its queue diff is the original's.
pub fn forge_mc_block(
    block: &ArchivedBlock,
    prev: &ArchivedBlock,
    keys: &[ValidatorKeys],
) -> Result<ArchivedBlock, ChainError> {
    let seqno = block.id.seqno;
    let forge_err = |reason: String| ChainError::Forge { seqno, reason };
    if !block.id.is_masterchain() {
        return Err(forge_err(format!("{} is not an mc block", block.id)));
    }
    if !prev.id.is_masterchain() || prev.id.seqno.checked_add(1) != Some(seqno) {
        return Err(forge_err(format!(
            "{} is not the mc block before it",
            prev.id
        )));
    }
    let parse = |archived: &ArchivedBlock| {
        let root = Boc::decode(&archived.data)
            .map_err(|e| forge_err(format!("block {}: {e}", archived.id)))?;
        if *root.repr_hash() != archived.id.root_hash {
            return Err(forge_err(format!(
                "block {}: its data has root hash {}",
                archived.id,
                root.repr_hash()
            )));
        }
        let parsed = root
            .parse::<Block>()
            .map_err(|e| forge_err(format!("block {}: {e}", archived.id)))?;
        Ok((root, parsed))
    };
    let (_, original) = parse(block)?;
    let (_, before) = parse(prev)?;

    let info = original
        .load_info()
        .map_err(|e| forge_err(format!("its block info: {e}")))?;
    let follows = match info
        .load_prev_ref()
        .map_err(|e| forge_err(format!("its prev ref: {e}")))?
    {
        PrevBlockRef::Single(r) => {
            r.root_hash == prev.id.root_hash && r.file_hash == prev.id.file_hash
        }
        PrevBlockRef::AfterMerge { .. } => false,
    };
    if !follows {
        return Err(forge_err(format!("it does not follow {}", prev.id)));
    }
    let own = original
        .load_state_update()
        .map_err(|e| forge_err(format!("its state update: {e}")))?;
    let taken = before
        .load_state_update()
        .map_err(|e| forge_err(format!("the state update of {}: {e}", prev.id)))?;
    // The block's update starts from `prev`'s state; the one it takes starts from the state before.
    if taken.new_hash != own.old_hash || taken.old_hash == own.old_hash {
        return Err(forge_err(format!(
            "the state updates of {} ({} -> {}) and of the block ({} -> {}) do not chain",
            prev.id, taken.old_hash, taken.new_hash, own.old_hash, own.new_hash
        )));
    }
    // Only the update may change: the block must encode back to its own root.
    let again = CellBuilder::build_from(&original).map_err(build_err(format!("{}", block.id)))?;
    if *again.repr_hash() != block.id.root_hash {
        return Err(forge_err(
            "the block does not encode back to its own root hash".into(),
        ));
    }

    let forged = Block {
        state_update: before.state_update.clone(),
        ..original
    };
    let root = CellBuilder::build_from(&forged).map_err(build_err("the forged block"))?;
    let data = Boc::encode(&root);
    let id = BlockId {
        shard: block.id.shard,
        seqno,
        root_hash: *root.repr_hash(),
        file_hash: regolith_formats::file_hash(&data),
    };

    let proof = Boc::decode(&block.proof)
        .map_err(|e| forge_err(format!("its proof: {e}")))?
        .parse::<BlockProof>()
        .map_err(|e| forge_err(format!("its proof: {e}")))?;
    if proof.proof_for != block.id {
        return Err(forge_err(format!(
            "its proof is the proof of {}",
            proof.proof_for
        )));
    }
    let signatures = proof
        .signatures
        .as_ref()
        .ok_or_else(|| forge_err("its proof carries no signatures".into()))?;
    let signatures = resign(signatures, &id, keys)?;
    let proof = crate::proof::build_proof(&id, &root, Some(signatures))?;
    Ok(ArchivedBlock {
        id,
        data,
        proof,
        queue_diff: block.queue_diff.clone(),
    })
}

/// `signatures` with each signature replaced by its validator's (the same short node id, under the same
/// validator index) signature of `id`; the rest (validator info, consensus info, count, weight) is kept.
/// Every signer's key must be in `keys`.
pub fn resign(
    signatures: &BlockSignatures,
    id: &BlockId,
    keys: &[ValidatorKeys],
) -> Result<BlockSignatures, ChainError> {
    let forge_err = |reason: String| ChainError::Forge {
        seqno: id.seqno,
        reason,
    };
    let data = Block::build_data_for_sign(id);
    let mut signed = Dict::<u16, BlockSignature>::new();
    for item in signatures.signatures.iter() {
        let (index, signature) =
            item.map_err(|e| forge_err(format!("a signature of its proof: {e}")))?;
        let resigned = keys
            .iter()
            .find_map(|set| set.sign_as(&signature.node_id_short, &data))
            .ok_or_else(|| {
                forge_err(format!(
                    "validator {index} (node {}) that signed it has no key in the validator sets",
                    signature.node_id_short
                ))
            })?;
        signed
            .set(
                index,
                BlockSignature {
                    node_id_short: signature.node_id_short,
                    signature: resigned,
                },
            )
            .map_err(build_err("block signatures"))?;
    }
    Ok(BlockSignatures {
        signatures: signed,
        ..signatures.clone()
    })
}
