//! A generated chain passes the checks of the apply path (CheckedBlock, the proof checker), is
//! deterministic, and a block signed by the previous set after a rotation is refused.

use std::collections::HashMap;
use std::path::Path;

use bytes::Bytes;
use regolith_chain::generator::DEPLOYS_PER_MC_BLOCK;
use regolith_chain::{generate, ChainOptions, ChainShape, Generator};
use regolith_formats::archive::{ArchiveEntryType, ArchiveReader};
use regolith_formats::{BlockId, CheckedBlock, ParsedProof, ProofChecker, Proven, ZerostateConfig};
use regolith_test_support::fixture_bytes;

fn small() -> ChainOptions {
    ChainOptions {
        mc_blocks: 60,
        mc_blocks_per_archive: 100,
        shape: ChainShape {
            seed: 7,
            shards: 2,
            messages: 5,
            message_bytes: 300,
            key_block_every: 10,
            validators: 5,
            rotate_every: 2,
            persistent_every: 2,
            ..ChainShape::default()
        },
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
                    // The first shard blocks come before mc block 1 deploys their accounts.
                    let expected = if id.seqno == 1 { 0 } else { 5 };
                    assert_eq!(checked.queue_diff().messages.len(), expected, "{id}");
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
        &ChainOptions {
            shape: ChainShape {
                seed: 8,
                ..options.shape.clone()
            },
            ..options.clone()
        },
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
    // Block 1 deploys the shard accounts; block 2 is an ordinary one.
    generator.next_mc_block().unwrap();
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

/// Follows a generated chain block by block from its zerostates (applying each state update) and checks what
/// every block says about its messages, accounts and values against the blocks before it:
/// - each block imports (`InMsg::Final`, its destination account's transaction taking the message) exactly
///   the messages addressed to its shard that its diff's `processed_to` newly covers, each once; one from its
///   own shard's queue is also dequeued (`OutMsg::DequeueImmediate`) and the others are not;
/// - each new message (`OutMsg::New`) is created by a transaction of its source account in this block;
/// - the value flow balances, starts at the previous state's balance and ends at the new one's, and moves
///   exactly the value of the imported and the new messages;
/// - the state's accounts are the deployed ones (the mc accounts from the zerostate on, the shard accounts of
///   the mc blocks before the block's group); every account a block touches ends with the hash and last
///   transaction its account block and transactions name, and transactions chain by prev_trans_hash/lt.
///
/// Returns the imports, the dequeues and the deployments it saw.
fn follow_and_check(options: &ChainOptions) -> (usize, usize, usize) {
    use std::collections::{BTreeMap, BTreeSet};
    use tycho_types::boc::Boc;
    use tycho_types::cell::{Cell, HashBytes};
    use tycho_types::models::{
        Block, InMsg, IntAddr, MsgInfo, OutMsg, ShardIdent, ShardStateUnsplit, Transaction,
    };

    let accounts_per_chain = options.shape.accounts as usize;
    let mut generator = Generator::new(options.clone(), &fixture_bytes("zerostate.boc")).unwrap();
    let mut states: HashMap<ShardIdent, Cell> = HashMap::new();
    states.insert(ShardIdent::MASTERCHAIN, generator.mc_state_root().clone());
    for z in &generator.genesis.shards {
        states.insert(z.id.shard, z.root.clone());
    }
    let shards: Vec<ShardIdent> = states.keys().copied().collect();
    let chain_of = |addr: &IntAddr| -> ShardIdent {
        let IntAddr::Std(addr) = addr else {
            panic!("a non-standard address {addr:?}")
        };
        *shards
            .iter()
            .find(|s| s.contains_address(addr))
            .expect("an address of a generated chain")
    };
    let account_count = |root: &Cell| -> usize {
        let state = root.parse::<ShardStateUnsplit>().unwrap();
        state.load_accounts().unwrap().keys().count()
    };
    let mc_base_accounts = account_count(generator.mc_state_root()) - accounts_per_chain;

    // Sent and not yet imported, by destination shard: key -> source shard.
    let mut owed: HashMap<ShardIdent, BTreeMap<(u64, HashBytes), ShardIdent>> = HashMap::new();
    let mut last_processed: HashMap<ShardIdent, BTreeMap<ShardIdent, (u64, HashBytes)>> =
        HashMap::new();
    // Last transaction (hash, lt) of every account.
    let mut last_tx: HashMap<HashBytes, (HashBytes, u64)> = HashMap::new();
    let (mut imports, mut dequeues, mut deploys) = (0usize, 0usize, 0usize);
    for _ in 0..options.mc_blocks {
        let group = generator.next_mc_block().unwrap();
        for archived in &group.blocks {
            let id = archived.id;
            let shard = id.shard;
            let root = Boc::decode(&archived.data).unwrap();
            let block = root.parse::<Block>().unwrap();
            let update = block.load_state_update().unwrap();
            let old_root = states[&shard].clone();
            let new_root = update.apply(&old_root).unwrap();
            let old = old_root.parse::<ShardStateUnsplit>().unwrap();
            let new = new_root.parse::<ShardStateUnsplit>().unwrap();
            let extra = block.load_extra().unwrap();
            let in_msgs = extra.load_in_msg_description().unwrap();
            let out_msgs = extra.load_out_msg_description().unwrap();
            let account_blocks = extra.account_blocks.load().unwrap();
            let diff =
                regolith_formats::queue_diff::QueueDiff::parse(&archived.queue_diff).unwrap();

            // Imports: exactly what the new processed_to covers for this shard.
            let processed: BTreeMap<ShardIdent, (u64, HashBytes)> = diff
                .processed_to
                .iter()
                .map(|(s, k)| (*s, (k.lt, k.hash)))
                .collect();
            let due: BTreeSet<(u64, HashBytes)> = owed
                .get(&shard)
                .map(|m| {
                    m.iter()
                        .filter(|(key, src)| processed.get(src).is_some_and(|p| *key <= p))
                        .map(|(key, _)| *key)
                        .collect()
                })
                .unwrap_or_default();
            if let Some(before) = last_processed.get(&shard) {
                for (src, key) in before {
                    assert!(processed[src] >= *key, "{id}: processed_to went back");
                }
            }
            last_processed.insert(shard, processed);
            let mut imported = BTreeSet::new();
            let mut imported_value = 0u128;
            for entry in in_msgs.iter() {
                let (hash, fees, in_msg) = entry.unwrap();
                let InMsg::Final(fin) = in_msg else {
                    panic!("{id}: message {hash} is imported as {in_msg:?}")
                };
                let envelope = fin.load_in_msg_envelope().unwrap();
                let message = envelope.load_message().unwrap();
                let MsgInfo::Int(info) = &message.info else {
                    panic!("{id}: an imported message that is not internal")
                };
                assert_eq!(
                    chain_of(&info.dst),
                    shard,
                    "{id}: {hash} is for another shard"
                );
                let key = (info.created_lt, hash);
                let src = owed
                    .get_mut(&shard)
                    .and_then(|m| m.remove(&key))
                    .unwrap_or_else(|| panic!("{id}: imports {hash}, which no block sent to it"));
                assert!(
                    due.contains(&key),
                    "{id}: imports {hash} beyond its processed_to"
                );
                imported.insert(key);
                imported_value += info.value.tokens.into_inner();
                assert_eq!(
                    fees.value_imported.tokens.into_inner(),
                    info.value.tokens.into_inner()
                );
                let tx = fin.transaction.load().unwrap();
                assert_eq!(
                    tx.in_msg.as_ref().map(|c| *c.repr_hash()),
                    Some(hash),
                    "{id}: the import transaction takes another message"
                );
                let IntAddr::Std(dst) = &info.dst else {
                    unreachable!()
                };
                assert_eq!(tx.account, dst.address, "{id}: imported by another account");
                if message.init.is_some() {
                    deploys += 1;
                }
                imports += 1;
                let dequeued = out_msgs.get(hash).unwrap();
                if src == shard {
                    assert!(
                        matches!(dequeued, Some((_, OutMsg::DequeueImmediate(_)))),
                        "{id}: an own message {hash} is not dequeued"
                    );
                    dequeues += 1;
                } else {
                    assert!(
                        dequeued.is_none(),
                        "{id}: a foreign import {hash} in OutMsgDescr"
                    );
                }
            }
            assert_eq!(
                imported, due,
                "{id}: imports differ from what the queue owes it"
            );

            // New messages: created here by their source, listed in the diff, owed to their destination.
            let mut exported_value = 0u128;
            let mut created = BTreeSet::new();
            for entry in out_msgs.iter() {
                let (hash, exported, out_msg) = entry.unwrap();
                let OutMsg::New(new_msg) = out_msg else {
                    continue;
                };
                let envelope = new_msg.load_out_msg_envelope().unwrap();
                let message = envelope.load_message().unwrap();
                let MsgInfo::Int(info) = &message.info else {
                    panic!("{id}: a new message that is not internal")
                };
                assert_eq!(
                    chain_of(&info.src),
                    shard,
                    "{id}: {hash} has a foreign source"
                );
                let tx = new_msg.transaction.load().unwrap();
                assert!(
                    tx.out_msgs
                        .values()
                        .any(|m| *m.unwrap().repr_hash() == hash),
                    "{id}: {hash} is not an out message of its transaction"
                );
                let value = info.value.tokens.into_inner();
                assert_eq!(exported.tokens.into_inner(), value);
                exported_value += value;
                created.insert(hash);
                owed.entry(chain_of(&info.dst))
                    .or_default()
                    .insert((info.created_lt, hash), shard);
            }
            let listed: BTreeSet<HashBytes> = diff.messages.iter().copied().collect();
            assert_eq!(
                created, listed,
                "{id}: the diff lists other messages than OutMsg::New"
            );

            // Values.
            let flow = block.load_value_flow().unwrap();
            assert!(
                flow.validate().unwrap(),
                "{id}: the value flow does not balance"
            );
            assert_eq!(
                flow.from_prev_block, old.total_balance,
                "{id}: from_prev_block"
            );
            assert_eq!(flow.to_next_block, new.total_balance, "{id}: to_next_block");
            assert_eq!(
                flow.imported.tokens.into_inner(),
                imported_value,
                "{id}: imported"
            );
            assert_eq!(
                flow.exported.tokens.into_inner(),
                exported_value,
                "{id}: exported"
            );
            let accounts = new.load_accounts().unwrap();
            assert_eq!(
                accounts.root_extra().balance,
                new.total_balance,
                "{id}: the state's balance is not its accounts' sum"
            );

            // Accounts and their transactions.
            let expected = if shard.is_masterchain() {
                mc_base_accounts + accounts_per_chain
            } else {
                (DEPLOYS_PER_MC_BLOCK * (group.mc.seqno as usize - 1)).min(accounts_per_chain)
            };
            assert_eq!(
                accounts.keys().count(),
                expected,
                "{id}: accounts in the state"
            );
            for entry in account_blocks.iter() {
                let (address, _, account_block) = entry.unwrap();
                let (_, shard_account) = accounts.get(address).unwrap().unwrap();
                let update = account_block.state_update.load().unwrap();
                assert_eq!(
                    *shard_account.account.inner().repr_hash(),
                    update.new,
                    "{id}: account {address} does not end as its account block says"
                );
                let mut last = (HashBytes::ZERO, 0u64);
                for tx in account_block.transactions.iter() {
                    let (lt, _, tx) = tx.unwrap();
                    let cell = tx.inner().clone();
                    let tx: Transaction = tx.load().unwrap();
                    assert_eq!(tx.lt, lt);
                    let prev = last_tx.get(&address).copied().unwrap_or_default();
                    assert_eq!(
                        (tx.prev_trans_hash, tx.prev_trans_lt),
                        prev,
                        "{id}: a transaction of {address} does not follow its last one"
                    );
                    last = (*cell.repr_hash(), lt);
                    last_tx.insert(address, last);
                }
                assert_eq!(
                    (shard_account.last_trans_hash, shard_account.last_trans_lt),
                    last,
                    "{id}: account {address} names another last transaction"
                );
                assert!(shard_account.load_account().unwrap().is_some());
            }
            assert_eq!(*new_root.repr_hash(), update.new_hash);
            states.insert(shard, new_root);
        }
    }
    (imports, dequeues, deploys)
}

#[test]
fn blocks_import_what_the_queue_owes_them_and_their_values_balance() {
    let options = ChainOptions {
        mc_blocks: 24,
        shape: ChainShape {
            shards: 2,
            messages: 7,
            message_bytes: 40,
            key_block_every: 8,
            rotate_every: 2,
            ..small().shape
        },
        ..small()
    };
    let (imports, dequeues, deploys) = follow_and_check(&options);
    assert_eq!(deploys, 32, "mc block 1 deploys every shard account");
    assert!(dequeues > 0, "no block dequeued a message of its own shard");
    assert!(imports > 24 * 7, "only {imports} imports");
}

/// One account per chain: it sends every message of its shard and receives every one sent to its chain.
#[test]
fn a_chain_of_one_account_per_chain_balances() {
    let options = ChainOptions {
        mc_blocks: 6,
        shape: ChainShape {
            messages: 4,
            key_block_every: 3,
            accounts: 1,
            ..small().shape
        },
        ..small()
    };
    let (imports, _, deploys) = follow_and_check(&options);
    assert_eq!(deploys, 2);
    assert!(imports >= deploys + 4 * 2 * 4, "only {imports} imports");
}

/// More accounts than one mc block deploys: mc blocks 1, 2 and 3 deploy them in batches, the shard blocks
/// send from and to deployed accounts only, and every block passes the checks of [`follow_and_check`].
#[test]
fn accounts_beyond_one_mc_block_are_deployed_over_several_and_every_block_balances() {
    let accounts = 2 * DEPLOYS_PER_MC_BLOCK + 300;
    let options = ChainOptions {
        mc_blocks: 6,
        shape: ChainShape {
            shards: 2,
            messages: 40,
            message_bytes: 40,
            key_block_every: 4,
            rotate_every: 2,
            accounts: accounts as u32,
            ..small().shape
        },
        ..small()
    };
    let (imports, dequeues, deploys) = follow_and_check(&options);
    assert_eq!(deploys, 2 * accounts, "every shard account is deployed");
    assert!(dequeues > 0, "no block dequeued a message of its own shard");
    // The deployments, and the messages of the shard blocks of mc blocks 2..=5.
    assert!(imports >= deploys + 4 * 2 * 40, "only {imports} imports");
}
