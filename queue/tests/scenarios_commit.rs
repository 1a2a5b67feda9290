//! queue.md §10 scenarios 16–29: zones, commit, clear-uncommitted and node start.

mod common;

use std::collections::BTreeMap;

use common::*;
use regolith_formats::HashBytes;
use regolith_queue::{DiffZone, MessageQueue, MessageValue, QueueError, QueueKey};

fn two_mc_diffs(q: &Q) -> (QueueKey, QueueKey) {
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
    (max1, max2)
}

#[test]
fn s16_zones_follow_the_commit_pointer() {
    let env = Env::new();
    let q = env.q();
    two_mc_diffs(q);
    assert!(q.diff_info(MC, 1, DiffZone::Committed).unwrap().is_none());
    assert!(q.diff_info(MC, 1, DiffZone::Uncommitted).unwrap().is_some());
    assert!(q.diff_info(MC, 1, DiffZone::Both).unwrap().is_some());
    apply(q, SH, 1, msgs([5], &b1(), &b2()), None).unwrap();
    q.commit(&[top(mc_block(1), true, 1)], &[0, 1]).unwrap();
    assert!(q.diff_info(MC, 1, DiffZone::Committed).unwrap().is_some());
    assert!(q.diff_info(MC, 1, DiffZone::Uncommitted).unwrap().is_none());
    assert!(q.diff_info(MC, 2, DiffZone::Committed).unwrap().is_none());
    assert!(q.diff_info(MC, 2, DiffZone::Uncommitted).unwrap().is_some());
    // SH has no pointer: everything Uncommitted.
    assert!(q.diff_info(SH, 1, DiffZone::Committed).unwrap().is_none());
    assert!(q.diff_info(SH, 1, DiffZone::Uncommitted).unwrap().is_some());
}

#[test]
fn s17_interleaved_shards_commit_together() {
    let env = Env::new();
    let q = env.q();
    let u = Some(DiffZone::Uncommitted);
    apply(q, SH, 1, msgs(1..=100, &b1(), &m1()), u).unwrap();
    apply(q, MC, 3, msgs(101..=200, &m2(), &m1()), u).unwrap();
    apply(q, SH, 2, msgs(201..=300, &b1(), &m1()), u).unwrap();
    apply(q, MC, 4, msgs(301..=400, &m2(), &m1()), u).unwrap();
    let stats = q.statistics(&[1], &[full(SH), full(MC)]).unwrap();
    assert_eq!(stats, [(ra(&m1()), 400)].into());
    let it = q.create_iterator(MC, 1, &[full(SH), full(MC)]).unwrap();
    let items = collect(it);
    assert_eq!(items.len(), 400);
    for (i, (src, m)) in items.iter().enumerate() {
        let lt = i as u64 + 1;
        assert_eq!(m.key().lt, lt);
        let expected = if (1..=100).contains(&lt) || (201..=300).contains(&lt) {
            SH
        } else {
            MC
        };
        assert_eq!(*src, expected, "lt {lt}");
    }
    q.commit(
        &[top(mc_block(4), true, 4), top(block(SH, 2), true, 4)],
        &[0, 1],
    )
    .unwrap();
    for (shard, seqno) in [(SH, 1), (MC, 3), (SH, 2), (MC, 4)] {
        assert!(q
            .diff_info(shard, seqno, DiffZone::Committed)
            .unwrap()
            .is_some());
        assert!(q
            .diff_info(shard, seqno, DiffZone::Uncommitted)
            .unwrap()
            .is_none());
    }
}

#[test]
fn s18_commit_touches_only_listed_shards_and_persists() {
    let mut env = Env::new();
    {
        let q = env.q();
        apply(q, MC, 1, msgs([1], &m1(), &m2()), None).unwrap();
        apply(q, sh2(), 1, msgs([2], &b1(), &b2()), None).unwrap();
        apply(q, MC, 2, msgs([3], &m1(), &m2()), None).unwrap();
        apply(q, SH, 1, msgs([4], &b1(), &b2()), None).unwrap();
        q.commit(
            &[top(mc_block(1), true, 1), top(block(sh2(), 1), true, 1)],
            &[0, 1],
        )
        .unwrap();
    }
    let sh2_pointer = |env: &Env| {
        env.dump()
            .into_iter()
            .find(|(t, k, _)| t == POINTERS && k[4..] == sh2().prefix().to_be_bytes())
            .unwrap()
    };
    let before = sh2_pointer(&env);
    env.q()
        .commit(
            &[top(mc_block(2), true, 2), top(block(SH, 1), true, 2)],
            &[0, 1],
        )
        .unwrap();
    env.reopen();
    let q = env.q();
    let pointers = q.commit_pointers().unwrap();
    let mc2 = q.diff_info(MC, 2, DiffZone::Both).unwrap().unwrap();
    let sh1 = q.diff_info(SH, 1, DiffZone::Both).unwrap().unwrap();
    assert_eq!(
        (pointers[&MC].queue_key, pointers[&MC].seqno),
        (mc2.max_message, 2)
    );
    assert_eq!(
        (pointers[&SH].queue_key, pointers[&SH].seqno),
        (sh1.max_message, 1)
    );
    assert_eq!(q.last_committed_mc_block().unwrap(), Some(mc_block(2)));
    assert_eq!(sh2_pointer(&env), before);
    assert_eq!(pointers.len(), 3);
}

#[test]
fn s19_last_committed_mc_block() {
    let env = Env::new();
    let q = env.q();
    assert_eq!(q.last_committed_mc_block().unwrap(), None);
    apply(q, MC, 1, msgs([1], &m1(), &m2()), None).unwrap();
    assert_eq!(q.last_committed_mc_block().unwrap(), None);
    q.commit(&[top(mc_block(1), true, 1)], &[0, 1]).unwrap();
    assert_eq!(q.last_committed_mc_block().unwrap(), Some(mc_block(1)));
    apply(q, MC, 2, msgs([2], &m1(), &m2()), Some(DiffZone::Committed)).unwrap();
    q.commit(&[top(mc_block(2), true, 2)], &[0, 1]).unwrap();
    assert_eq!(q.last_committed_mc_block().unwrap(), Some(mc_block(2)));
}

#[test]
fn s20_repeated_or_older_commit_is_a_no_op() {
    let env = Env::new();
    let q = env.q();
    apply_pt(
        q,
        MC,
        1,
        msgs([1], &m1(), &m2()),
        [(SH, QueueKey::max_for_lt(3))].into(),
        None,
    )
    .unwrap();
    apply_pt(
        q,
        MC,
        2,
        msgs([2], &m1(), &m2()),
        [(SH, QueueKey::max_for_lt(5))].into(),
        None,
    )
    .unwrap();
    q.commit(&[top(mc_block(2), true, 2)], &[0, 1]).unwrap();
    let dump = env.dump();
    let bounds = q.gc_delete_until();
    assert_eq!(bounds[&0][&SH], QueueKey::max_for_lt(5));
    q.commit(&[top(mc_block(2), true, 2)], &[0, 1]).unwrap();
    q.commit(&[top(mc_block(1), true, 1)], &[0, 1]).unwrap();
    assert_eq!(env.dump(), dump);
    assert_eq!(q.gc_delete_until(), bounds);
}

#[test]
fn s21_commit_errors_write_nothing() {
    let env = Env::new();
    let q = env.q();
    apply(q, MC, 1, msgs([1], &m1(), &m2()), None).unwrap();
    apply(q, MC, 2, msgs([2], &m1(), &m2()), None).unwrap();
    apply(q, SH, 1, msgs([3], &b1(), &b2()), None).unwrap();
    apply(q, SH, 2, msgs([4], &b1(), &b2()), None).unwrap();
    let before = env.dump();
    assert!(matches!(
        q.commit(&[top(block(SH, 1), true, 1)], &[0, 1]),
        Err(QueueError::NoMasterchainBlock)
    ));
    assert!(matches!(
        q.commit(
            &[top(mc_block(1), true, 1), top(block(SH, 1), true, 1), top(block(SH, 2), true, 1)],
            &[0, 1]
        ),
        Err(QueueError::DuplicateShard(s)) if s == SH
    ));
    assert_eq!(env.dump(), before);
    q.commit(
        &[top(mc_block(1), true, 1), top(block(SH, 2), true, 1)],
        &[0, 1],
    )
    .unwrap();
    let committed = env.dump();
    assert!(matches!(
        q.commit(&[top(mc_block(2), true, 2), top(block(SH, 1), true, 2)], &[0, 1]),
        Err(QueueError::PointerRegression { shard, .. }) if shard == SH
    ));
    assert_eq!(env.dump(), committed);
}

#[test]
fn s22_missing_diffs() {
    let env = Env::new();
    let q = env.q();
    apply(q, MC, 1, msgs([1], &m1(), &m2()), None).unwrap();
    apply(q, MC, 2, msgs([2], &m1(), &m2()), None).unwrap();
    let before = env.dump();
    assert!(matches!(
        q.commit(
            &[top(mc_block(1), true, 1), top(block(SH, 5), true, 3)],
            &[0, 1]
        ),
        Err(QueueError::DiffNotFound {
            ref_by_mc_seqno: 3,
            zerostate_seqno: 0,
            ..
        })
    ));
    assert_eq!(env.dump(), before);
    q.commit(
        &[top(mc_block(1), true, 1), top(block(SH, 5), false, 3)],
        &[0, 1],
    )
    .unwrap();
    assert!(!q.commit_pointers().unwrap().contains_key(&SH));
    assert!(q.gc_delete_until().values().all(|m| !m.contains_key(&SH)));
    q.commit(
        &[top(mc_block(2), true, 2), top(block(SH, 5), true, 0)],
        &[0, 1],
    )
    .unwrap();
    assert!(!q.commit_pointers().unwrap().contains_key(&SH));
    assert_eq!(q.last_committed_mc_block().unwrap(), Some(mc_block(2)));
}

#[test]
fn s23_gc_bound_is_the_minimum_processed_to() {
    let env = Env::new();
    let q = env.q();
    let k500 = QueueKey::max_for_lt(500);
    let k300 = QueueKey::max_for_lt(300);
    let k7 = QueueKey::max_for_lt(7);
    apply_pt(q, MC, 1, msgs([1], &m1(), &m2()), [(SH, k500)].into(), None).unwrap();
    apply_pt(
        q,
        SH,
        1,
        msgs([2], &b1(), &b2()),
        [(SH, k300), (MC, k7)].into(),
        None,
    )
    .unwrap();
    apply_pt(q, sh2(), 1, msgs([3], &b1(), &b2()), BTreeMap::new(), None).unwrap();
    q.commit(
        &[
            top(mc_block(1), true, 1),
            top(block(SH, 1), true, 1),
            top(block(sh2(), 1), true, 1),
            // Skipped (no record, not updated): contributes nothing.
            top(
                block(
                    regolith_formats::ShardIdent::new(0, 0xc000_0000_0000_0000).unwrap(),
                    4,
                ),
                false,
                1,
            ),
        ],
        &[0, 1],
    )
    .unwrap();
    let bounds = q.gc_delete_until();
    for p in [0, 1] {
        assert_eq!(bounds[&p][&SH], k300);
        assert_eq!(bounds[&p][&MC], k7);
        assert_eq!(bounds[&p].len(), 2);
    }
    assert_eq!(bounds.len(), 2);
}

#[test]
fn s24_clear_without_pointers_removes_everything() {
    let env = Env::new();
    let q = env.q();
    apply(q, SH, 0, msgs([1], &b2(), &b1()), None).unwrap();
    q.clear_uncommitted(&[0, 1], &[MC, SH]).unwrap();
    assert!(collect(q.create_iterator(SH, 0, &[full(SH)]).unwrap()).is_empty());
    assert!(q.diff_info(SH, 0, DiffZone::Both).unwrap().is_none());
    assert_eq!(q.diffs_tail_len(SH, &QueueKey::MIN).unwrap(), 0);
    assert!(q.statistics(&[0, 1], &[full(SH)]).unwrap().is_empty());
    assert!(env.dump().is_empty());
}

#[test]
fn s25_clear_above_the_pointer() {
    let env = Env::new();
    let q = env.q();
    let (max1, _) = two_mc_diffs(q);
    assert_eq!(q.diffs_tail_len(MC, &QueueKey::MIN).unwrap(), 2);
    q.commit(&[top(mc_block(1), true, 1)], &[0, 1]).unwrap();
    assert_eq!(q.diffs_tail_len(MC, &QueueKey::MIN).unwrap(), 2);
    assert_eq!(q.diffs_tail_len(MC, &max1).unwrap(), 1);
    let mc1_before: Vec<_> = env
        .dump()
        .into_iter()
        .filter(|(t, k, _)| (t == INFO && k[12..] == 1u32.to_be_bytes()) || t == POINTERS)
        .collect();
    q.clear_uncommitted(&[0, 1], &[MC]).unwrap();
    assert!(q.diff_info(MC, 2, DiffZone::Both).unwrap().is_none());
    assert_eq!(q.diffs_tail_len(MC, &QueueKey::MIN).unwrap(), 1);
    assert_eq!(q.diffs_tail_len(MC, &max1).unwrap(), 0);
    let items = collect(q.create_iterator(MC, 1, &[full(MC)]).unwrap());
    assert_eq!(
        items.iter().map(|(_, m)| m.key().lt).collect::<Vec<_>>(),
        [1, 2]
    );
    assert_eq!(env.count(STATS), 1);
    let mc1_after: Vec<_> = env
        .dump()
        .into_iter()
        .filter(|(t, k, _)| (t == INFO && k[12..] == 1u32.to_be_bytes()) || t == POINTERS)
        .collect();
    assert_eq!(mc1_after, mc1_before);
    assert!(q.diff_info(MC, 1, DiffZone::Committed).unwrap().is_some());
}

#[test]
fn s26_clear_uses_the_callers_shards() {
    let env = Env::new();
    let q = env.q();
    apply(q, SH, 1, msgs([1], &b1(), &b2()), None).unwrap();
    apply(q, sh2(), 1, msgs([2], &b1(), &b2()), None).unwrap();
    let sh2_rows = |env: &Env| {
        env.dump()
            .into_iter()
            .filter(|(t, k, _)| {
                let shard_at = if t == MESSAGES { 2 } else { 0 };
                t != VAR
                    && t != POINTERS
                    && k[shard_at + 4..shard_at + 12] == sh2().prefix().to_be_bytes()
            })
            .collect::<Vec<_>>()
    };
    let before = sh2_rows(&env);
    assert_eq!(before.len(), 4);
    q.clear_uncommitted(&[0, 1], &[SH]).unwrap();
    assert!(q.diff_info(SH, 1, DiffZone::Both).unwrap().is_none());
    assert_eq!(sh2_rows(&env), before);
    let dump = env.dump();
    q.clear_uncommitted(&[0, 1], &[]).unwrap();
    assert_eq!(env.dump(), dump);

    let env = Env::new();
    let q = env.q();
    scenario_15_data(q);
    q.commit(
        &[top(mc_block(1), true, 1), top(block(SH, 1), true, 1)],
        &[0, 1],
    )
    .unwrap();
    let stats = env.count(STATS);
    q.clear_uncommitted(&[0, 1], &[]).unwrap();
    assert_eq!(env.count(STATS), stats);
}

fn scenario_15_data(q: &Q) {
    let mut m = msgs(1..=100, &b1(), &m1());
    m.extend(msgs(101..=150, &b1(), &m2()));
    m.extend(msgs(151..=160, &b2(), &b1()));
    apply(q, SH, 1, m, Some(DiffZone::Both)).unwrap();
    let mut m = msgs(201..=300, &b1(), &m1());
    m.extend(msgs(301..=350, &b1(), &m2()));
    m.extend(msgs(351..=360, &b2(), &b1()));
    apply(q, SH, 2, m, Some(DiffZone::Both)).unwrap();
    apply(q, MC, 1, vec![], Some(DiffZone::Both)).unwrap();
}

#[test]
fn s27_start_check() {
    let env = Env::new();
    let q = env.q();
    q.prepare_for_start(&mc_block(5), &[SH]).unwrap();
    apply(q, MC, 5, msgs([1], &m1(), &m2()), None).unwrap();
    q.commit(&[top(mc_block(5), true, 5)], &[0, 1]).unwrap();
    q.prepare_for_start(&mc_block(5), &[SH]).unwrap();
    q.prepare_for_start(&mc_block(6), &[SH]).unwrap();
    assert!(matches!(
        q.prepare_for_start(&mc_block(4), &[SH]),
        Err(QueueError::QueueAheadOfAppliedState { .. })
    ));
    let mut other = mc_block(5);
    other.root_hash = HashBytes([0xee; 32]);
    assert!(matches!(
        q.prepare_for_start(&other, &[SH]),
        Err(QueueError::QueueAheadOfAppliedState { .. })
    ));
}

#[test]
fn s28_start_clears_uncommitted_diffs() {
    let mut env = Env::new();
    {
        let q = env.q();
        apply(q, MC, 1, vec![], None).unwrap();
        apply(q, SH, 1, msgs([1], &b1(), &b2()), None).unwrap();
        apply(q, SH, 2, msgs([2], &b1(), &m1()), None).unwrap();
        q.commit(
            &[top(mc_block(1), true, 1), top(block(SH, 2), true, 1)],
            &[0, 1],
        )
        .unwrap();
        apply(q, SH, 3, msgs([3, 4], &b1(), &m1()), Some(DiffZone::Both)).unwrap();
        assert!(q.diff_info(SH, 3, DiffZone::Uncommitted).unwrap().is_some());
    }
    env.reopen();
    let q = env.q();
    q.prepare_for_start(&mc_block(1), &[SH]).unwrap();
    assert!(q.diff_info(SH, 3, DiffZone::Both).unwrap().is_none());
    assert_eq!(q.diffs_tail_len(SH, &QueueKey::MIN).unwrap(), 2);
    let lts: Vec<u64> = collect(q.create_iterator(MC, 1, &[full(SH)]).unwrap())
        .iter()
        .map(|(_, m)| m.key().lt)
        .collect();
    assert_eq!(lts, [2]);
    assert_eq!(
        q.statistics(&[0, 1], &[full(SH)])
            .unwrap()
            .values()
            .sum::<u64>(),
        2
    );
    assert!(q.diff_info(SH, 2, DiffZone::Committed).unwrap().is_some());
}

/// Runs the restart scenario; returns the final database contents.
fn restart_run(restart: bool, wrong_first: bool) -> Vec<(String, Vec<u8>, Vec<u8>)> {
    let mut env = Env::new();
    let sh_k1 = || msgs([20, 21], &b1(), &m1());
    {
        let q = env.q();
        apply(q, MC, 1, msgs([1], &m1(), &b1()), None).unwrap();
        apply(q, SH, 1, msgs([2, 3], &b1(), &b2()), None).unwrap();
        q.commit(
            &[top(mc_block(1), true, 1), top(block(SH, 1), true, 1)],
            &[0, 1],
        )
        .unwrap();
        apply(q, MC, 2, msgs([30], &m1(), &b1()), Some(DiffZone::Both)).unwrap();
        let sh2_msgs = if wrong_first {
            msgs([22, 23, 24], &b1(), &b2())
        } else {
            sh_k1()
        };
        apply(q, SH, 2, sh2_msgs, Some(DiffZone::Both)).unwrap();
    }
    if restart {
        env.reopen();
        let q = env.q();
        q.prepare_for_start(&mc_block(2), &[SH]).unwrap();
        apply(q, MC, 2, msgs([30], &m1(), &b1()), None).unwrap();
        apply(q, SH, 2, sh_k1(), None).unwrap();
        // The next ones would use Some(Both); re-applying again is a no-op.
        assert!(!apply(q, SH, 2, sh_k1(), Some(DiffZone::Both)).unwrap());
    }
    let q = env.q();
    q.commit(
        &[top(mc_block(2), true, 2), top(block(SH, 2), true, 2)],
        &[0, 1],
    )
    .unwrap();
    q.clear_uncommitted(&[0, 1], &[MC, SH]).unwrap();
    env.dump()
}

#[test]
fn s29_restart_rebuilds_the_uncommitted_zone() {
    let reference = restart_run(false, false);
    assert_eq!(restart_run(true, false), reference);
    assert_eq!(restart_run(true, true), reference);
}

#[test]
fn commit_batch_failure_is_not_observable() {
    let mut env = Env::new();
    {
        let q = env.q();
        apply_pt(
            q,
            MC,
            1,
            msgs([1], &m1(), &m2()),
            [(SH, QueueKey::max_for_lt(1))].into(),
            None,
        )
        .unwrap();
        apply(q, SH, 1, msgs([2], &b1(), &b2()), None).unwrap();
        let before = env.dump();
        q.storage().db().fail_points.commit_batch.arm();
        assert!(matches!(
            q.commit(
                &[top(mc_block(1), true, 1), top(block(SH, 1), true, 1)],
                &[0, 1]
            ),
            Err(QueueError::Kv(regolith_queue::KvError::Injected(_)))
        ));
        assert!(q.gc_delete_until().is_empty());
        assert_eq!(env.dump(), before);
    }
    env.reopen();
    assert!(env.q().commit_pointers().unwrap().is_empty());
    assert_eq!(env.q().last_committed_mc_block().unwrap(), None);
}

/// Several mc blocks committed in order with one log sync: the same database as one commit after another, and
/// an error stops at its mc block, keeping the commits before it.
#[test]
fn commits_in_order_equal_one_commit_after_another() {
    let fill = |q: &Q| {
        apply(q, MC, 1, msgs([1], &m1(), &m2()), None).unwrap();
        apply(q, SH, 1, msgs([2], &b1(), &b2()), None).unwrap();
        apply(q, MC, 2, msgs([3], &m1(), &m2()), None).unwrap();
        apply(q, MC, 3, msgs([4], &m1(), &m2()), None).unwrap();
    };
    let mc1 = vec![top(mc_block(1), true, 1), top(block(SH, 1), true, 1)];
    let mc2 = vec![top(mc_block(2), true, 2)];
    let mc3 = vec![top(mc_block(3), true, 3)];

    let one_by_one = Env::new();
    fill(one_by_one.q());
    for entries in [&mc1, &mc2, &mc3] {
        one_by_one.q().commit(entries, &[0, 1]).unwrap();
    }
    let mut in_order = Env::new();
    fill(in_order.q());
    in_order
        .q()
        .commit_in_order(&[mc1.clone(), mc2.clone(), mc3.clone()], &[0, 1])
        .unwrap();
    assert_eq!(in_order.dump(), one_by_one.dump());
    assert_eq!(
        in_order.q().gc_delete_until(),
        one_by_one.q().gc_delete_until()
    );
    in_order.reopen();
    assert_eq!(
        in_order.dump(),
        one_by_one.dump(),
        "durable across a reopen"
    );

    // The second of three has no mc block: the first stays committed, the third is not committed.
    let stopped = Env::new();
    let q = stopped.q();
    fill(q);
    let err = q.commit_in_order(&[mc1, vec![top(block(SH, 1), true, 2)], mc3], &[0, 1]);
    assert!(
        matches!(err, Err(QueueError::NoMasterchainBlock)),
        "{err:?}"
    );
    assert_eq!(q.last_committed_mc_block().unwrap(), Some(mc_block(1)));
    assert!(q.diff_info(MC, 3, DiffZone::Uncommitted).unwrap().is_some());
}

#[test]
fn a_second_open_of_a_held_queue_is_locked() {
    let env = Env::new();
    let err = regolith_queue::QueueStorage::open(&env.data_dir())
        .err()
        .expect("a second open while the first is held must fail");
    assert!(err.is_locked(), "{err:?}");
}
