//! queue.md §10 scenarios 1–15: keys, router, formats and apply.

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;

use common::*;
use regolith_formats::queue_diff::{QueueDiff, RouterPartition};
use regolith_formats::HashBytes;
use regolith_queue::tables::{Codec, MessageKey};
use regolith_queue::{
    BoundedShardRange, DiffInfo, DiffStatistics, DiffZone, MessageQueue, MessageValue,
    PartitionRouter, QueueError, QueueKey, RouterAddr, RouterHalf,
};
use regolith_test_support::{fixture_bytes, hash_from_hex};

#[test]
fn s01_next_value() {
    let h = |tail: &[u8]| {
        let mut b = [0u8; 32];
        b[32 - tail.len()..].copy_from_slice(tail);
        HashBytes(b)
    };
    assert_eq!(
        QueueKey::new(5, h(&[])).next_value(),
        QueueKey::new(5, h(&[1]))
    );
    assert_eq!(
        QueueKey::new(5, h(&[0xff])).next_value(),
        QueueKey::new(5, h(&[1, 0]))
    );
    assert_eq!(
        QueueKey::max_for_lt(5).next_value(),
        QueueKey::min_for_lt(6)
    );
    assert_eq!(QueueKey::MAX.next_value(), QueueKey::MAX);
    assert!(QueueKey::max_for_lt(1) < QueueKey::min_for_lt(2));
}

#[test]
fn s02_router_lookups_and_inserts() {
    let mut r = PartitionRouter::new();
    r.insert_dst(&m1(), 1).unwrap();
    r.insert_src(&b1(), 2).unwrap();
    assert_eq!(r.lookup(&b2(), &m1()), 1);
    assert_eq!(r.lookup(&b1(), &b2()), 2);
    assert_eq!(r.lookup(&b1(), &m1()), 1);
    assert_eq!(r.lookup(&b2(), &m2()), 0);
    let var = tycho_types::models::IntAddr::Var(tycho_types::models::VarAddr {
        anycast: None,
        address_len: tycho_types::num::Uint9::new(8),
        workchain: 0,
        address: vec![3],
    });
    assert_eq!(r.lookup(&var, &var), 0);
    assert!(r.insert_dst(&b2(), 0).is_err());
    assert!(r.insert_src(&var, 1).is_err());
}

#[test]
fn s03_duplicated_address_gets_highest_partition() {
    let mut half = RouterHalf::new();
    for p in [1, 2, 3] {
        half.entry(p).or_default().insert(ra(&b1()));
    }
    let r = PartitionRouter::from_halves(&half, &RouterHalf::new());
    assert_eq!(r.lookup(&b1(), &b2()), 3);
    // §5.8 and §5.9 build from the TL layout with the same rule.
    let tl: Vec<RouterPartition> = PartitionRouter::from_halves(&half, &RouterHalf::new())
        .to_tl()
        .0;
    // The TL form of a router built from halves lists B1 once (under 3); build one that lists it thrice.
    assert_eq!(tl.len(), 1);
    let thrice: Vec<RouterPartition> = [1u16, 2, 3]
        .iter()
        .map(|p| RouterPartition {
            index: *p,
            accounts: vec![ra(&b1()).into()],
        })
        .collect();
    assert_eq!(
        PartitionRouter::from_tl(&thrice, &[]).lookup(&b1(), &b2()),
        3
    );
}

#[test]
fn s04_message_key_and_value_layout() {
    let env = Env::new();
    let q = env.q();
    let dest = addr(-1, 0);
    let dest = match dest {
        tycho_types::models::IntAddr::Std(mut a) => {
            a.address.0[..8].copy_from_slice(&[0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88]);
            tycho_types::models::IntAddr::Std(a)
        }
        _ => unreachable!(),
    };
    let mut router = PartitionRouter::new();
    router.insert_dst(&dest, 1).unwrap();
    let m = msg(0x0102030405060708, &b1(), &dest);
    let diff = regolith_queue::QueueDiffWithMessages::new([m.clone()], BTreeMap::new(), router);
    let stats = stats_of(&diff, SH);
    q.apply_diff(&diff, short(SH, 1), &HashBytes([1; 32]), &stats, None)
        .unwrap();
    let rows: Vec<_> = env
        .dump()
        .into_iter()
        .filter(|(t, _, _)| t == MESSAGES)
        .collect();
    assert_eq!(rows.len(), 1);
    let (_, key, value) = &rows[0];
    let mut expected = vec![
        0x00, 0x01, 0, 0, 0, 0, 0x80, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8,
    ];
    expected.extend_from_slice(&m.key().hash.0);
    assert_eq!(key, &expected);
    assert_eq!(key.len(), 54);
    assert_eq!(
        &value[..9],
        &[0xff, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11]
    );
    // The pure layout with the spec's hash aa×32.
    let k = MessageKey {
        partition: 1,
        shard: SH,
        key: QueueKey::new(0x0102030405060708, HashBytes([0xaa; 32])),
    };
    let mut expected = vec![
        0x00, 0x01, 0, 0, 0, 0, 0x80, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8,
    ];
    expected.extend_from_slice(&[0xaa; 32]);
    assert_eq!(k.encode().to_vec(), expected);
}

#[test]
fn s05_diff_info_round_trip_and_count_limit() {
    let info = DiffInfo {
        min_message: QueueKey::min_for_lt(1),
        max_message: QueueKey::max_for_lt(2),
        shards_messages_count: [(SH, 3), (MC, 4), (sh2(), 5)].into(),
        hash: HashBytes([7; 32]),
        processed_to: [(MC, QueueKey::max_for_lt(1))].into(),
        router_src: vec![],
        router_dst: router_r().to_tl().1,
        seqno: 9,
    };
    let bytes = info.encode();
    assert_eq!(DiffInfo::decode(&bytes).unwrap(), info);
    assert_eq!(info.encode(), bytes, "deterministic bytes");
    // Sorted by shard: MC (−1) first, then 0:4000…, then 0:8000….
    let shard_at =
        |i: usize| i32::from_le_bytes(bytes[84 + 20 * i..88 + 20 * i].try_into().unwrap());
    assert_eq!((shard_at(0), shard_at(1), shard_at(2)), (-1, 0, 0));
    let mut bad = bytes.clone();
    bad[80..84].copy_from_slice(&10_000_001u32.to_le_bytes());
    assert!(matches!(
        DiffInfo::decode(&bad),
        Err(QueueError::InvalidData { .. })
    ));
}

#[test]
fn s06_first_block_queue_diff_fixture() {
    let raw = fixture_bytes("first_block_queue_diff.bin");
    assert_eq!(raw.len(), 252);
    let d = QueueDiff::parse(&raw).unwrap();
    assert_eq!(u32::from_le_bytes(raw[..4].try_into().unwrap()), 0x6020a3b2);
    assert_eq!(d.prev_hash, HashBytes::ZERO);
    assert_eq!((d.shard, d.seqno), (MC, 1));
    assert_eq!(d.processed_to.len(), 2);
    assert_eq!((d.processed_to[0].0, d.processed_to[0].1.lt), (MC, 0));
    assert_eq!((d.processed_to[1].0, d.processed_to[1].1.lt), (SH, 1000001));
    assert_eq!(QueueKey::from(d.min_message), QueueKey::min_for_lt(2000000));
    assert_eq!(QueueKey::from(d.max_message), QueueKey::max_for_lt(2000004));
    assert!(
        d.messages.is_empty()
            && d.router_partitions_src.is_empty()
            && d.router_partitions_dst.is_empty()
    );
    assert_eq!(d.to_bytes(), raw);
    assert_eq!(
        d.compute_hash(),
        hash_from_hex("7a4b22a73454e3ca511f5a6a3af6befd52d6a61b66ae5f7a5077c5b309ebc68a")
    );
}

#[test]
fn s07_bad_tl_inputs_rejected() {
    use regolith_formats::queue_state::{QueueState, QueueStateHeader};
    let raw = fixture_bytes("first_block_queue_diff.bin");
    let base = QueueDiff::parse(&raw).unwrap();
    let rejects =
        |d: &QueueDiff, what: &str| assert!(QueueDiff::parse(&d.to_bytes()).is_err(), "{what}");

    let mut d = base.clone();
    d.processed_to.reverse();
    rejects(&d, "processed_to not ascending");
    let mut d = base.clone();
    d.processed_to = (0..1001u64)
        .map(|i| {
            (
                regolith_formats::ShardIdent::new(0, (i * 2 + 1) << 40).unwrap(),
                d.min_message,
            )
        })
        .collect();
    rejects(&d, "> 1000 processed_to");
    let mut d = base.clone();
    std::mem::swap(&mut d.min_message, &mut d.max_message);
    rejects(&d, "max < min");
    let mut d = base.clone();
    d.messages = vec![HashBytes([2; 32]), HashBytes([1; 32])];
    rejects(&d, "hashes not ascending");
    d.messages = vec![HashBytes::ZERO];
    rejects(&d, "all-zero hash");
    let mut d = base.clone();
    d.router_partitions_dst = vec![
        RouterPartition {
            index: 2,
            accounts: vec![],
        },
        RouterPartition {
            index: 1,
            accounts: vec![],
        },
    ];
    rejects(&d, "partitions not ascending");
    let mut d = base.clone();
    d.router_partitions_src = vec![RouterPartition {
        index: 1,
        accounts: vec![ra(&b2()).into(), ra(&b1()).into()],
    }];
    rejects(&d, "accounts not ascending");
    // Partition index > 65535 and workchain outside i8 need raw bytes.
    let mut d = base.clone();
    d.router_partitions_dst = vec![RouterPartition {
        index: 7,
        accounts: vec![ra(&b1()).into()],
    }];
    let bytes = d.to_bytes();
    assert!(QueueDiff::parse(&bytes).is_ok());
    let idx_at = bytes.len() - (4 + 4 + 36);
    let mut bad = bytes.clone();
    bad[idx_at..idx_at + 4].copy_from_slice(&65536u32.to_le_bytes());
    assert!(QueueDiff::parse(&bad).is_err(), "partition index > 65535");
    let mut bad = bytes.clone();
    bad[idx_at + 8..idx_at + 12].copy_from_slice(&200i32.to_le_bytes());
    assert!(QueueDiff::parse(&bad).is_err(), "workchain outside i8");
    let mut bad = raw.clone();
    bad[0] ^= 0xff;
    assert!(QueueDiff::parse(&bad).is_err(), "wrong id");
    let mut bad = raw.clone();
    bad.push(0);
    assert!(QueueDiff::parse(&bad).is_err(), "trailing bytes");
    assert!(
        QueueDiff::parse_for_block(&raw, &mc_block(2)).is_err(),
        "seqno ≠ block"
    );
    assert!(
        QueueDiff::parse_for_block(&raw, &block(SH, 1)).is_err(),
        "shard ≠ block"
    );
    // Headers: 0 diffs, 1001 diffs, ascending seqnos, broken chain.
    assert!(QueueStateHeader::new(MC, 1, vec![]).is_err());
    assert!(QueueStateHeader::new(MC, 1, vec![base.clone(); 1001]).is_err());
    let mut older = base.clone();
    older.seqno = 2;
    assert!(QueueStateHeader::new(MC, 1, vec![base.clone(), older.clone()]).is_err());
    let mut newer = base.clone();
    newer.seqno = 2;
    assert!(
        QueueStateHeader::new(MC, 2, vec![newer.clone(), base.clone()]).is_err(),
        "chain"
    );
    newer.prev_hash = base.compute_hash();
    assert!(QueueStateHeader::new(MC, 2, vec![newer, base.clone()]).is_ok());
    // bigBytes > 100 MiB.
    let header = QueueStateHeader::new(MC, 1, vec![base.clone()]).unwrap();
    let mut state = 0x3664d9ccu32.to_le_bytes().to_vec();
    header.write(&mut state);
    state.extend_from_slice(&1u32.to_le_bytes());
    state.extend_from_slice(&((100u32 << 20) + 1).to_le_bytes());
    assert!(QueueState::parse(&state).is_err(), "bigBytes > 100 MiB");
}

#[test]
fn s08_apply_routes_and_records() {
    let env = Env::new();
    let q = env.q();
    let pt: BTreeMap<_, _> = [(MC, QueueKey::max_for_lt(0))].into();
    let m1msg = msg(1, &b1(), &m1());
    let m2msg = msg(2, &b1(), &b2());
    let diff = diff_of(vec![m1msg.clone(), m2msg.clone()], pt.clone());
    let stats = stats_of(&diff, SH);
    let hash = tl_hash(&diff, &stats, 1);
    assert!(q
        .apply_diff(&diff, short(SH, 1), &hash, &stats, Some(DiffZone::Both))
        .unwrap());

    let dump = env.dump();
    let messages: Vec<_> = dump.iter().filter(|(t, _, _)| t == MESSAGES).collect();
    assert_eq!(messages.len(), 2);
    let k1 = MessageKey::decode(&messages[0].1).unwrap();
    let k2 = MessageKey::decode(&messages[1].1).unwrap();
    assert_eq!((k1.partition, k1.key), (0, m2msg.key()));
    assert_eq!((k2.partition, k2.key), (1, m1msg.key()));

    let max = m2msg.key();
    let full_range = BoundedShardRange::new(SH, Bound::Included(max), Bound::Included(max));
    let p1 = q.statistics(&[1], &[full_range]).unwrap();
    assert_eq!(p1, [(ra(&m1()), 1)].into());
    let p0 = q.statistics(&[0], &[full_range]).unwrap();
    assert_eq!(p0, [(ra(&b2()), 1)].into());
    assert_eq!(q.diffs_tail_len(SH, &QueueKey::MIN).unwrap(), 1);

    let info = q.diff_info(SH, 1, DiffZone::Both).unwrap().unwrap();
    assert_eq!(info.hash, hash);
    assert_eq!(info.processed_to, pt);
    assert_eq!(info.max_message, max);
    assert_eq!(info.seqno, 1);
    let dst: RouterHalf = [(1, [ra(&m1()), ra(&m2())].into())].into();
    assert_eq!(
        PartitionRouter::from_tl(&info.router_src, &info.router_dst).dst_half(),
        dst
    );
    assert!(info.router_src.is_empty());
    assert_eq!(info.shards_messages_count, [(MC, 1), (SH, 1)].into());
}

#[test]
fn s09_reapply_same_hash_is_none_other_hash_fails() {
    let env = Env::new();
    let q = env.q();
    let diff = diff_of(
        vec![msg(1, &b1(), &m1()), msg(2, &b1(), &b2())],
        BTreeMap::new(),
    );
    let stats = stats_of(&diff, SH);
    let hash = tl_hash(&diff, &stats, 1);
    assert!(q
        .apply_diff(&diff, short(SH, 1), &hash, &stats, None)
        .unwrap());
    let before = env.dump();
    assert!(q
        .prepare_diff(&diff, short(SH, 1), &hash, &stats, None)
        .unwrap()
        .is_none());
    assert!(!q
        .apply_diff(&diff, short(SH, 1), &hash, &stats, Some(DiffZone::Both))
        .unwrap());
    assert_eq!(env.dump(), before);
    let err = q
        .apply_diff(&diff, short(SH, 1), &HashBytes([9; 32]), &stats, None)
        .unwrap_err();
    assert!(
        matches!(err, QueueError::DuplicateDiffHashMismatch { .. }),
        "{err}"
    );
    assert_eq!(env.dump(), before);
}

#[test]
fn s10_continuity_checks() {
    let env = Env::new();
    let q = env.q();
    apply(q, SH, 1, msgs([1], &b1(), &b2()), None).unwrap();
    apply(q, SH, 2, msgs([2], &b1(), &b2()), Some(DiffZone::Both)).unwrap();
    let before = env.dump();
    assert!(!apply(q, SH, 0, msgs([100], &b1(), &b2()), Some(DiffZone::Both)).unwrap());
    assert!(matches!(
        apply(q, SH, 4, msgs([4], &b1(), &b2()), Some(DiffZone::Both)),
        Err(QueueError::NonSequentialSeqno {
            new: 4,
            last: 2,
            ..
        })
    ));
    assert!(matches!(
        apply(
            q,
            SH,
            4,
            msgs([4], &b1(), &b2()),
            Some(DiffZone::Uncommitted)
        ),
        Err(QueueError::NonSequentialSeqno {
            new: 4,
            last: 2,
            ..
        })
    ));
    assert_eq!(env.dump(), before);
    assert!(apply(q, SH, 3, msgs([3], &b1(), &b2()), Some(DiffZone::Both)).unwrap());
    assert_eq!(q.last_applied_seqno(SH).unwrap(), Some(3));
}

#[test]
fn s11_no_continuity_check_outside_zone() {
    let env = Env::new();
    let q = env.q();
    apply(q, SH, 1, msgs([1], &b1(), &b2()), None).unwrap();
    apply(q, SH, 2, msgs([2], &b1(), &b2()), None).unwrap();
    apply(q, MC, 1, msgs([3], &m1(), &m2()), None).unwrap();
    q.commit(
        &[top(mc_block(1), true, 1), top(block(SH, 2), true, 1)],
        &[0, 1],
    )
    .unwrap();
    assert!(apply(
        q,
        SH,
        7,
        msgs([7], &b1(), &b2()),
        Some(DiffZone::Uncommitted)
    )
    .unwrap());
    assert!(apply(q, SH, 9, msgs([9], &b1(), &b2()), None).unwrap());
    assert!(q.diff_info(SH, 7, DiffZone::Both).unwrap().is_some());
    assert!(q.diff_info(SH, 9, DiffZone::Both).unwrap().is_some());
}

#[test]
fn s12_below_commit_pointer() {
    let env = Env::new();
    let q = env.q();
    // A diff whose statistics max is (100, ff…): commit it so the SH pointer is at (100, ff…).
    let diff = diff_of(msgs([99], &b1(), &b2()), BTreeMap::new());
    let mut stats = stats_of(&diff, SH);
    stats.max_message = QueueKey::max_for_lt(100);
    q.apply_diff(&diff, short(SH, 1), &HashBytes([1; 32]), &stats, None)
        .unwrap();
    apply(q, MC, 1, vec![], None).unwrap();
    q.commit(
        &[top(mc_block(1), true, 1), top(block(SH, 1), true, 1)],
        &[0, 1],
    )
    .unwrap();
    assert_eq!(
        q.commit_pointers().unwrap()[&SH].queue_key,
        QueueKey::max_for_lt(100)
    );
    let before = env.dump();
    assert!(matches!(
        apply(q, SH, 2, msgs([100], &b1(), &b2()), None),
        Err(QueueError::BelowCommitPointer { .. })
    ));
    assert_eq!(env.dump(), before);
    assert!(apply(q, SH, 2, msgs([101], &b1(), &b2()), None).unwrap());
    // An empty diff with a synthetic min below the pointer is never rejected here.
    let empty = diff_of(vec![], BTreeMap::new());
    let mut stats = DiffStatistics::for_collated(&empty, SH, 50, 150);
    stats.min_message = QueueKey::min_for_lt(50);
    assert!(q
        .apply_diff(
            &empty,
            short(SH, 3),
            &tl_hash(&empty, &stats, 3),
            &stats,
            None
        )
        .unwrap());
}

#[test]
fn s13_consistency_checks_write_nothing() {
    let env = Env::new();
    let q = env.q();
    apply(q, SH, 1, msgs([1, 2], &b1(), &b2()), None).unwrap();
    let before = env.dump();

    let var = tycho_types::models::IntAddr::Var(tycho_types::models::VarAddr {
        anycast: None,
        address_len: tycho_types::num::Uint9::new(8),
        workchain: 0,
        address: vec![3],
    });
    let diff = diff_of(
        vec![msg(10, &b1(), &b2()), msg(11, &b1(), &var)],
        BTreeMap::new(),
    );
    let stats = stats_of(&diff, SH);
    assert!(matches!(
        q.apply_diff(&diff, short(SH, 2), &HashBytes([2; 32]), &stats, None),
        Err(QueueError::NonStdDestination { .. })
    ));
    assert_eq!(env.dump(), before);

    let diff = diff_of(msgs([10], &b1(), &b2()), BTreeMap::new());
    let stats = stats_of(&diff, sh2());
    assert!(matches!(
        q.apply_diff(&diff, short(SH, 2), &HashBytes([2; 32]), &stats, None),
        Err(QueueError::ShardMismatch { .. })
    ));
    assert_eq!(env.dump(), before);

    let first = q.diff_info(SH, 1, DiffZone::Both).unwrap().unwrap();
    let diff = diff_of(msgs([10], &b1(), &b2()), BTreeMap::new());
    let mut stats = stats_of(&diff, SH);
    stats.max_message = first.max_message;
    assert!(matches!(
        q.apply_diff(&diff, short(SH, 2), &HashBytes([2; 32]), &stats, None),
        Err(QueueError::MaxMessageCollision { .. })
    ));
    assert_eq!(env.dump(), before);
}

#[test]
fn s14_dropped_pending_diff_writes_nothing() {
    let env = Env::new();
    let q = env.q();
    let diff = diff_of(msgs([1, 2], &b1(), &m1()), BTreeMap::new());
    let stats = stats_of(&diff, SH);
    let hash = tl_hash(&diff, &stats, 1);
    let pending = q
        .prepare_diff(&diff, short(SH, 1), &hash, &stats, Some(DiffZone::Both))
        .unwrap()
        .unwrap();
    assert_eq!(pending.message_count(), 2);
    drop(pending);
    assert!(env.dump().is_empty());
    let pending = q
        .prepare_diff(&diff, short(SH, 1), &hash, &stats, Some(DiffZone::Both))
        .unwrap()
        .unwrap();
    pending.write().unwrap();
    assert!(q.diff_exists(short(SH, 1)).unwrap());
}

/// Scenario 15's data: SH 1, SH 2 and an empty MC 1.
pub fn scenario_15(q: &Q) {
    let mut m = msgs(1..=10000, &b1(), &m1());
    m.extend(msgs(10001..=15000, &b1(), &m2()));
    m.extend(msgs(15001..=16000, &b2(), &b1()));
    apply(q, SH, 1, m, Some(DiffZone::Both)).unwrap();
    let mut m = msgs(20001..=30000, &b1(), &m1());
    m.extend(msgs(30001..=35000, &b1(), &m2()));
    m.extend(msgs(35001..=36000, &b2(), &b1()));
    apply(q, SH, 2, m, Some(DiffZone::Both)).unwrap();
    assert!(apply(q, MC, 1, vec![], Some(DiffZone::Both)).unwrap());
}

#[test]
fn s15_statistics_over_two_diffs() {
    let env = Env::new();
    let q = env.q();
    scenario_15(q);
    let p1 = q.statistics(&[1], &[full(SH)]).unwrap();
    assert_eq!(p1, [(ra(&m1()), 20000), (ra(&m2()), 10000)].into());
    let p0 = q.statistics(&[0], &[full(SH)]).unwrap();
    assert_eq!(p0, [(ra(&b1()), 2000)].into());
    let sep = q.separated_statistics(&[1], &full(SH)).unwrap();
    let per_diff: Vec<_> = sep[&1].values().cloned().collect();
    assert_eq!(per_diff.len(), 2);
    for d in per_diff {
        assert_eq!(d, [(ra(&m1()), 10000), (ra(&m2()), 5000)].into());
    }
    let info = q.diff_info(SH, 1, DiffZone::Both).unwrap().unwrap();
    assert_eq!(info.shards_messages_count, [(MC, 15000), (SH, 1000)].into());
    assert!(q.diff_exists(short(MC, 1)).unwrap());
    let _ = RouterAddr::MIN;
}
