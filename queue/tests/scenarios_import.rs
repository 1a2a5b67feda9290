//! queue.md §10 scenarios 44–52: network diffs, queue-state import, concurrency and storage layout.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use common::*;
use regolith_formats::archive::{ArchiveEntryType, ArchiveReader};
use regolith_formats::queue_diff::{QueueDiff, RouterPartition};
use regolith_formats::{BlockId, HashBytes};
use regolith_queue::{
    diff_from_block, diff_from_out_msgs, DiffZone, ImportFailure, MessageQueue, MessageValue,
    QueueError, QueueKey, QueueStorage,
};
use regolith_test_support::{archive_1_path, fixture_bytes, hash_from_hex};
use tycho_types::boc::BocRepr;
use tycho_types::cell::{Cell, CellFamily, Lazy};
use tycho_types::models::{
    Block, CurrencyCollection, IntermediateAddr, MsgEnvelope, OutMsg, OutMsgDescr, OutMsgExternal,
    OutMsgNew,
};
use tycho_types::num::Tokens;

fn out_msg_new(cell: &Cell) -> OutMsg {
    let envelope = MsgEnvelope {
        cur_addr: IntermediateAddr::FULL_SRC_SAME_WORKCHAIN,
        next_addr: IntermediateAddr::FULL_DEST_SAME_WORKCHAIN,
        fwd_fee_remaining: Tokens::ZERO,
        message: Lazy::from_raw(cell.clone()).unwrap(),
    };
    OutMsg::New(OutMsgNew {
        out_msg_envelope: Lazy::new(&envelope).unwrap(),
        transaction: Lazy::from_raw(Cell::empty_cell()).unwrap(),
    })
}

#[test]
fn s44_diff_from_out_msg_descr() {
    let cells: Vec<Cell> = (1..=3)
        .map(|lt| msg_cell(lt * 10, &b1(), &b2(), 0))
        .collect();
    let mut descr = OutMsgDescr::new();
    for c in &cells {
        descr
            .set(*c.repr_hash(), CurrencyCollection::ZERO, out_msg_new(c))
            .unwrap();
    }
    let mut hashes: Vec<HashBytes> = cells.iter().map(|c| *c.repr_hash()).collect();
    hashes.sort();
    let src: Vec<RouterPartition> = [1u16, 2, 3]
        .iter()
        .map(|p| RouterPartition {
            index: *p,
            accounts: vec![ra(&b1()).into()],
        })
        .collect();
    let tl = QueueDiff {
        prev_hash: HashBytes::ZERO,
        shard: SH,
        seqno: 1,
        processed_to: vec![(MC, QueueKey::max_for_lt(5).into())],
        min_message: QueueKey::min_for_lt(10).into(),
        max_message: QueueKey::max_for_lt(30).into(),
        messages: hashes.clone(),
        router_partitions_src: src,
        router_partitions_dst: vec![],
    };
    let bytes = tl.to_bytes();
    let hash = tl.compute_hash();
    let id = block(SH, 1);
    let built = diff_from_out_msgs(&id, &hash, &descr, &bytes).unwrap();
    assert_eq!(built.hash, hash);
    assert_eq!(
        built.diff.processed_to,
        [(MC, QueueKey::max_for_lt(5))].into()
    );
    assert_eq!(built.diff.router.lookup(&b1(), &b2()), 3);
    let lts: Vec<u64> = built.diff.messages.values().map(|m| m.key().lt).collect();
    assert_eq!(lts, [10, 20, 30]);
    assert_eq!(
        built.statistics.counts,
        [(3, [(ra(&b2()), 3)].into())].into()
    );
    assert_eq!(built.statistics.max_message, QueueKey::max_for_lt(30));

    // A listed hash absent from OutMsgDescr.
    let mut partial = OutMsgDescr::new();
    for c in &cells[..2] {
        partial
            .set(*c.repr_hash(), CurrencyCollection::ZERO, out_msg_new(c))
            .unwrap();
    }
    assert!(matches!(
        diff_from_out_msgs(&id, &hash, &partial, &bytes),
        Err(QueueError::InvalidData { .. })
    ));
    // A non-New entry.
    let mut wrong = OutMsgDescr::new();
    for (i, c) in cells.iter().enumerate() {
        let entry = if i == 1 {
            OutMsg::External(OutMsgExternal {
                out_msg: Lazy::from_raw(c.clone()).unwrap(),
                transaction: Lazy::from_raw(Cell::empty_cell()).unwrap(),
            })
        } else {
            out_msg_new(c)
        };
        wrong
            .set(*c.repr_hash(), CurrencyCollection::ZERO, entry)
            .unwrap();
    }
    assert!(matches!(
        diff_from_out_msgs(&id, &hash, &wrong, &bytes),
        Err(QueueError::InvalidData { .. })
    ));
    // A hash that does not match the block's diff_hash.
    assert!(diff_from_out_msgs(&id, &HashBytes([1; 32]), &descr, &bytes).is_err());
    // A diff for another block.
    assert!(diff_from_out_msgs(&block(SH, 2), &hash, &descr, &bytes).is_err());
}

fn archive_mc_block_1() -> (BlockId, Block, Vec<u8>) {
    let file = std::fs::File::open(archive_1_path()).unwrap();
    let reader = ArchiveReader::new_compressed(file).unwrap();
    let mut block = None;
    let mut diff = None;
    for entry in reader {
        let entry = entry.unwrap();
        if entry.block_id.shard.is_masterchain() && entry.block_id.seqno == 1 {
            match entry.ty {
                ArchiveEntryType::Block => block = Some((entry.block_id, entry.data)),
                ArchiveEntryType::QueueDiff => diff = Some(entry.data),
                ArchiveEntryType::Proof => {}
            }
        }
    }
    let (id, data) = block.unwrap();
    let diff = diff.unwrap();
    assert_eq!(diff, fixture_bytes("first_block_queue_diff.bin"));
    (id, BocRepr::decode::<Block, _>(&data).unwrap(), diff)
}

#[test]
fn s45_network_block_diff_applies_and_commits() {
    let env = Env::new();
    let q = env.q();
    let (id, block, tl) = archive_mc_block_1();
    // Without the block body: fails, writes nothing.
    assert!(matches!(
        diff_from_block(&id, None, &tl),
        Err(QueueError::InvalidData { .. })
    ));
    assert!(env.dump().is_empty());

    let built = diff_from_block(&id, Some(&block), &tl).unwrap();
    assert!(built.diff.messages.is_empty());
    assert!(built.diff.router.is_empty());
    let expected =
        hash_from_hex("7a4b22a73454e3ca511f5a6a3af6befd52d6a61b66ae5f7a5077c5b309ebc68a");
    assert_eq!(built.hash, expected);
    assert!(q
        .apply_diff(
            &built.diff,
            short(MC, 1),
            &built.hash,
            &built.statistics,
            None
        )
        .unwrap());
    let record = q.diff_info(MC, 1, DiffZone::Both).unwrap().unwrap();
    assert_eq!(record.min_message, QueueKey::min_for_lt(2000000));
    assert_eq!(record.max_message, QueueKey::max_for_lt(2000004));
    assert_eq!(record.hash, expected);
    q.commit(&[top(id, true, 1)], &[0, 1]).unwrap();
    let ptr = q.commit_pointers().unwrap()[&MC];
    assert_eq!(
        (ptr.queue_key, ptr.seqno),
        (QueueKey::max_for_lt(2000004), 1)
    );
    let bounds = q.gc_delete_until();
    for p in [0, 1] {
        assert_eq!(bounds[&p][&MC], QueueKey::max_for_lt(0));
        assert_eq!(bounds[&p][&SH], QueueKey::max_for_lt(1000001));
    }
    assert_eq!(q.last_committed_mc_block().unwrap(), Some(id));
}

#[test]
fn s45_block_diff_hash_mismatch_is_rejected() {
    let (id, block, tl) = archive_mc_block_1();
    let mut other = QueueDiff::parse(&tl).unwrap();
    other.processed_to.clear();
    assert!(matches!(
        diff_from_block(&id, Some(&block), &other.to_bytes()),
        Err(QueueError::InvalidData { .. })
    ));
    let mut wrong_id = id;
    wrong_id.seqno = 2;
    assert!(diff_from_block(&wrong_id, Some(&block), &tl).is_err());
}

fn shard_state() -> (BlockId, HashBytes, Vec<u8>) {
    (
        block(SH, 160),
        hash_from_hex("794fe9ce31b7919d2b6ca9ae0f97501f4017382a273b8f3ee512dcfcb5b14482"),
        fixture_bytes("queue_state/shard.bin"),
    )
}

fn master_state() -> (BlockId, HashBytes, Vec<u8>) {
    (
        mc_block(90),
        hash_from_hex("5795ca5d1b8d0c1ce96394eef851bde718ff2e14fd2840098ed2bb7640f278c5"),
        fixture_bytes("queue_state/master.bin"),
    )
}

#[test]
fn s46_import_shard_state() {
    let env = Env::new();
    let q = env.q();
    let (id, hash, data) = shard_state();
    let summary = q
        .storage()
        .import_queue_state(&id, &hash, 3, &data)
        .unwrap();
    assert_eq!((summary.diffs, summary.messages), (3, 4300));
    let r160 = q.diff_info(SH, 160, DiffZone::Both).unwrap().unwrap();
    let r159 = q.diff_info(SH, 159, DiffZone::Both).unwrap().unwrap();
    let r158 = q.diff_info(SH, 158, DiffZone::Both).unwrap().unwrap();
    assert_eq!(r160.hash, hash);
    assert!(r159.hash.to_string().starts_with("7fc2c921"));
    assert!(r158.hash.to_string().starts_with("94d9626f"));
    assert_eq!(q.last_applied_seqno(SH).unwrap(), Some(160));
    let ptr = q.commit_pointers().unwrap()[&SH];
    assert_eq!(ptr.seqno, 160);
    assert_eq!(ptr.queue_key.lt, 249000509);
    assert!(ptr.queue_key.hash.to_string().starts_with("9ea5c06a"));
    assert_eq!(q.last_committed_mc_block().unwrap(), None);
    assert_eq!(q.diffs_tail_len(SH, &QueueKey::MIN).unwrap(), 3);
    assert_eq!(env.count(MESSAGES), 4300);
    assert!(env
        .dump()
        .iter()
        .filter(|(t, _, _)| t == MESSAGES)
        .all(|(_, k, v)| k[..2] == [0, 0] && v[0] == 0));
    assert_eq!(r160.shards_messages_count, [(SH, 4300)].into());
    assert!(r159.shards_messages_count.is_empty() && r158.shards_messages_count.is_empty());
    let p0: u64 = q.statistics(&[0], &[full(SH)]).unwrap().values().sum();
    assert_eq!(p0, 4300);
    let sep: u64 = q.separated_statistics(&[0], &full(SH)).unwrap()[&0]
        .values()
        .flat_map(|m| m.values())
        .sum();
    assert_eq!(sep, 4300);
    let items = collect(q.create_iterator(SH, 0, &[full(SH)]).unwrap());
    assert_eq!(items.len(), 4300);
    assert!(items.windows(2).all(|w| w[0].1.key() < w[1].1.key()));
    assert!(collect(q.create_iterator(MC, 0, &[full(SH)]).unwrap()).is_empty());
    for seqno in [158, 159, 160] {
        assert!(q
            .diff_info(SH, seqno, DiffZone::Committed)
            .unwrap()
            .is_some());
    }
    let before = env.dump();
    q.clear_uncommitted(&[0, 1], &[SH]).unwrap();
    assert_eq!(env.dump(), before);
    // Validation-only use writes nothing.
    let fresh = Env::new();
    let summary = fresh
        .q()
        .storage()
        .validate_queue_state(&id, &hash, 3, &data)
        .unwrap();
    assert_eq!(summary.messages, 4300);
    assert!(fresh.dump().is_empty());
}

#[test]
fn s47_import_master_then_shard() {
    let env = Env::new();
    let q = env.q();
    let (id, hash, data) = master_state();
    q.storage()
        .import_queue_state(&id, &hash, 1, &data)
        .unwrap();
    let record = q.diff_info(MC, 90, DiffZone::Both).unwrap().unwrap();
    assert_eq!(env.count(MESSAGES), 0);
    assert_eq!(
        record.processed_to,
        [
            (MC, QueueKey::max_for_lt(246000004)),
            (SH, QueueKey::max_for_lt(249001091))
        ]
        .into()
    );
    let ptr = q.commit_pointers().unwrap()[&MC];
    assert_eq!(
        (ptr.queue_key, ptr.seqno),
        (QueueKey::max_for_lt(250000004), 90)
    );
    assert_eq!(q.diffs_tail_len(MC, &QueueKey::MIN).unwrap(), 1);
    assert_eq!(q.last_committed_mc_block().unwrap(), Some(id));
    let (sid, shash, sdata) = shard_state();
    q.storage()
        .import_queue_state(&sid, &shash, 3, &sdata)
        .unwrap();
    assert_eq!(q.commit_pointers().unwrap().len(), 2);
    assert_eq!(q.last_committed_mc_block().unwrap(), Some(id));
}

#[test]
fn s48_bad_imports_write_nothing() {
    let env = Env::new();
    let q = env.q();
    let (id, hash, data) = shard_state();
    let storage = q.storage();
    let check = |id: &BlockId, hash: &HashBytes, tail: u32, data: &[u8], what: &str| {
        let err = storage
            .import_queue_state(id, hash, tail, data)
            .unwrap_err();
        assert!(matches!(err, QueueError::Import { .. }), "{what}: {err}");
        assert!(env.dump().is_empty(), "{what}");
        err
    };
    let e = check(&id, &HashBytes([1; 32]), 3, &data, "hash");
    assert!(matches!(
        e,
        QueueError::Import {
            reason: ImportFailure::HashMismatch { .. },
            ..
        }
    ));
    let e = check(&id, &hash, 2, &data, "tail_len");
    assert!(matches!(
        e,
        QueueError::Import {
            reason: ImportFailure::TailLenMismatch { .. },
            ..
        }
    ));
    // One byte flipped inside the chunk data (near the end of the file).
    let mut flipped = data.clone();
    let at = data.len() - 1000;
    flipped[at] ^= 0x01;
    check(&id, &hash, 3, &flipped, "flipped chunk byte");
    check(&id, &hash, 3, &data[..data.len() - 1], "truncated");
    let mut extra = data.clone();
    extra.push(0);
    check(&id, &hash, 3, &extra, "trailing byte");
    check(&block(SH, 161), &hash, 3, &data, "header seqno ≠ block");
    // One root missing or extra: rebuild the chunks with one root fewer / one more.
    let state = regolith_formats::queue_state::QueueState::parse(&data).unwrap();
    let mut roots: Vec<Cell> = Vec::new();
    for chunk in &state.chunks {
        let header = tycho_types::boc::de::BocHeader::decode(
            chunk,
            &tycho_types::boc::de::Options {
                min_roots: None,
                max_roots: Some(10_000),
            },
        )
        .unwrap();
        let cells = header.finalize(Cell::empty_context()).unwrap();
        roots.extend(header.roots().iter().map(|i| cells.get(*i).unwrap()));
    }
    assert_eq!(roots.len(), 4300);
    let rebuild = |roots: &[Cell]| {
        let mut chunks = Vec::new();
        for part in roots.chunks(1000) {
            let mut boc =
                tycho_types::boc::ser::BocHeader::<ahash_state::S>::with_capacity(part.len());
            for r in part {
                boc.add_root(r.as_ref());
            }
            let mut out = Vec::new();
            boc.encode(&mut out);
            chunks.push(out);
        }
        let mut out = Vec::new();
        regolith_formats::queue_state::write_queue_state(&state.header, &chunks, &mut out);
        out
    };
    let same = rebuild(&roots);
    storage.validate_queue_state(&id, &hash, 3, &same).unwrap();
    let e = check(&id, &hash, 3, &rebuild(&roots[..4299]), "one root missing");
    assert!(matches!(
        e,
        QueueError::Import {
            reason: ImportFailure::TooFewMessages { .. },
            ..
        }
    ));
    let mut more = roots.clone();
    more.push(msg_cell(1, &b1(), &b2(), 0));
    let e = check(&id, &hash, 3, &rebuild(&more), "one root extra");
    assert!(matches!(
        e,
        QueueError::Import {
            reason: ImportFailure::TooManyMessages { .. },
            ..
        }
    ));
    // A failing batch write is not observable either.
    storage.db().fail_points.import_batch.arm();
    assert!(storage.import_queue_state(&id, &hash, 3, &data).is_err());
    assert!(env.dump().is_empty());
}

mod ahash_state {
    /// The default hasher state of tycho-types' BOC writer.
    pub(crate) type S = std::collections::hash_map::RandomState;
}

#[test]
fn s49_reimport_is_byte_identical() {
    let env = Env::new();
    let q = env.q();
    let (id, hash, data) = shard_state();
    q.storage()
        .import_queue_state(&id, &hash, 3, &data)
        .unwrap();
    let once = env.dump();
    q.storage()
        .import_queue_state(&id, &hash, 3, &data)
        .unwrap();
    assert_eq!(env.dump(), once);
}

#[test]
fn s50_concurrent_applies() {
    let env = Env::new();
    let q = env.q().clone();
    let diff = diff_of(msgs(1..=200, &b1(), &m1()), BTreeMap::new());
    let stats = stats_of(&diff, SH);
    let hash = tl_hash(&diff, &stats, 1);
    let results: Vec<bool> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let q = q.clone();
                let (diff, stats) = (&diff, &stats);
                s.spawn(move || {
                    q.apply_diff(diff, short(SH, 1), &hash, stats, Some(DiffZone::Both))
                        .unwrap()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(results.iter().filter(|w| **w).count(), 1);

    // SH and SH2 overlap: SH2 applies while an SH handle is alive.
    let sh_diff = diff_of(msgs(300..=301, &b1(), &m1()), BTreeMap::new());
    let sh_stats = stats_of(&sh_diff, SH);
    let pending = q
        .prepare_diff(&sh_diff, short(SH, 2), &HashBytes([2; 32]), &sh_stats, None)
        .unwrap()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let q2 = q.clone();
    let worker = std::thread::spawn(move || {
        apply(&q2, sh2(), 1, msgs([400], &b1(), &m1()), None).unwrap();
        tx.send(()).unwrap();
    });
    // Liveness guard: the SH2 apply completes while the SH handle is still held.
    rx.recv_timeout(Duration::from_secs(60))
        .expect("SH2 apply must not wait for SH");
    pending.write().unwrap();
    worker.join().unwrap();
}

#[test]
fn s51_exclusive_operations_wait_for_pending_diffs() {
    let env = Env::new();
    let q = env.q().clone();
    apply(&q, MC, 1, vec![], None).unwrap();
    let diff = diff_of(msgs([5], &b1(), &m1()), BTreeMap::new());
    let stats = stats_of(&diff, SH);
    let pending = q
        .prepare_diff(&diff, short(SH, 1), &HashBytes([1; 32]), &stats, None)
        .unwrap()
        .unwrap();
    let commit_done = Arc::new(AtomicBool::new(false));
    let clear_done = Arc::new(AtomicBool::new(false));
    let (q1, d1) = (q.clone(), commit_done.clone());
    let t1 = std::thread::spawn(move || {
        q1.commit(
            &[top(mc_block(1), true, 1), top(block(SH, 1), true, 1)],
            &[0, 1],
        )
        .unwrap();
        d1.store(true, Ordering::SeqCst);
    });
    let (q2, d2) = (q.clone(), clear_done.clone());
    let t2 = std::thread::spawn(move || {
        q2.clear_uncommitted(&[0, 1], &[sh2()]).unwrap();
        d2.store(true, Ordering::SeqCst);
    });
    // While the handle is alive neither can finish (a slow machine can only make this pass, never fail).
    std::thread::sleep(Duration::from_millis(300));
    assert!(!commit_done.load(Ordering::SeqCst));
    assert!(!clear_done.load(Ordering::SeqCst));
    pending.write().unwrap();
    t1.join().unwrap();
    t2.join().unwrap();
    // The commit saw the written diff.
    assert!(q.commit_pointers().unwrap().contains_key(&SH));
}

#[test]
fn s52_database_layout() {
    let dir = tempfile::tempdir().unwrap();
    {
        let _storage = QueueStorage::open(dir.path()).unwrap();
    }
    let entries: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(entries, ["int_queue"]);
    let mut cfs =
        rocksdb::DB::list_cf(&rocksdb::Options::default(), dir.path().join("int_queue")).unwrap();
    cfs.sort();
    let mut expected = vec![
        "default",
        "int_msg_commit_pointer",
        "int_msg_diff_info",
        "int_msg_diffs_tail",
        "int_msg_gc_bounds",
        "int_msg_statistics",
        "int_msg_var",
        "shard_int_messages",
    ];
    expected.sort();
    assert_eq!(cfs, expected);
}

#[test]
fn apply_batch_failure_is_not_observable() {
    let mut env = Env::new();
    {
        let q = env.q();
        q.storage().db().fail_points.apply_batch.arm();
        assert!(matches!(
            apply(q, SH, 1, msgs(1..=10, &b1(), &m1()), None),
            Err(QueueError::Kv(regolith_queue::KvError::Injected(_)))
        ));
        assert!(env.dump().is_empty());
    }
    env.reopen();
    assert!(env.dump().is_empty());
    assert!(apply(env.q(), SH, 1, msgs(1..=10, &b1(), &m1()), None).unwrap());
}
