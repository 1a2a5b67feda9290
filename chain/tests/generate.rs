//! A generated chain passes the checks of the apply path (CheckedBlock, the proof checker), is
//! deterministic, and a block signed by the previous set after a rotation is refused.

use std::collections::HashMap;
use std::path::Path;

use bytes::Bytes;
use regolith_chain::{generate, ChainOptions, Generator};
use regolith_formats::archive::{ArchiveEntryType, ArchiveReader};
use regolith_formats::{BlockId, CheckedBlock, ParsedProof, ProofChecker, Proven, ZerostateConfig};
use regolith_test_support::fixture_bytes;

fn small() -> ChainOptions {
    ChainOptions {
        mc_blocks: 60,
        shards: 2,
        messages: 5,
        message_bytes: 300,
        key_block_every: 10,
        validators: 5,
        rotate_every: 2,
        persistent_every: 2,
        mc_blocks_per_archive: 100,
        seed: 7,
    }
}

/// The blocks of one archive, in archive order, with their three parts (data, proof, diff).
type ArchiveBlocks = Vec<(BlockId, [Bytes; 3])>;

/// Every block of every archive of `dir`, by archive id.
fn read_archives(dir: &Path) -> Vec<(u32, ArchiveBlocks)> {
    let mut files: Vec<_> = std::fs::read_dir(dir.join("archives"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let id: u32 = path.file_stem().unwrap().to_str().unwrap().parse().unwrap();
            let reader =
                ArchiveReader::new_compressed(std::fs::File::open(&path).unwrap()).unwrap();
            let mut order = Vec::new();
            let mut parts: HashMap<BlockId, [Bytes; 3]> = HashMap::new();
            for entry in reader {
                let entry = entry.unwrap();
                let slot = parts.entry(entry.block_id).or_insert_with(|| {
                    order.push(entry.block_id);
                    Default::default()
                });
                let at = match entry.ty {
                    ArchiveEntryType::Block => 0,
                    ArchiveEntryType::Proof => 1,
                    ArchiveEntryType::QueueDiff => 2,
                };
                slot[at] = Bytes::from(entry.data);
            }
            let blocks = order
                .into_iter()
                .map(|id| {
                    let p = parts.remove(&id).unwrap();
                    (id, p)
                })
                .collect();
            (id, blocks)
        })
        .collect()
}

#[test]
fn a_generated_chain_passes_the_apply_path_checks() {
    let dir = tempfile::tempdir().unwrap();
    let summary = generate(&small(), &fixture_bytes("zerostate.boc"), dir.path()).unwrap();
    assert_eq!(summary.mc_blocks, 60);
    assert_eq!(summary.blocks, 180);
    assert_eq!(summary.key_blocks, 6);

    let zerostate = std::fs::read(dir.path().join("zerostate.boc")).unwrap();
    let checker = ProofChecker::new(ZerostateConfig::from_boc(&zerostate).unwrap());
    let mut key_proofs: HashMap<u32, ParsedProof> = HashMap::new();
    let archives = read_archives(dir.path());
    // A key block ends its archive: 1..10, 11..20, ...
    let ids: Vec<u32> = archives.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, vec![1, 11, 21, 31, 41, 51]);
    let mut signers = Vec::new();
    let mut mc_seqno = 0;
    for (_, blocks) in archives {
        for (id, [data, proof, diff]) in blocks {
            let checked = CheckedBlock::check(&id, data, proof, diff).unwrap();
            match checker.verify(checked.proof(), &key_proofs).unwrap() {
                Proven::Signed(by) => {
                    assert!(id.is_masterchain());
                    assert_eq!(
                        by.signed_weight, by.total_weight,
                        "{id}: the full weight signs"
                    );
                    signers.push(by.key_block_seqno);
                    mc_seqno += 1;
                    assert_eq!(id.seqno, mc_seqno);
                    assert_eq!(checked.top_shard_blocks().len(), 2);
                    if checked.is_key_block() {
                        key_proofs.insert(id.seqno, checked.proof().clone());
                    }
                }
                Proven::Link => {
                    assert!(!id.is_masterchain());
                    assert_eq!(checked.queue_diff().messages.len(), 5);
                }
            }
        }
    }
    assert_eq!(mc_seqno, 60);
    assert_eq!(signers[0], 0);
    assert_eq!(signers[10], 10, "mc block 11 is signed after key block 10");
    assert_eq!(signers[59], 50);

    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("chain.json")).unwrap()).unwrap();
    assert_eq!(manifest["key_blocks"].as_array().unwrap().len(), 6);
    // Rotations at key blocks 2, 4, 6 (mc 20, 40, 60); announced sets included.
    assert!(manifest["validator_sets"].as_array().unwrap().len() >= 4);
}

#[test]
fn the_same_seed_gives_the_same_bytes() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let options = ChainOptions {
        mc_blocks: 25,
        ..small()
    };
    generate(&options, &fixture_bytes("zerostate.boc"), a.path()).unwrap();
    generate(&options, &fixture_bytes("zerostate.boc"), b.path()).unwrap();
    for name in [
        "zerostate.boc",
        "validators.json",
        "archives/0000000001.archive",
    ] {
        assert_eq!(
            std::fs::read(a.path().join(name)).unwrap(),
            std::fs::read(b.path().join(name)).unwrap(),
            "{name}"
        );
    }
    let other = tempfile::tempdir().unwrap();
    generate(
        &ChainOptions { seed: 8, ..options },
        &fixture_bytes("zerostate.boc"),
        other.path(),
    )
    .unwrap();
    assert_ne!(
        std::fs::read(a.path().join("zerostate.boc")).unwrap(),
        std::fs::read(other.path().join("zerostate.boc")).unwrap()
    );
}

#[test]
fn a_block_signed_by_the_previous_set_after_a_rotation_is_refused() {
    use regolith_formats::ProofErrorKind;
    use tycho_types::boc::Boc;
    use tycho_types::cell::CellBuilder;
    use tycho_types::models::BlockProof;

    let options = ChainOptions {
        mc_blocks: 21,
        ..small()
    };
    let mut generator = Generator::new(options, &fixture_bytes("zerostate.boc")).unwrap();
    let zerostate = ZerostateConfig::from(&generator.genesis.mc);
    let old_keys = generator.current_set().clone();
    let old_vset = old_keys
        .validator_set(generator.genesis.mc.state.gen_utime)
        .unwrap();
    let mut key_proofs: HashMap<u32, ParsedProof> = HashMap::new();
    let checker = ProofChecker::new(zerostate);
    let mut last = None;
    for _ in 0..21 {
        let group = generator.next_mc_block().unwrap();
        let mc = group.blocks.last().unwrap().clone();
        let parsed = ParsedProof::parse(&mc.id, &mc.proof).unwrap();
        checker.verify(&parsed, &key_proofs).unwrap();
        if group.is_key_block {
            key_proofs.insert(mc.id.seqno, parsed);
        }
        last = Some((group.rotates, mc));
    }
    assert_ne!(
        generator.current_set().index,
        old_keys.index,
        "rotated at key block 20"
    );
    let (_, mc21) = last.unwrap();
    assert_eq!(mc21.id.seqno, 21);

    // Mc block 21 re-signed by the set that signed before the rotation.
    let proof = Boc::decode(&mc21.proof)
        .unwrap()
        .parse::<BlockProof>()
        .unwrap();
    let signatures = proof.signatures.clone().unwrap();
    let round = signatures.validator_info.catchain_seqno;
    for (forged_hash, expect_unknown) in [(false, false), (true, true)] {
        let signed = old_keys.sign(&old_vset, 0, true, &mc21.id).unwrap();
        let mut s = signatures.clone();
        if forged_hash {
            // Claims the new subset, signs with the old keys.
            s.validator_info.validator_list_hash_short =
                signatures.validator_info.validator_list_hash_short;
        } else {
            s.validator_info.validator_list_hash_short = signed.short_hash;
        }
        s.signatures = signed.signatures;
        s.signature_count = signed.count;
        s.total_weight = signed.weight;
        let forged = BlockProof {
            signatures: Some(s),
            ..proof.clone()
        };
        let raw = Boc::encode(CellBuilder::build_from(&forged).unwrap());
        let err = checker
            .verify_raw(&mc21.id, &raw, &key_proofs)
            .expect_err("the previous set's signatures are refused");
        match err.kind() {
            ProofErrorKind::UnknownSigner { .. } => assert!(expect_unknown, "{err}"),
            ProofErrorKind::WrongValidatorSet { .. } => assert!(!expect_unknown, "{err}"),
            other => panic!("{other:?}"),
        }
    }
    let _ = round;
}

#[test]
fn persistent_key_blocks_come_with_their_shard_and_queue_states() {
    use regolith_formats::persistent_state::{parse_state_object_name, StateKind, StateObject};
    use regolith_formats::queue_state::QueueState;
    use tycho_types::boc::Boc;

    let mut generator = Generator::new(
        ChainOptions {
            mc_blocks: 40,
            ..small()
        },
        &fixture_bytes("zerostate.boc"),
    )
    .unwrap();
    let mut persistent = Vec::new();
    let mut last_window = generator.genesis.mc.state.gen_utime >> 17;
    for _ in 0..40 {
        let group = generator.next_mc_block().unwrap();
        if group.is_key_block {
            // Every 2nd key block (20, 40) starts a new 2^17 s window; the others (10, 30) do not.
            assert_eq!(
                group.is_persistent,
                group.mc.seqno.is_multiple_of(20),
                "{}",
                group.mc
            );
            assert_eq!(group.gen_utime >> 17 != last_window, group.is_persistent);
            last_window = group.gen_utime >> 17;
        }
        if !group.is_persistent {
            continue;
        }
        persistent.push(group.mc.seqno);
        let files = regolith_chain::states::persistent_states(&generator).unwrap();
        assert_eq!(
            files.len(),
            6,
            "mc and 2 top shard blocks, shard and queue each"
        );
        for file in files {
            let Some(StateObject::State(id, kind, _)) = parse_state_object_name(&file.name) else {
                panic!("{}", file.name)
            };
            let block = group
                .blocks
                .iter()
                .find(|b| b.id == id)
                .expect("a block of the group");
            let parsed = regolith_formats::ParsedBlock::parse(&id, &block.data).unwrap();
            let raw = zstd::decode_all(file.bytes.as_slice()).unwrap();
            match kind {
                StateKind::Shard => {
                    let root = Boc::decode(&raw).unwrap();
                    let update = parsed.block.load_state_update().unwrap();
                    assert_eq!(*root.repr_hash(), update.new_hash, "{}", file.name);
                }
                StateKind::Queue => {
                    let state = QueueState::parse(&raw).unwrap();
                    let updates = &parsed.block.out_msg_queue_updates;
                    assert_eq!(state.header.diff_hashes()[0], updates.diff_hash);
                    assert_eq!(state.header.diffs().len(), updates.tail_len as usize);
                    let listed = state.header.message_count();
                    if id.is_masterchain() {
                        assert_eq!(listed, 0);
                    } else {
                        assert!(listed >= 5, "{listed}");
                    }
                }
            }
        }
    }
    assert_eq!(persistent, vec![20, 40]);
}

#[test]
fn a_state_update_holds_only_the_changed_paths() {
    use tycho_types::boc::Boc;
    use tycho_types::models::Block;

    let mut generator = Generator::new(small(), &fixture_bytes("zerostate.boc")).unwrap();
    let before = generator.mc_state_root().clone();
    let group = generator.next_mc_block().unwrap();
    let mc = group.blocks.last().unwrap();
    let block = Boc::decode(&mc.data).unwrap().parse::<Block>().unwrap();
    let update = block.load_state_update().unwrap();
    assert_eq!(update.old_hash, *before.repr_hash());
    assert_eq!(update.new_hash, *generator.mc_state_root().repr_hash());
    let applied = update.apply(&before).unwrap();
    assert_eq!(applied.repr_hash(), generator.mc_state_root().repr_hash());
    // The config and the accounts are kept, not repeated: the block is far smaller than the state.
    assert!(
        mc.data.len() * 4 < Boc::encode(generator.mc_state_root()).len(),
        "block {} B, state {} B",
        mc.data.len(),
        Boc::encode(generator.mc_state_root()).len()
    );
}
