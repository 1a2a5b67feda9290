//! queue.md §10 scenarios 37–43: iterators and queries.

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;

use common::*;
use regolith_queue::tables::{IntMsgStatistics, MessageKey, ShardIntMessages, Table};
use regolith_queue::{
    BoundedShardRange, DiffZone, EnqueuedMessage, MessageQueue, MessageValue, PartitionRouter,
    QueueDiffWithMessages, QueueError, QueueKey, RouterHalf, ShardRange,
};

fn apply_with_router(
    q: &Q,
    shard: regolith_formats::ShardIdent,
    seqno: u32,
    ms: Vec<EnqueuedMessage>,
    router: PartitionRouter,
) {
    let diff = QueueDiffWithMessages::new(ms, BTreeMap::new(), router);
    let stats = stats_of(&diff, shard);
    let hash = tl_hash(&diff, &stats, seqno);
    assert!(q
        .apply_diff(&diff, short(shard, seqno), &hash, &stats, None)
        .unwrap());
}

#[test]
fn s37_merge_across_sources_is_strictly_ascending() {
    let env = Env::new();
    let q = env.q();
    let mut router = PartitionRouter::new();
    router.insert_dst(&m1(), 1).unwrap();
    let mut sh = msgs(1..=10000, &b1(), &m1());
    sh.extend(msgs(20001..=30000, &b1(), &m1()));
    sh.extend(msgs(100000..=150000, &b1(), &m2()));
    apply_with_router(q, SH, 1, sh, router.clone());
    let mut mc = msgs(10001..=20000, &m2(), &m1());
    mc.extend(msgs(200000..=250000, &m2(), &m2()));
    apply_with_router(q, MC, 1, mc, router);

    let items = collect(q.create_iterator(MC, 1, &[full(SH), full(MC)]).unwrap());
    assert_eq!(items.len(), 30000);
    for (i, (src, m)) in items.iter().enumerate() {
        let lt = i as u64 + 1;
        assert_eq!(m.key().lt, lt);
        let expected = if (10001..=20000).contains(&lt) {
            MC
        } else {
            SH
        };
        assert_eq!(*src, expected);
    }
    let sep = q.separated_statistics(&[1], &full(SH)).unwrap();
    let sep_mc = q.separated_statistics(&[1], &full(MC)).unwrap();
    assert_eq!(sep[&1].len() + sep_mc[&1].len(), 2, "2 rows");
    let stats = q.statistics(&[1], &[full(SH), full(MC)]).unwrap();
    assert_eq!(stats, [(ra(&m1()), 30000)].into());
}

fn scenario_15(q: &Q) {
    let mut m = msgs(1..=10000, &b1(), &m1());
    m.extend(msgs(10001..=15000, &b1(), &m2()));
    m.extend(msgs(15001..=16000, &b2(), &b1()));
    apply(q, SH, 1, m, Some(DiffZone::Both)).unwrap();
    let mut m = msgs(20001..=30000, &b1(), &m1());
    m.extend(msgs(30001..=35000, &b1(), &m2()));
    m.extend(msgs(35001..=36000, &b2(), &b1()));
    apply(q, SH, 2, m, Some(DiffZone::Both)).unwrap();
    apply(q, MC, 1, vec![], Some(DiffZone::Both)).unwrap();
}

#[test]
fn s38_bounded_ranges_and_positions() {
    let env = Env::new();
    let q = env.q();
    scenario_15(q);
    let r = BoundedShardRange::new(
        SH,
        Bound::Excluded(QueueKey::max_for_lt(10000)),
        Bound::Included(QueueKey::max_for_lt(15500)),
    );
    assert_eq!(collect(q.create_iterator(MC, 1, &[r]).unwrap()).len(), 5000);
    let r = BoundedShardRange::new(
        SH,
        Bound::Included(QueueKey::MIN),
        Bound::Included(QueueKey::max_for_lt(16000)),
    );
    assert_eq!(collect(q.create_iterator(SH, 0, &[r]).unwrap()).len(), 1000);
    assert_eq!(
        collect(q.create_iterator(MC, 1, &[full(SH)]).unwrap()).len(),
        30000
    );
    assert_eq!(
        collect(q.create_iterator(SH, 0, &[full(SH)]).unwrap()).len(),
        2000
    );
    let mut it = q.create_iterator(SH, 1, &[full(SH)]).unwrap();
    assert!(it.next().is_none());
    let last_p1 = msg(35000, &b1(), &m2()).key();
    assert_eq!(it.current_position()[&SH], last_p1);
}

#[test]
fn s39_skipped_messages_are_not_decoded() {
    let env = Env::new();
    let q = env.q();
    apply(q, SH, 1, msgs(1..=3, &b1(), &m1()), None).unwrap();
    // Corrupt the body of the lt 2 message (to M1), keeping its 9-byte header.
    let db = q.storage().db();
    let (key, value) = env
        .dump()
        .into_iter()
        .filter(|(t, _, _)| t == MESSAGES)
        .nth(1)
        .map(|(_, k, v)| (k, v))
        .unwrap();
    let mut corrupted = value[..9].to_vec();
    corrupted.extend_from_slice(b"garbage");
    let key = <MessageKey as regolith_kv::Codec>::decode(&key).unwrap();
    db.put_raw_value::<ShardIntMessages>(&key, &corrupted)
        .unwrap();
    assert!(collect(q.create_iterator(SH, 1, &[full(SH)]).unwrap()).is_empty());
    let mut it = q.create_iterator(MC, 1, &[full(SH)]).unwrap();
    let mut ok = 0;
    let mut errors = 0;
    while let Some(item) = it.next() {
        match item {
            Ok(_) => ok += 1,
            Err(QueueError::Deserialize {
                source_shard, key, ..
            }) => {
                assert_eq!(source_shard, SH);
                assert_eq!(key.lt, 2);
                errors += 1;
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!((ok, errors), (2, 1));
}

#[test]
fn stored_messages_keep_their_hashes_and_older_plain_bocs_still_read() {
    let env = Env::new();
    let q = env.q();
    let messages: Vec<EnqueuedMessage> = (1..=3)
        .map(|lt| EnqueuedMessage::from_cell(msg_cell(lt, &b1(), &m1(), 100)).unwrap())
        .collect();
    apply(q, SH, 1, messages.clone(), None).unwrap();
    let rows: Vec<(Vec<u8>, Vec<u8>)> = env
        .dump()
        .into_iter()
        .filter(|(t, _, _)| t == MESSAGES)
        .map(|(_, k, v)| (k, v))
        .collect();
    // The stored form: a standard BOC whose body cell (not the root) carries its hash.
    for ((_, value), message) in rows.iter().zip(&messages) {
        let body = &value[9..];
        assert_eq!(body[..4], [0xb5, 0xee, 0x9c, 0x72]);
        let body_hash = message.cell.reference(0).unwrap().repr_hash();
        assert!(body.windows(32).any(|w| w == body_hash.as_slice()));
        assert!(!body
            .windows(32)
            .any(|w| w == message.cell.repr_hash().as_slice()));
        let standard = tycho_types::boc::Boc::decode(body).unwrap();
        assert_eq!(standard.repr_hash(), message.cell.repr_hash());
    }
    let read = collect(q.create_iterator(MC, 1, &[full(SH)]).unwrap());
    let read: Vec<EnqueuedMessage> = read.iter().map(|(_, m)| (**m).clone()).collect();
    assert_eq!(read, messages);
    for (got, want) in read.iter().zip(&messages) {
        assert_eq!(
            got.cell.reference(0).unwrap().repr_hash(),
            want.cell.reference(0).unwrap().repr_hash()
        );
        assert_eq!(got.cell.repr_depth(), want.cell.repr_depth());
    }

    // Rows written before the stored form hold plain BOCs, decoded in full and checked against their key:
    // lt 1 as it was, lt 2 with the BOC of lt 3 (its key names another message); lt 3 stays as stored.
    let db = q.storage().db();
    let key = |raw: &[u8]| <MessageKey as regolith_kv::Codec>::decode(raw).unwrap();
    let plain = |m: &EnqueuedMessage, header: &[u8]| {
        let mut value = header.to_vec();
        value.extend_from_slice(&tycho_types::boc::Boc::encode(&m.cell));
        value
    };
    db.put_raw_value::<ShardIntMessages>(&key(&rows[0].0), &plain(&messages[0], &rows[0].1[..9]))
        .unwrap();
    db.put_raw_value::<ShardIntMessages>(&key(&rows[1].0), &plain(&messages[2], &rows[1].1[..9]))
        .unwrap();
    let mut it = q.create_iterator(MC, 1, &[full(SH)]).unwrap();
    let first = it.next().unwrap().unwrap().1;
    assert_eq!(*first, messages[0]);
    match it.next().unwrap() {
        Err(QueueError::Deserialize { key, reason, .. }) => {
            assert_eq!(key.lt, 2);
            assert!(reason.contains("its key says"), "{reason}");
        }
        other => panic!("a body under another message's key was read: {other:?}"),
    }
    assert_eq!(*it.next().unwrap().unwrap().1, messages[2]);
    assert!(it.next().is_none());
}

#[test]
fn s40_duplicate_iterator_source() {
    let env = Env::new();
    let q = env.q();
    assert!(matches!(
        q.create_iterator(MC, 0, &[full(SH), full(MC), full(SH)]),
        Err(QueueError::DuplicateIteratorSource(s)) if s == SH
    ));
}

#[test]
fn s41_readers_see_their_snapshot() {
    let env = Env::new();
    let q = env.q();
    apply(q, SH, 1, msgs(1..=10, &b1(), &m1()), None).unwrap();
    let it = q.create_iterator(MC, 1, &[full(SH)]).unwrap();
    apply(q, SH, 2, msgs(11..=20, &b1(), &m1()), None).unwrap();
    assert_eq!(collect(it).len(), 10);

    // GC deletes everything under an open iterator.
    let it = q.create_iterator(MC, 1, &[full(SH)]).unwrap();
    apply_pt(q, MC, 1, vec![], [(SH, QueueKey::MAX)].into(), None).unwrap();
    q.commit(
        &[top(mc_block(1), true, 1), top(block(SH, 2), true, 1)],
        &[0, 1],
    )
    .unwrap();
    q.run_gc_tick().unwrap();
    assert!(collect(q.create_iterator(MC, 1, &[full(SH)]).unwrap()).is_empty());
    assert_eq!(collect(it).len(), 20);

    // diff_info during a clear answers from its own snapshot: each answer is a whole record or none.
    apply(q, SH, 3, msgs(21..=2000, &b1(), &m1()), None).unwrap();
    let expected = q.diff_info(SH, 3, DiffZone::Both).unwrap().unwrap();
    std::thread::scope(|s| {
        let reader = s.spawn(|| {
            for _ in 0..200 {
                if let Some(info) = q.diff_info(SH, 3, DiffZone::Uncommitted).unwrap() {
                    assert_eq!(info, expected);
                }
            }
        });
        q.clear_uncommitted(&[0, 1], &[SH]).unwrap();
        reader.join().unwrap();
    });
    assert!(q.diff_info(SH, 3, DiffZone::Both).unwrap().is_none());
}

#[test]
fn s42_statistics_select_whole_diffs_by_max() {
    let env = Env::new();
    let q = env.q();
    apply(q, MC, 1, msgs([1, 2], &m1(), &m2()), None).unwrap();
    apply(q, MC, 2, msgs([3, 4], &m1(), &m2()), None).unwrap();
    let max1 = q
        .diff_info(MC, 1, DiffZone::Both)
        .unwrap()
        .unwrap()
        .max_message;
    let max2 = q
        .diff_info(MC, 2, DiffZone::Both)
        .unwrap()
        .unwrap()
        .max_message;
    let r = BoundedShardRange::new(MC, Bound::Excluded(max1), Bound::Included(max2));
    assert_eq!(q.statistics(&[1], &[r]).unwrap(), [(ra(&m2()), 2)].into());
    let sep = q.separated_statistics(&[1], &r).unwrap();
    assert_eq!(sep[&1].keys().copied().collect::<Vec<_>>(), [max2]);
    let r = BoundedShardRange::new(MC, Bound::Included(QueueKey::MIN), Bound::Excluded(max1));
    assert!(q.statistics(&[0, 1], &[r]).unwrap().is_empty());
    let sep = q.separated_statistics(&[0, 1], &full(MC)).unwrap();
    assert_eq!(sep.len(), 1);
    assert_eq!(sep[&1].keys().copied().collect::<Vec<_>>(), [max1, max2]);
    // Tail length counts max > from only.
    assert_eq!(q.diffs_tail_len(MC, &max1).unwrap(), 1);
    assert_eq!(q.diffs_tail_len(MC, &max2).unwrap(), 0);
    assert_eq!(q.diffs_tail_len(MC, &QueueKey::MAX).unwrap(), 0);
    let _ = ShardRange {
        shard: MC,
        from: QueueKey::MIN,
        to: QueueKey::MAX,
    };
    let _ = IntMsgStatistics::NAME;
}

#[test]
fn s43_router_and_statistics_of_a_written_block() {
    let env = Env::new();
    let q = env.q();
    apply(
        q,
        MC,
        1,
        vec![
            msg(1, &m2(), &m1()),
            msg(2, &m2(), &b1()),
            msg(3, &m2(), &b2()),
        ],
        None,
    )
    .unwrap();
    apply(q, MC, 2, vec![msg(4, &m2(), &b1())], None).unwrap();
    let record = q.diff_info(MC, 1, DiffZone::Both).unwrap().unwrap();
    let (router, stats) = q.router_and_statistics(short(MC, 1), &record, 0).unwrap();
    assert_eq!(router, router_r());
    let dst: RouterHalf = [(1, [ra(&m1()), ra(&m2())].into())].into();
    assert_eq!(router.dst_half(), dst);
    assert_eq!(
        stats.counts,
        [(0, [(ra(&b1()), 1), (ra(&b2()), 1)].into())].into()
    );
    assert_eq!(stats.shards_messages_count, [(SH, 2)].into());
    assert_eq!(
        (stats.min_message, stats.max_message),
        (record.min_message, record.max_message)
    );
    assert_eq!(record.shards_messages_count, [(MC, 1), (SH, 2)].into());
}
