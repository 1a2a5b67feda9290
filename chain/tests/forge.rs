//! A forged chain (`regolith_chain::forge`): its last mc block carries the state update of the mc block
//! before it, passes every per-block check of the apply path (its data, its re-signed proof, its queue diff)
//! and fails only the state transition; the archives before it are the original ones.

use std::collections::HashMap;
use std::path::Path;

use bytes::Bytes;
use regolith_chain::archive::{read_archive, ArchivedBlock};
use regolith_chain::forge::{forge_mc_block, forge_state_update, ForgedBlock};
use regolith_chain::manifest::load_validator_keys;
use regolith_chain::{generate, ChainError, ChainOptions, ChainShape, Generator};
use regolith_formats::{
    BlockId, CheckedBlock, ParsedProof, ProofChecker, ProofErrorKind, Proven, ProvenBy, ShardIdent,
    ZerostateConfig,
};
use regolith_test_support::fixture_bytes;
use tycho_types::boc::Boc;
use tycho_types::cell::{Cell, HashBytes};
use tycho_types::merkle::MerkleUpdate;
use tycho_types::models::{Block, BlockProof};

/// 10 mc blocks; key blocks 3, 6, 9, each installing a new validator set; archives 1..=3, 4..=6, 7..=9, 10.
fn options() -> ChainOptions {
    ChainOptions {
        mc_blocks: 10,
        mc_blocks_per_archive: 4,
        shape: ChainShape {
            seed: 5,
            shards: 2,
            messages: 3,
            message_bytes: 64,
            key_block_every: 3,
            validators: 4,
            rotate_every: 1,
            persistent_every: 2,
            ..ChainShape::default()
        },
    }
}

fn generated(dir: &Path) -> std::path::PathBuf {
    let chain = dir.join("chain");
    generate(&options(), &fixture_bytes("zerostate.boc"), &chain).unwrap();
    chain
}

/// Every archive file of `dir/archives`, by name, with its blocks.
fn archives(dir: &Path) -> Vec<(String, Vec<ArchivedBlock>)> {
    let mut files: Vec<_> = std::fs::read_dir(dir.join("archives"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let name = path.file_name().unwrap().to_str().unwrap().to_string();
            (name, read_archive(&path).unwrap())
        })
        .collect()
}

fn all_blocks(dir: &Path) -> Vec<ArchivedBlock> {
    archives(dir).into_iter().flat_map(|(_, b)| b).collect()
}

fn mc(blocks: &[ArchivedBlock], seqno: u32) -> &ArchivedBlock {
    blocks
        .iter()
        .find(|b| b.id.is_masterchain() && b.id.seqno == seqno)
        .unwrap()
}

fn state_update(block: &ArchivedBlock) -> MerkleUpdate {
    Boc::decode(&block.data)
        .unwrap()
        .parse::<Block>()
        .unwrap()
        .load_state_update()
        .unwrap()
}

fn check(block: &ArchivedBlock) -> CheckedBlock {
    CheckedBlock::check(
        &block.id,
        Bytes::from(block.data.clone()),
        Bytes::from(block.proof.clone()),
        Bytes::from(block.queue_diff.clone()),
    )
    .unwrap()
}

/// The signers of an mc block's proof: (validator index, short node id).
fn signers(proof: &[u8]) -> Vec<(u16, HashBytes)> {
    let proof = Boc::decode(proof).unwrap().parse::<BlockProof>().unwrap();
    proof
        .signatures
        .unwrap()
        .signatures
        .iter()
        .map(|item| {
            let (index, signature) = item.unwrap();
            (index, signature.node_id_short)
        })
        .collect()
}

/// Verifies the proofs of `blocks` in order (key block proofs collected on the way); the verdict of each mc
/// block by seqno.
fn verify_all(chain: &Path, blocks: &[ArchivedBlock]) -> HashMap<u32, ProvenBy> {
    let zerostate = std::fs::read(chain.join("zerostate.boc")).unwrap();
    let checker = ProofChecker::new(ZerostateConfig::from_boc(&zerostate).unwrap());
    let mut key_proofs: HashMap<u32, ParsedProof> = HashMap::new();
    let mut verdicts = HashMap::new();
    for block in blocks {
        let checked = check(block);
        match checker.verify(checked.proof(), &key_proofs).unwrap() {
            Proven::Signed(by) => {
                verdicts.insert(block.id.seqno, by);
                if checked.is_key_block() {
                    key_proofs.insert(block.id.seqno, checked.proof().clone());
                }
            }
            Proven::Link => assert!(!block.id.is_masterchain()),
        }
    }
    verdicts
}

#[test]
fn a_forged_block_is_signed_as_the_original_and_carries_the_update_of_the_block_before() {
    let dir = tempfile::tempdir().unwrap();
    let chain = generated(dir.path());
    let out = dir.path().join("forged");
    let forged = forge_state_update(&chain, 5, &out).unwrap();

    let original = all_blocks(&chain);
    let rewritten = all_blocks(&out);
    let block = rewritten.last().unwrap();
    let (orig5, orig4) = (mc(&original, 5), mc(&original, 4));
    assert_eq!(forged.original, orig5.id);
    assert_eq!(block.id, forged.forged);
    assert_eq!(
        (block.id.shard, block.id.seqno),
        (ShardIdent::MASTERCHAIN, 5)
    );
    assert_ne!(block.id.root_hash, orig5.id.root_hash);
    assert_ne!(block.id.file_hash, orig5.id.file_hash);
    assert_eq!(block.queue_diff, orig5.queue_diff, "the diff is kept");

    // The original's update starts from mc block 4's state; the forged one's is mc block 4's own update,
    // which starts from mc block 3's.
    let prev_state = state_update(orig4).new_hash;
    assert_eq!(state_update(orig5).old_hash, prev_state);
    let update = state_update(block);
    assert_ne!(update.old_hash, prev_state);
    assert_eq!(update.old_hash, state_update(orig4).old_hash);
    assert_eq!(update.new_hash, prev_state);
    assert_eq!(check(block).id(), &forged.forged);

    // Both proofs verify, signed by the same validators of the set key block 3 installed.
    let original_verdicts = verify_all(&chain, &original);
    let forged_verdicts = verify_all(&out, &rewritten);
    let by = forged_verdicts[&5];
    assert_eq!(by, original_verdicts[&5]);
    assert_eq!(by.key_block_seqno, 3);
    assert_eq!(by.signed_weight, by.total_weight);
    assert_eq!(signers(&block.proof), signers(&orig5.proof));
    assert_eq!(signers(&block.proof).len(), 4);

    // The original signatures do not sign the forged id: the proof had to be re-signed.
    let zerostate = std::fs::read(chain.join("zerostate.boc")).unwrap();
    let checker = ProofChecker::new(ZerostateConfig::from_boc(&zerostate).unwrap());
    let key3 = check(mc(&original, 3)).proof().clone();
    let key_proofs: HashMap<u32, ParsedProof> = HashMap::from([(3, key3)]);
    let original_signatures = Boc::decode(&orig5.proof)
        .unwrap()
        .parse::<BlockProof>()
        .unwrap()
        .signatures;
    let root = Boc::decode(&block.data).unwrap();
    let unsigned =
        regolith_chain::proof::build_proof(&block.id, &root, original_signatures).unwrap();
    let err = checker
        .verify_raw(&block.id, &unsigned, &key_proofs)
        .unwrap_err();
    assert!(
        matches!(err.kind(), ProofErrorKind::BadSignature { .. }),
        "{err}"
    );
    checker
        .verify_raw(&block.id, &block.proof, &key_proofs)
        .unwrap();
}

#[test]
fn the_archives_before_the_forged_block_are_the_original_ones() {
    let dir = tempfile::tempdir().unwrap();
    let chain = generated(dir.path());
    let original = archives(&chain);
    let names: Vec<&str> = original.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "0000000001.archive",
            "0000000004.archive",
            "0000000007.archive",
            "0000000010.archive"
        ]
    );
    // 4 opens its archive (mc block 3 is in the one before), 5 is inside one, 8 is inside the third.
    for (seqno, forged_archive) in [(4u32, 1usize), (5, 1), (8, 2)] {
        let out = dir.path().join(format!("forged-{seqno}"));
        let ForgedBlock {
            forged,
            archives: written,
            ..
        } = forge_state_update(&chain, seqno, &out).unwrap();
        let rewritten = archives(&out);
        assert_eq!(rewritten.len(), forged_archive + 1, "mc block {seqno}");
        assert_eq!(written.len(), rewritten.len());
        assert_eq!(
            std::fs::read(out.join("zerostate.boc")).unwrap(),
            std::fs::read(chain.join("zerostate.boc")).unwrap()
        );
        for (at, (name, blocks)) in rewritten.iter().enumerate() {
            assert_eq!(name, &original[at].0);
            assert_eq!(written[at], out.join("archives").join(name));
            if at < forged_archive {
                assert!(blocks == &original[at].1, "{name}: other blocks");
                assert_eq!(
                    std::fs::read(&written[at]).unwrap(),
                    std::fs::read(chain.join("archives").join(name)).unwrap(),
                    "{name}: other bytes"
                );
                continue;
            }
            // The last one: the original's blocks up to the forged block's group, then the forged block.
            let orig = &original[at].1;
            let end = orig
                .iter()
                .position(|b| b.id.is_masterchain() && b.id.seqno == seqno)
                .unwrap();
            assert_eq!(blocks.len(), end + 1, "{name}");
            assert!(blocks[..end] == orig[..end], "{name}: other blocks");
            assert_eq!(blocks[end].id, forged);
            // The group's shard blocks are the ones the forged block lists (one new top block per shard).
            let group_start = orig[..end]
                .iter()
                .rposition(|b| b.id.is_masterchain())
                .map_or(0, |p| p + 1);
            let group: Vec<BlockId> = blocks[group_start..end].iter().map(|b| b.id).collect();
            let tops: Vec<BlockId> = check(&blocks[end])
                .top_shard_blocks()
                .iter()
                .map(|t| t.id)
                .collect();
            assert_eq!(group.len(), 2);
            assert_eq!(group, tops, "mc block {seqno}");
        }
    }
}

#[test]
fn every_per_block_check_passes_and_only_the_state_transition_fails() {
    let dir = tempfile::tempdir().unwrap();
    let chain = generated(dir.path());
    let out = dir.path().join("forged");
    let forged = forge_state_update(&chain, 5, &out).unwrap();
    let blocks = all_blocks(&out);

    // The genesis states of every chain, then each block's update applied to its chain's newest state.
    let generator = Generator::new(options(), &fixture_bytes("zerostate.boc")).unwrap();
    let mut states: HashMap<ShardIdent, (BlockId, Cell)> = HashMap::new();
    states.insert(
        ShardIdent::MASTERCHAIN,
        (generator.genesis.mc.id, generator.genesis.mc.root.clone()),
    );
    for z in &generator.genesis.shards {
        states.insert(z.id.shard, (z.id, z.root.clone()));
    }
    let verdicts = verify_all(&out, &blocks);
    assert_eq!(verdicts.len(), 5, "mc blocks 1..=5 are proven");
    // Each diff continues its shard's last one, as the node checks.
    let mut last_diff: HashMap<ShardIdent, HashBytes> = HashMap::new();
    let mut refused = Vec::new();
    for block in &blocks {
        let checked = check(block);
        let diff = checked.queue_diff();
        let expected = last_diff.get(&block.id.shard).copied().unwrap_or_default();
        assert_eq!(diff.prev_hash, expected, "{}", block.id);
        last_diff.insert(block.id.shard, *checked.queue_diff_hash());

        let (prev_id, prev_root) = states.get(&block.id.shard).unwrap().clone();
        assert_eq!(checked.prev_ids(), &[prev_id], "{}", block.id);
        let update = checked.parsed().block.load_state_update().unwrap();
        if update.old_hash != *prev_root.repr_hash() {
            assert!(update.apply(&prev_root).is_err());
            refused.push(block.id);
            continue;
        }
        let next = update.apply(&prev_root).unwrap();
        states.insert(block.id.shard, (block.id, next));
    }
    assert_eq!(
        refused,
        vec![forged.forged],
        "only the forged block is refused"
    );
    assert_eq!(blocks.last().unwrap().id, forged.forged);
}

#[test]
fn a_request_that_cannot_be_forged_is_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let chain = generated(dir.path());
    let forge_err = |result: Result<ForgedBlock, ChainError>, seqno: u32, says: &str| match result {
        Err(ChainError::Forge { seqno: s, reason }) => {
            assert_eq!(s, seqno);
            assert!(reason.contains(says), "{reason}");
        }
        other => panic!("{other:?}"),
    };
    forge_err(
        forge_state_update(&chain, 1, &dir.path().join("a")),
        1,
        "seqno 2 at least",
    );
    forge_err(
        forge_state_update(&chain, 11, &dir.path().join("b")),
        11,
        "not in the archives",
    );
    // Into a directory that already holds archives (the chain's own included).
    forge_err(
        forge_state_update(&chain, 5, &chain),
        5,
        "already holds files",
    );

    // Without the keys of the signers.
    let blocks = all_blocks(&chain);
    let keys = load_validator_keys(&chain).unwrap();
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(chain.join("chain.json")).unwrap()).unwrap();
    assert_eq!(
        keys.len(),
        manifest["validator_sets"].as_array().unwrap().len()
    );
    match forge_mc_block(mc(&blocks, 5), mc(&blocks, 4), &keys[..1]) {
        Err(ChainError::Forge { seqno: 5, reason }) => {
            assert!(reason.contains("has no key"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    // Not the block before it, and not an mc block.
    let shard = blocks.iter().find(|b| !b.id.is_masterchain()).unwrap();
    for (block, prev) in [
        (mc(&blocks, 5), mc(&blocks, 3)),
        (mc(&blocks, 5), shard),
        (shard, mc(&blocks, 4)),
    ] {
        assert!(matches!(
            forge_mc_block(block, prev, &keys),
            Err(ChainError::Forge { .. })
        ));
    }

    // A validators.json whose secret keys are not the listed ones.
    let path = chain.join("validators.json");
    let mut json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    json["validator_sets"][1]["secret_keys"][0] = hex::encode([7u8; 32]).into();
    std::fs::write(&path, serde_json::to_vec(&json).unwrap()).unwrap();
    match forge_state_update(&chain, 5, &dir.path().join("c")) {
        Err(ChainError::Input { path: p, reason }) => {
            assert!(p.ends_with("validators.json"), "{p}");
            assert!(reason.contains("set 1"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}
