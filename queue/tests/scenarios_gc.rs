//! queue.md §10 scenarios 30–36: the delete primitive, GC ticks, and the config section.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use regolith_queue::{
    DeleteRange, DiffZone, EnqueuedMessage, MessageQueue, MessageValue, PartitionRouter,
    QueueConfig, QueueDiffWithMessages, QueueFactory, QueueKey, QueueStorage,
};

/// SH 1, 2, 3 with lt 1..10, 11..20, 21..30, alternating p0 (odd → B1) and p1 (even → M1).
fn three_diffs(q: &Q) -> Vec<QueueKey> {
    let mut keys = vec![QueueKey::MIN];
    for seqno in 1..=3u64 {
        let mut ms = Vec::new();
        for lt in (seqno - 1) * 10 + 1..=seqno * 10 {
            let dst = if lt % 2 == 1 { b1() } else { m1() };
            let m = msg(lt, &b2(), &dst);
            keys.push(m.key());
            ms.push(m);
        }
        apply(q, SH, seqno as u32, ms, Some(DiffZone::Both)).unwrap();
    }
    keys
}

fn all_lts(q: &Q) -> Vec<u64> {
    let mut lts: Vec<u64> = Vec::new();
    for p in [0, 1] {
        for for_shard in [SH, MC] {
            lts.extend(
                collect(q.create_iterator(for_shard, p, &[full(SH)]).unwrap())
                    .iter()
                    .map(|(_, m)| m.key().lt),
            );
        }
    }
    lts.sort();
    lts
}

fn commit_bound(q: &Q, mc_seqno: u32, bound: QueueKey) {
    apply_pt(q, MC, mc_seqno, vec![], [(SH, bound)].into(), None).unwrap();
    q.commit(&[top(mc_block(mc_seqno), true, mc_seqno)], &[0, 1])
        .unwrap();
}

fn scenario_30(env: &Env) -> Vec<QueueKey> {
    let q = env.q();
    let keys = three_diffs(q);
    let k15 = keys[15];
    apply_pt(q, MC, 1, vec![], [(SH, k15)].into(), None).unwrap();
    // SH 3 is a top block too; its processed_to is empty, so it does not constrain SH.
    q.commit(
        &[top(mc_block(1), true, 1), top(block(SH, 3), true, 1)],
        &[0, 1],
    )
    .unwrap();
    keys
}

#[test]
fn s30_gc_tick_deletes_up_to_the_bound() {
    let env = Env::new();
    let keys = scenario_30(&env);
    let q = env.q();
    // SH 3's own record has an empty processed_to, so the bound comes from MC 1 alone.
    assert_eq!(q.gc_delete_until()[&0][&SH], keys[15]);
    let report = q.run_gc_tick().unwrap();
    assert_eq!(report.deleted.len(), 2);
    assert!(report.failed.is_empty());
    assert_eq!(all_lts(q), (16..=30).collect::<Vec<_>>());
    assert!(q.diff_info(SH, 1, DiffZone::Both).unwrap().is_none());
    assert!(q.diff_info(SH, 2, DiffZone::Both).unwrap().is_some());
    assert_eq!(q.diffs_tail_len(SH, &QueueKey::MIN).unwrap(), 2);
    let sep = q.separated_statistics(&[0, 1], &full(SH)).unwrap();
    for p in [0, 1] {
        assert_eq!(sep[&p].len(), 2, "SH 2 and SH 3 keep their rows in p{p}");
        assert!(!sep[&p].contains_key(&keys[10]));
    }
}

#[test]
fn s31_gc_acts_only_on_growth() {
    let env = Env::new();
    let keys = scenario_30(&env);
    let q = env.q();
    q.run_gc_tick().unwrap();
    let after_first = env.dump();
    commit_bound(q, 2, keys[10]);
    let report = q.run_gc_tick().unwrap();
    assert!(report.deleted.is_empty());
    assert_eq!(report.skipped, 2);
    let bulk = |d: Vec<(String, Vec<u8>, Vec<u8>)>| {
        d.into_iter()
            .filter(|(t, _, _)| t == MESSAGES || t == STATS)
            .collect::<Vec<_>>()
    };
    assert_eq!(bulk(env.dump()), bulk(after_first));
    assert_eq!(all_lts(q), (16..=30).collect::<Vec<_>>());
    commit_bound(q, 3, keys[15]);
    let report = q.run_gc_tick().unwrap();
    assert!(report.deleted.is_empty());
    assert_eq!(report.skipped, 2);
    assert_eq!(all_lts(q), (16..=30).collect::<Vec<_>>());
}

#[test]
fn s32_failed_delete_is_covered_by_the_next_bound() {
    let env = Env::new();
    let keys = scenario_30(&env);
    let q = env.q();
    q.storage().db().fail_points.delete_batch.arm();
    let report = q.run_gc_tick().unwrap();
    assert_eq!(report.failed.len() + report.deleted.len(), 2);
    assert_eq!(report.failed.len(), 1);
    commit_bound(q, 2, keys[25]);
    let report = q.run_gc_tick().unwrap();
    assert_eq!(report.deleted.len(), 2);
    assert_eq!(all_lts(q), (26..=30).collect::<Vec<_>>());
    // A panic inside a tick is caught; the next tick still runs.
    q.storage().db().fail_points.gc_tick_panic.arm();
    assert!(q.run_gc_tick().is_some());
    commit_bound(q, 3, keys[30]);
    assert_eq!(q.run_gc_tick().unwrap().deleted.len(), 2);
    assert!(all_lts(q).is_empty());
}

#[test]
fn s32_gc_task_survives_a_panicking_tick() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let storage = QueueStorage::open(dir.path()).unwrap();
    let config = QueueConfig {
        gc_interval: Duration::from_millis(50),
    };
    let q: Q = runtime.block_on(async {
        QueueFactory::new(storage.clone(), zerostate(), config)
            .create()
            .unwrap()
    });
    let keys = three_diffs(&q);
    storage.db().fail_points.gc_tick_panic.arm();
    // Liveness guard only (no timing assertion): wait until a tick consumed the injected panic.
    let wait = |cond: &dyn Fn() -> bool| {
        for _ in 0..600 {
            if cond() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    };
    assert!(wait(&|| !storage.db().fail_points.gc_tick_panic.is_armed()));
    commit_bound(&q, 1, keys[15]);
    assert!(wait(&|| all_lts(&q) == (16..=30).collect::<Vec<_>>()));
    drop(q);
    drop(runtime);
}

/// Deviation from queue.md §5.5 (the issue asks for it): the bounds are stored with the commit, so a
/// restarted queue collects at once; `done` is not stored, so the first tick deletes from MIN again.
#[test]
fn s33_bounds_survive_a_restart_and_the_first_tick_deletes_from_min() {
    let mut env = Env::new();
    let keys = scenario_30(&env);
    let before = env.q().gc_delete_until();
    assert_eq!(before[&1][&SH], keys[15]);
    env.reopen();
    let q = env.q();
    assert_eq!(q.gc_delete_until(), before);
    let report = q.run_gc_tick().unwrap();
    assert_eq!(report.deleted.len(), 2);
    assert_eq!(all_lts(q), (16..=30).collect::<Vec<_>>());
    // Again after a tick: `done` starts empty, the range from MIN is deleted again (nothing left in it).
    env.reopen();
    let q = env.q();
    let report = q.run_gc_tick().unwrap();
    assert_eq!(report.deleted.len(), 2);
    assert!(report.failed.is_empty());
    commit_bound(q, 2, keys[20]);
    let report = q.run_gc_tick().unwrap();
    assert_eq!(report.deleted.len(), 2);
    assert_eq!(all_lts(q), (21..=30).collect::<Vec<_>>());
    assert!(q.diff_info(SH, 2, DiffZone::Both).unwrap().is_none());
    env.reopen();
    assert_eq!(env.q().gc_delete_until()[&0][&SH], keys[20]);
}

#[test]
fn s34_seqno_zero_record_is_deleted() {
    let env = Env::new();
    let q = env.q();
    apply(q, SH, 0, msgs(1..=5, &b2(), &b1()), None).unwrap();
    commit_bound(q, 1, QueueKey::max_for_lt(10));
    q.run_gc_tick().unwrap();
    assert!(q.diff_info(SH, 0, DiffZone::Both).unwrap().is_none());
    assert_eq!(env.count(TAIL), 1, "only MC 1's tail entry is left");
    assert_eq!(env.count(INFO), 1);
}

fn two_dest_diff(env: &Env) -> QueueKey {
    let q = env.q();
    let ms: Vec<EnqueuedMessage> = vec![msg(1, &b2(), &m1()), msg(2, &b2(), &b1())];
    let diff = QueueDiffWithMessages::new(ms, BTreeMap::new(), PartitionRouter::new());
    let stats = stats_of(&diff, SH);
    q.apply_diff(
        &diff,
        short(SH, 1),
        &tl_hash(&diff, &stats, 1),
        &stats,
        None,
    )
    .unwrap();
    assert_eq!(env.count(STATS), 2);
    stats.max_message
}

#[test]
fn s35_statistics_rows_removed_at_both_range_ends() {
    for at_end in [true, false] {
        let env = Env::new();
        let max = two_dest_diff(&env);
        let (from, to) = if at_end {
            (QueueKey::MIN, max)
        } else {
            (max, QueueKey::MAX)
        };
        env.q()
            .storage()
            .delete_ranges(&[DeleteRange {
                partition: 0,
                shard: SH,
                from,
                to,
            }])
            .unwrap();
        assert_eq!(env.count(STATS), 0, "at_end = {at_end}");
        assert_eq!(env.count(TAIL), 0);
        assert_eq!(env.count(INFO), 0);
    }
}

#[test]
fn s36_config_section() {
    #[derive(serde::Deserialize)]
    struct NodeConfig {
        #[serde(default)]
        internal_queue: QueueConfig,
    }
    let parse =
        |s: &str| serde_json::from_str::<NodeConfig>(s).map(|c| c.internal_queue.gc_interval);
    assert_eq!(parse("{}").unwrap(), Duration::from_secs(5));
    assert_eq!(
        parse(r#"{"internal_queue": {}}"#).unwrap(),
        Duration::from_secs(5)
    );
    assert_eq!(
        parse(r#"{"internal_queue": {"gc_interval": "500ms"}}"#).unwrap(),
        Duration::from_millis(500)
    );
    assert!(parse(r#"{"internal_queue": {"gc_interval": "0s"}}"#).is_err());
    let zero = QueueConfig {
        gc_interval: Duration::ZERO,
    };
    let dir = tempfile::tempdir().unwrap();
    let storage = QueueStorage::open(dir.path()).unwrap();
    assert!(QueueFactory::new(storage, zerostate(), zero)
        .create_without_gc::<EnqueuedMessage>()
        .is_err());
}
