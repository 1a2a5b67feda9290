//! The checker on the fixture chain (every proof of archive_1), on corrupted copies of its proofs (one reason
//! each), and on a synthetic key-block transition signed with generated keys.

use std::collections::HashMap;
use std::num::NonZeroU16;
use std::path::PathBuf;

use tycho_crypto::ed25519;
use tycho_types::boc::Boc;
use tycho_types::cell::{Cell, CellBuilder, Lazy, UsageTree, UsageTreeMode};
use tycho_types::dict::Dict;
use tycho_types::merkle::MerkleProof;
use tycho_types::models::{
    Block, BlockProof, BlockSignature, BlockSignatures, BlockchainConfig, ConsensusInfo,
    GlobalCapabilities, GlobalVersion, Signature, ValidatorBaseInfo, ValidatorDescription,
    ValidatorSet,
};

use super::*;
use crate::archive::{ArchiveEntryType, ArchiveReader};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures")
}

fn zerostate() -> ZerostateConfig {
    ZerostateConfig::from_boc(&std::fs::read(fixtures().join("zerostate.boc")).unwrap()).unwrap()
}

/// (id, block BOC, proof BOC) of every block of archive_1, in archive order.
fn archive_blocks() -> Vec<(BlockId, Vec<u8>, Vec<u8>)> {
    let file = std::fs::File::open(fixtures().join("archive_1.bin")).unwrap();
    let mut blocks: Vec<(BlockId, Vec<u8>, Vec<u8>)> = Vec::new();
    let mut proofs: HashMap<BlockId, Vec<u8>> = HashMap::new();
    for entry in ArchiveReader::new_compressed(file).unwrap() {
        let entry = entry.unwrap();
        match entry.ty {
            ArchiveEntryType::Block => blocks.push((entry.block_id, entry.data, Vec::new())),
            ArchiveEntryType::Proof => {
                proofs.insert(entry.block_id, entry.data);
            }
            ArchiveEntryType::QueueDiff => {}
        }
    }
    for (id, _, proof) in &mut blocks {
        *proof = proofs.remove(id).unwrap();
    }
    blocks
}

fn mc_proof(seqno: u32) -> (BlockId, Vec<u8>) {
    archive_blocks()
        .into_iter()
        .find(|(id, _, _)| id.is_masterchain() && id.seqno == seqno)
        .map(|(id, _, proof)| (id, proof))
        .unwrap()
}

/// The proof BOC with its signatures changed by `f`.
fn with_signatures(raw: &[u8], f: impl FnOnce(&mut BlockSignatures)) -> Vec<u8> {
    let mut proof = Boc::decode(raw).unwrap().parse::<BlockProof>().unwrap();
    f(proof.signatures.as_mut().unwrap());
    Boc::encode(CellBuilder::build_from(&proof).unwrap())
}

fn signature_entries(s: &BlockSignatures) -> Vec<(u16, BlockSignature)> {
    s.signatures.iter().map(|e| e.unwrap()).collect()
}

fn dict_of(entries: &[(u16, BlockSignature)]) -> Dict<u16, BlockSignature> {
    let mut dict = Dict::new();
    for (k, v) in entries {
        dict.set(*k, v).unwrap();
    }
    dict
}

fn kind_of(result: Result<Proven, ProofError>) -> ProofErrorKind {
    match result {
        Ok(p) => panic!("the proof verified: {p:?}"),
        Err(e) => e.kind().clone(),
    }
}

#[test]
fn every_proof_of_archive_1_verifies_against_the_zerostate() {
    let checker = ProofChecker::new(zerostate());
    let blocks = archive_blocks();
    assert_eq!(blocks.len(), 107);
    let mut mc = 0;
    for (id, _, proof) in &blocks {
        let parsed = ParsedProof::parse(id, proof).unwrap();
        assert!(!parsed.is_key_block(), "no key block after the zerostate");
        assert_eq!(parsed.prev_key_block_seqno(), 0);
        let proven = checker.verify(&parsed, &NoKeyBlocks).unwrap();
        if id.is_masterchain() {
            mc += 1;
            assert_eq!(
                proven,
                Proven::Signed(ProvenBy {
                    signatures: 3,
                    signed_weight: 3,
                    total_weight: 4,
                    key_block_seqno: 0,
                }),
                "{id}"
            );
        } else {
            assert_eq!(proven, Proven::Link, "{id}");
        }
    }
    assert_eq!(mc, 100);
}

#[test]
fn flipped_signature_byte_is_a_bad_signature() {
    let (id, raw) = mc_proof(50);
    let mut signer = None;
    let bad = with_signatures(&raw, |s| {
        let mut entries = signature_entries(s);
        entries[1].1.signature.0[17] ^= 0x01;
        signer = Some(entries[1].1.node_id_short);
        s.signatures = dict_of(&entries);
    });
    let checker = ProofChecker::new(zerostate());
    match kind_of(checker.verify_raw(&id, &bad, &NoKeyBlocks)) {
        // The error names the signer by its index in the validator set.
        ProofErrorKind::BadSignature { validator_idx } => {
            let vset = zerostate().config().get_current_validator_set().unwrap();
            let key = vset.list[validator_idx as usize].public_key.0;
            let node_id = tl_proto::hash(tycho_crypto::tl::PublicKey::Ed25519 { key: &key });
            assert_eq!(Some(HashBytes(node_id)), signer);
        }
        other => panic!("{other:?}"),
    }
    checker.verify_raw(&id, &raw, &NoKeyBlocks).unwrap();
}

#[test]
fn one_of_three_signatures_is_below_two_thirds() {
    let (id, raw) = mc_proof(50);
    let one = with_signatures(&raw, |s| {
        let entries = signature_entries(s);
        s.signatures = dict_of(&entries[..1]);
        s.signature_count = 1;
        s.total_weight = 1;
    });
    let checker = ProofChecker::new(zerostate());
    assert_eq!(
        kind_of(checker.verify_raw(&id, &one, &NoKeyBlocks)),
        ProofErrorKind::WeightBelowTwoThirds {
            signed: 1,
            total: 4
        }
    );
    // Two of four is not above 2/3 either; three of four is.
    let two = with_signatures(&raw, |s| {
        let entries = signature_entries(s);
        s.signatures = dict_of(&entries[..2]);
        s.signature_count = 2;
        s.total_weight = 2;
    });
    assert_eq!(
        kind_of(checker.verify_raw(&id, &two, &NoKeyBlocks)),
        ProofErrorKind::WeightBelowTwoThirds {
            signed: 2,
            total: 4
        }
    );
    // Only one signature kept but the counters left as they were: the count disagrees first.
    let unadjusted = with_signatures(&raw, |s| {
        let entries = signature_entries(s);
        s.signatures = dict_of(&entries[..1]);
    });
    assert_eq!(
        kind_of(checker.verify_raw(&id, &unadjusted, &NoKeyBlocks)),
        ProofErrorKind::SignatureCountMismatch {
            declared: 3,
            found: 1
        }
    );
}

#[test]
fn signature_count_that_disagrees_with_the_entries() {
    let (id, raw) = mc_proof(7);
    let checker = ProofChecker::new(zerostate());
    for declared in [2, 4] {
        let bad = with_signatures(&raw, |s| s.signature_count = declared);
        assert_eq!(
            kind_of(checker.verify_raw(&id, &bad, &NoKeyBlocks)),
            ProofErrorKind::SignatureCountMismatch { declared, found: 3 }
        );
    }
}

#[test]
fn total_weight_must_be_the_signed_weight() {
    let (id, raw) = mc_proof(7);
    let bad = with_signatures(&raw, |s| s.total_weight = 4);
    let checker = ProofChecker::new(zerostate());
    assert_eq!(
        kind_of(checker.verify_raw(&id, &bad, &NoKeyBlocks)),
        ProofErrorKind::TotalWeightMismatch {
            signed: 3,
            declared: 4
        }
    );
}

#[test]
fn proof_of_another_block() {
    let (id, _) = mc_proof(50);
    let (other, other_raw) = mc_proof(49);
    let checker = ProofChecker::new(zerostate());
    assert_eq!(
        kind_of(checker.verify_raw(&id, &other_raw, &NoKeyBlocks)),
        ProofErrorKind::ProofOfAnotherBlock {
            proof_for: Box::new(other)
        }
    );
    // The proof renamed to the block: its Merkle proof still proves the other block.
    let mut renamed = Boc::decode(&other_raw)
        .unwrap()
        .parse::<BlockProof>()
        .unwrap();
    renamed.proof_for = id;
    let renamed = Boc::encode(CellBuilder::build_from(&renamed).unwrap());
    assert_eq!(
        kind_of(checker.verify_raw(&id, &renamed, &NoKeyBlocks)),
        ProofErrorKind::VirtualRootMismatch {
            virtual_root: other.root_hash
        }
    );
}

#[test]
fn signatures_of_another_block_do_not_verify() {
    // Block 50's signatures moved into block 49's proof: the validators signed another id.
    let (_, raw50) = mc_proof(50);
    let (id49, raw49) = mc_proof(49);
    let sigs50 = Boc::decode(&raw50)
        .unwrap()
        .parse::<BlockProof>()
        .unwrap()
        .signatures
        .unwrap();
    let bad = with_signatures(&raw49, |s| *s = sigs50);
    let checker = ProofChecker::new(zerostate());
    assert!(matches!(
        kind_of(checker.verify_raw(&id49, &bad, &NoKeyBlocks)),
        ProofErrorKind::BadSignature { .. }
    ));
}

#[test]
fn checked_against_a_validator_set_with_another_short_hash() {
    let (id, raw) = mc_proof(50);
    // The zerostate's config with another current validator set.
    let keys = keys(10, 4);
    let mut config = zerostate().config().clone();
    config
        .set_raw(34, CellBuilder::build_from(validator_set(&keys)).unwrap())
        .unwrap();
    let checker = ProofChecker::new(ZerostateConfig::new(config, *zerostate().consensus_info()));
    match kind_of(checker.verify_raw(&id, &raw, &NoKeyBlocks)) {
        ProofErrorKind::WrongValidatorSet { expected, found } => {
            assert_eq!(found, 0x1d3e_d31e, "the proof names the fixture subset");
            assert_ne!(expected, found);
        }
        other => panic!("{other:?}"),
    }
    // And the proof naming another subset, checked against the real one.
    let bad = with_signatures(&raw, |s| s.validator_info.validator_list_hash_short ^= 1);
    assert_eq!(
        kind_of(ProofChecker::new(zerostate()).verify_raw(&id, &bad, &NoKeyBlocks)),
        ProofErrorKind::WrongValidatorSet {
            expected: 0x1d3e_d31e,
            found: 0x1d3e_d31f
        }
    );
}

#[test]
fn consensus_info_must_be_the_zerostates() {
    let (id, raw) = mc_proof(3);
    let bad = with_signatures(&raw, |s| s.consensus_info.vset_switch_round = 1);
    let checker = ProofChecker::new(zerostate());
    assert!(matches!(
        kind_of(checker.verify_raw(&id, &bad, &NoKeyBlocks)),
        ProofErrorKind::ConsensusInfoMismatch { .. }
    ));
}

#[test]
fn proof_links_carry_no_signatures_and_mc_proofs_do() {
    let blocks = archive_blocks();
    let (shard_id, _, shard_raw) = blocks.iter().find(|(id, ..)| !id.is_masterchain()).unwrap();
    let (_, mc_raw) = mc_proof(1);
    let sigs = Boc::decode(&mc_raw)
        .unwrap()
        .parse::<BlockProof>()
        .unwrap()
        .signatures;
    let mut link = Boc::decode(shard_raw)
        .unwrap()
        .parse::<BlockProof>()
        .unwrap();
    link.signatures = sigs;
    let link = Boc::encode(CellBuilder::build_from(&link).unwrap());
    assert_eq!(
        ParsedProof::parse(shard_id, &link).unwrap_err().kind(),
        &ProofErrorKind::SignaturesOnProofLink
    );

    let (id, raw) = mc_proof(1);
    let mut unsigned = Boc::decode(&raw).unwrap().parse::<BlockProof>().unwrap();
    unsigned.signatures = None;
    let unsigned = Boc::encode(CellBuilder::build_from(&unsigned).unwrap());
    let checker = ProofChecker::new(zerostate());
    assert_eq!(
        kind_of(checker.verify_raw(&id, &unsigned, &NoKeyBlocks)),
        ProofErrorKind::NoSignatures
    );
}

#[test]
fn garbage_is_an_invalid_proof_not_a_panic() {
    let (id, raw) = mc_proof(1);
    let checker = ProofChecker::new(zerostate());
    for cut in [0, 1, raw.len() / 2, raw.len() - 1] {
        assert!(matches!(
            kind_of(checker.verify_raw(&id, &raw[..cut], &NoKeyBlocks)),
            ProofErrorKind::InvalidProof { .. }
        ));
    }
}

// ---- the synthetic key-block transition ----

fn keys(seed: u8, n: u8) -> Vec<ed25519::KeyPair> {
    (0..n)
        .map(|i| ed25519::KeyPair::from(&ed25519::SecretKey::from_bytes([seed + i; 32])))
        .collect()
}

fn validator_set(keys: &[ed25519::KeyPair]) -> ValidatorSet {
    let list: Vec<ValidatorDescription> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| ValidatorDescription {
            public_key: HashBytes(k.public_key.to_bytes()),
            weight: 1,
            adnl_addr: None,
            mc_seqno_since: 0,
            prev_total_weight: i as u64,
        })
        .collect();
    ValidatorSet {
        utime_since: 0,
        utime_until: u32::MAX,
        main: NonZeroU16::new(list.len() as u16).unwrap(),
        total_weight: list.len() as u64,
        list,
    }
}

/// The fixture mc block `seqno` rebuilt as a block of a synthetic chain: flags, prev key block, capabilities
/// and (for a key block) the config changed. Returns its id and root cell.
fn synthetic_block(
    seqno: u32,
    prev_key_block_seqno: u32,
    key_block_config: Option<&BlockchainConfig>,
    create_stats_cap: bool,
) -> (BlockId, Cell) {
    let (_, data, _) = archive_blocks()
        .into_iter()
        .find(|(id, ..)| id.is_masterchain() && id.seqno == seqno)
        .unwrap();
    let mut block = Boc::decode(&data).unwrap().parse::<Block>().unwrap();
    let mut info = block.load_info().unwrap();
    info.key_block = key_block_config.is_some();
    info.prev_key_block_seqno = prev_key_block_seqno;
    let mut capabilities = info.gen_software.capabilities.into_inner();
    if !create_stats_cap {
        capabilities &= !(GlobalCapability::CapCreateStatsEnabled as u64);
    }
    info.set_gen_software(Some(GlobalVersion {
        version: info.gen_software.version,
        capabilities: GlobalCapabilities::new(capabilities),
    }));
    block.info = Lazy::new(&info).unwrap();
    if let Some(config) = key_block_config {
        let mut extra = block.load_extra().unwrap();
        let mut custom = extra.load_custom().unwrap().unwrap();
        custom.config = Some(config.clone());
        extra.custom = Some(Lazy::new(&custom).unwrap());
        block.extra = Lazy::new(&extra).unwrap();
    }
    let root = CellBuilder::build_from(&block).unwrap();
    let id = BlockId {
        shard: crate::ShardIdent::MASTERCHAIN,
        seqno,
        root_hash: *root.repr_hash(),
        file_hash: HashBytes(*blake3::hash(&Boc::encode(&root)).as_bytes()),
    };
    (id, root)
}

/// A Merkle proof of the block root visiting what the checker reads: info, value flow, state update and,
/// of a key block, the whole config.
fn merkle_proof_of(root: &Cell) -> Cell {
    let usage_tree = UsageTree::new(UsageTreeMode::OnLoad);
    let tracked = usage_tree.track(root);
    let block = tracked.parse::<Block>().unwrap();
    let info = block.load_info().unwrap();
    info.load_master_ref().unwrap();
    block.load_value_flow().unwrap();
    block.load_state_update().unwrap();
    if info.key_block {
        let extra = block.load_extra().unwrap();
        let custom = extra.load_custom().unwrap().unwrap();
        if let Some(root) = custom.config.unwrap().params.as_dict().root() {
            root.touch_recursive();
        }
    }
    let proof = MerkleProof::create(root.as_ref(), usage_tree)
        .build()
        .unwrap();
    CellBuilder::build_from(proof).unwrap()
}

struct Signing<'a> {
    keys: &'a [ed25519::KeyPair],
    vset: &'a ValidatorSet,
    subset_round: u32,
    catchain_seqno: u32,
    consensus_info: ConsensusInfo,
    signers: usize,
}

/// Signatures of `signers` members of the subset of `vset` at `subset_round` (shuffled, as the fixture
/// config says), with the counters filled in.
fn sign(id: &BlockId, s: &Signing<'_>) -> BlockSignatures {
    let (subset, short_hash) = s
        .vset
        .compute_mc_subset_indexed(s.subset_round, true)
        .unwrap();
    let data = Block::build_data_for_sign(id);
    let mut entries = Vec::new();
    for member in subset.iter().take(s.signers) {
        let key = s
            .keys
            .iter()
            .find(|k| k.public_key.to_bytes() == member.desc.public_key.0)
            .unwrap();
        entries.push((
            member.validator_idx,
            BlockSignature {
                node_id_short: HashBytes(tl_proto::hash(key.public_key.as_tl())),
                signature: Signature(key.sign_raw(&data)),
            },
        ));
    }
    BlockSignatures {
        validator_info: ValidatorBaseInfo {
            validator_list_hash_short: short_hash,
            catchain_seqno: s.catchain_seqno,
        },
        consensus_info: s.consensus_info,
        signature_count: entries.len() as u32,
        total_weight: entries.len() as u64,
        signatures: dict_of(&entries),
    }
}

fn proof_of(id: &BlockId, root: &Cell, signatures: Option<BlockSignatures>) -> ParsedProof {
    let proof = BlockProof {
        proof_for: *id,
        root: merkle_proof_of(root),
        signatures,
    };
    let raw = Boc::encode(CellBuilder::build_from(&proof).unwrap());
    ParsedProof::parse(id, &raw).unwrap()
}

/// A synthetic chain: zerostate with validator set A; key block 1 signed by A whose config carries set B.
struct Transition {
    old_keys: Vec<ed25519::KeyPair>,
    old_set: ValidatorSet,
    new_keys: Vec<ed25519::KeyPair>,
    new_set: ValidatorSet,
    new_config: BlockchainConfig,
    zerostate: ZerostateConfig,
    key_proof: ParsedProof,
}

fn transition() -> Transition {
    let fixture = zerostate();
    let old_keys = keys(1, 4);
    let old_set = validator_set(&old_keys);
    let new_keys = keys(101, 5);
    let new_set = validator_set(&new_keys);
    let mut old_config = fixture.config().clone();
    old_config
        .set_raw(34, CellBuilder::build_from(&old_set).unwrap())
        .unwrap();
    let mut new_config = fixture.config().clone();
    new_config
        .set_raw(34, CellBuilder::build_from(&new_set).unwrap())
        .unwrap();
    let zerostate = ZerostateConfig::new(old_config, *fixture.consensus_info());

    let (key_id, key_root) = synthetic_block(1, 0, Some(&new_config), true);
    let signatures = sign(
        &key_id,
        &Signing {
            keys: &old_keys,
            vset: &old_set,
            subset_round: 0,
            catchain_seqno: 0,
            consensus_info: *fixture.consensus_info(),
            signers: 3,
        },
    );
    let key_proof = proof_of(&key_id, &key_root, Some(signatures));
    Transition {
        old_keys,
        old_set,
        new_keys,
        new_set,
        new_config,
        zerostate,
        key_proof,
    }
}

/// Consensus info after the key block (the checker takes it from the proof when a key block gives the set).
fn later_consensus_info() -> ConsensusInfo {
    ConsensusInfo {
        vset_switch_round: 7,
        ..*zerostate().consensus_info()
    }
}

#[test]
fn key_block_transition_to_a_generated_validator_set() {
    let t = transition();
    assert!(t.key_proof.is_key_block());
    let checker = ProofChecker::new(t.zerostate.clone());

    // The key block itself is signed by the zerostate's (old) set.
    assert_eq!(
        checker.verify(&t.key_proof, &NoKeyBlocks).unwrap(),
        Proven::Signed(ProvenBy {
            signatures: 3,
            signed_weight: 3,
            total_weight: 4,
            key_block_seqno: 0
        })
    );
    let key_blocks = HashMap::from([(1u32, t.key_proof.clone())]);

    // The next block, signed by the new set, verifies through the key block's proof.
    let (next_id, next_root) = synthetic_block(2, 1, None, true);
    let by_new = Signing {
        keys: &t.new_keys,
        vset: &t.new_set,
        subset_round: 3,
        catchain_seqno: 3,
        consensus_info: later_consensus_info(),
        signers: 4,
    };
    let next = proof_of(&next_id, &next_root, Some(sign(&next_id, &by_new)));
    assert_eq!(
        checker.verify(&next, &key_blocks).unwrap(),
        Proven::Signed(ProvenBy {
            signatures: 4,
            signed_weight: 4,
            total_weight: 5,
            key_block_seqno: 1
        })
    );
    // 3 of the 5 new validators are not enough.
    let three = proof_of(
        &next_id,
        &next_root,
        Some(sign(
            &next_id,
            &Signing {
                signers: 3,
                ..by_new
            },
        )),
    );
    assert_eq!(
        kind_of(checker.verify(&three, &key_blocks)),
        ProofErrorKind::WeightBelowTwoThirds {
            signed: 3,
            total: 5
        }
    );

    // The same block signed by the old set is refused: its subset is not the key block's.
    let by_old = Signing {
        keys: &t.old_keys,
        vset: &t.old_set,
        subset_round: 3,
        catchain_seqno: 3,
        consensus_info: later_consensus_info(),
        signers: 4,
    };
    let old = proof_of(&next_id, &next_root, Some(sign(&next_id, &by_old)));
    assert!(matches!(
        kind_of(checker.verify(&old, &key_blocks)),
        ProofErrorKind::WrongValidatorSet { .. }
    ));
    // ... and so it is when the old set's signatures claim the new subset's short hash.
    let mut forged = sign(&next_id, &by_old);
    forged.validator_info.validator_list_hash_short = sign(&next_id, &by_new)
        .validator_info
        .validator_list_hash_short;
    let forged = proof_of(&next_id, &next_root, Some(forged));
    assert!(matches!(
        kind_of(checker.verify(&forged, &key_blocks)),
        ProofErrorKind::UnknownSigner { .. }
    ));
    // A fresh checker (nothing cached) refuses the old set too.
    assert!(matches!(
        kind_of(ProofChecker::new(t.zerostate.clone()).verify(&old, &key_blocks)),
        ProofErrorKind::WrongValidatorSet { .. }
    ));
}

#[test]
fn the_previous_key_block_proof_must_be_there_and_be_a_key_block_proof() {
    let t = transition();
    let (next_id, next_root) = synthetic_block(2, 1, None, true);
    let next = proof_of(
        &next_id,
        &next_root,
        Some(sign(
            &next_id,
            &Signing {
                keys: &t.new_keys,
                vset: &t.new_set,
                subset_round: 0,
                catchain_seqno: 0,
                consensus_info: later_consensus_info(),
                signers: 5,
            },
        )),
    );
    let checker = ProofChecker::new(t.zerostate.clone());
    assert_eq!(
        kind_of(checker.verify(&next, &NoKeyBlocks)),
        ProofErrorKind::NoPrevKeyBlockProof { seqno: 1 }
    );
    // A proof of block 1 that is not a key block proof.
    let (plain_id, plain_root) = synthetic_block(1, 0, None, true);
    let plain = proof_of(&plain_id, &plain_root, None);
    assert!(matches!(
        kind_of(checker.verify(&next, &HashMap::from([(1u32, plain)]))),
        ProofErrorKind::NotAKeyBlockProof { seqno: 1, .. }
    ));
    // The proof of another key block given for seqno 1.
    let (k3_id, k3_root) = synthetic_block(3, 0, Some(&t.new_config), true);
    let k3 = proof_of(&k3_id, &k3_root, None);
    assert!(matches!(
        kind_of(checker.verify(&next, &HashMap::from([(1u32, k3)]))),
        ProofErrorKind::NotAKeyBlockProof { seqno: 1, .. }
    ));
    // With the key block proof it verifies.
    checker
        .verify(&next, &HashMap::from([(1u32, t.key_proof.clone())]))
        .unwrap();
}

#[test]
fn a_key_block_config_needs_param_34() {
    let t = transition();
    let mut config = t.new_config.clone();
    config.remove(34).unwrap();
    config.remove(35).unwrap();
    let (id, root) = synthetic_block(1, 0, Some(&config), true);
    let signatures = sign(
        &id,
        &Signing {
            keys: &t.old_keys,
            vset: &t.old_set,
            subset_round: 0,
            catchain_seqno: 0,
            consensus_info: *zerostate().consensus_info(),
            signers: 4,
        },
    );
    let proof = proof_of(&id, &root, Some(signatures));
    let checker = ProofChecker::new(t.zerostate.clone());
    match kind_of(checker.verify(&proof, &NoKeyBlocks)) {
        ProofErrorKind::InvalidKeyBlockConfig { reason } => {
            assert!(reason.contains("34"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    // A malformed param 36 is refused too.
    let mut config = t.new_config.clone();
    config
        .set_raw(36, CellBuilder::build_from(0xdead_u32).unwrap())
        .unwrap();
    let (id, root) = synthetic_block(1, 0, Some(&config), true);
    let signatures = sign(
        &id,
        &Signing {
            keys: &t.old_keys,
            vset: &t.old_set,
            subset_round: 0,
            catchain_seqno: 0,
            consensus_info: *zerostate().consensus_info(),
            signers: 4,
        },
    );
    let proof = proof_of(&id, &root, Some(signatures));
    match kind_of(checker.verify(&proof, &NoKeyBlocks)) {
        ProofErrorKind::InvalidKeyBlockConfig { reason } => {
            assert!(reason.contains("36"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn switch_round_is_the_catchain_seqno_only_with_create_stats() {
    let t = transition();
    let key_blocks = HashMap::from([(1u32, t.key_proof.clone())]);
    let checker = ProofChecker::new(t.zerostate.clone());
    let signing = |subset_round, catchain_seqno| Signing {
        keys: &t.new_keys,
        vset: &t.new_set,
        subset_round,
        catchain_seqno,
        consensus_info: ConsensusInfo {
            vset_switch_round: 9,
            ..*zerostate().consensus_info()
        },
        signers: 5,
    };
    // Without CapCreateStatsEnabled the subset is the one of consensus_info.vset_switch_round (9).
    let (id, root) = synthetic_block(2, 1, None, false);
    let ok = proof_of(&id, &root, Some(sign(&id, &signing(9, 5))));
    checker.verify(&ok, &key_blocks).unwrap();
    let by_catchain = proof_of(&id, &root, Some(sign(&id, &signing(5, 5))));
    assert!(matches!(
        kind_of(checker.verify(&by_catchain, &key_blocks)),
        ProofErrorKind::WrongValidatorSet { .. }
    ));
    // With it, the one of validator_info.catchain_seqno (5).
    let (id, root) = synthetic_block(2, 1, None, true);
    let ok = proof_of(&id, &root, Some(sign(&id, &signing(5, 5))));
    checker.verify(&ok, &key_blocks).unwrap();
    let by_switch_round = proof_of(&id, &root, Some(sign(&id, &signing(9, 5))));
    assert!(matches!(
        kind_of(checker.verify(&by_switch_round, &key_blocks)),
        ProofErrorKind::WrongValidatorSet { .. }
    ));
}
