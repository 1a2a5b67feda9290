//! Acceptance scenario 8 of ledger.md §6 and the concurrency rules of §3: concurrent workers applying the
//! same deliveries produce exactly one decision per delivery and the same final state as one worker.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Barrier;

use common::open_unsynced;
use rand::seq::SliceRandom;
use rand::{rngs::StdRng, SeedableRng};
use regolith_ledger::{Decision, Delivery, Ledger, Outcome, OutcomeKind, TransportContext};

const COURSES: u64 = 20;
const EDITIONS: u64 = 10;
const THREADS: usize = 8;
/// Deliveries each thread shuffles among itself; small windows keep all threads on the same deliveries at
/// the same time, which is what makes the races of §3 happen.
const WINDOW: usize = 25;

fn digest_of(course: u64, edition: u64, variant: u8) -> [u8; 32] {
    let mut out = [variant; 32];
    out[..8].copy_from_slice(&course.to_be_bytes());
    out[8..16].copy_from_slice(&edition.to_be_bytes());
    out
}

/// 1 000 deliveries over 20 courses: per course, editions 1..=10 each delivered 4 times (through 3
/// contexts), a conflicting digest for editions 1..=9 and a fifth delivery of edition 10. The highest edition
/// has one digest only, so the final current record does not depend on the order.
fn deliveries() -> Vec<Delivery> {
    let contexts: Vec<TransportContext> = ["ccip", "bridge-a", "bridge-b"]
        .into_iter()
        .map(|transport| TransportContext::new("eth", "0xpublisher", "mirror-17", transport))
        .collect();
    let mut out = Vec::new();
    let mut sequence = 0u64;
    let mut push = |course: u64, edition: u64, variant: u8| {
        sequence += 1;
        let context = contexts[(sequence % 3) as usize].clone();
        let mut delivery = Delivery::new(
            context,
            format!("m-{sequence}"),
            format!("C{course}"),
            edition,
            digest_of(course, edition, variant),
        );
        if sequence.is_multiple_of(2) {
            delivery = delivery.with_sequence(sequence);
        }
        out.push(delivery);
    };
    for course in 0..COURSES {
        for edition in 1..=EDITIONS {
            for _ in 0..4 {
                push(course, edition, 0);
            }
            if edition < EDITIONS {
                push(course, edition, 1);
            }
        }
        push(course, EDITIONS, 0);
    }
    assert_eq!(out.len(), 1000);
    out
}

/// Each thread's order: the deliveries in a shared random order, shuffled again within each window.
fn orders(count: usize, seed: u64) -> Vec<Vec<usize>> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut base: Vec<usize> = (0..count).collect();
    base.shuffle(&mut rng);
    (0..THREADS)
        .map(|_| {
            let mut order = base.clone();
            for window in order.chunks_mut(WINDOW) {
                window.shuffle(&mut rng);
            }
            order
        })
        .collect()
}

/// Runs the threads; returns every outcome per delivery index.
fn run_concurrently(ledger: &Ledger, deliveries: &[Delivery], seed: u64) -> Vec<Vec<Outcome>> {
    let barrier = Barrier::new(THREADS);
    let per_thread: Vec<Vec<(usize, Outcome)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = orders(deliveries.len(), seed)
            .into_iter()
            .map(|order| {
                let barrier = &barrier;
                scope.spawn(move || {
                    barrier.wait();
                    order
                        .into_iter()
                        .map(|index| (index, ledger.apply(&deliveries[index]).unwrap()))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut by_delivery = vec![Vec::new(); deliveries.len()];
    for (index, outcome) in per_thread.into_iter().flatten() {
        by_delivery[index].push(outcome);
    }
    by_delivery
}

/// (course, edition, digest) of every course, sorted by course id.
fn current_state(ledger: &Ledger) -> Vec<(String, u64, [u8; 32])> {
    let mut state: Vec<_> = ledger
        .courses()
        .unwrap()
        .into_iter()
        .map(|c| (c.course, c.edition, c.digest.0))
        .collect();
    state.sort();
    state
}

/// The final current records (course, edition, digest) and the set of recorded delivery keys.
type FinalState = (Vec<(String, u64, [u8; 32])>, BTreeSet<[u8; 32]>);

/// Checks the §6.8 properties of one concurrent run and returns its final state.
fn check_run(seed: u64) -> FinalState {
    let deliveries = deliveries();
    let (_dir, ledger) = open_unsynced();
    let outcomes = run_concurrently(&ledger, &deliveries, seed);

    let mut decided = BTreeMap::new();
    for (index, all) in outcomes.iter().enumerate() {
        assert_eq!(all.len(), THREADS);
        let decisions: Vec<&Outcome> = all
            .iter()
            .filter(|o| o.kind() != OutcomeKind::Duplicate)
            .collect();
        assert_eq!(
            decisions.len(),
            1,
            "delivery {index} was decided {} times: {decisions:?}",
            decisions.len()
        );
        let decision = decisions[0];
        assert!(
            matches!(
                decision.kind(),
                OutcomeKind::Applied
                    | OutcomeKind::AlreadyCurrent
                    | OutcomeKind::Stale
                    | OutcomeKind::Conflict
            ),
            "{decision}"
        );
        for duplicate in all.iter().filter(|o| o.kind() == OutcomeKind::Duplicate) {
            let Decision::Duplicate { original } = duplicate.decision() else {
                unreachable!()
            };
            assert_eq!(
                original.outcome,
                decision.kind(),
                "a duplicate returns the recorded outcome"
            );
        }
        decided.insert(deliveries[index].key(), decision.kind());
    }

    // The database holds exactly those decisions and their effects.
    let export = ledger.export().unwrap();
    assert_eq!(export.deliveries.len(), deliveries.len());
    for processed in &export.deliveries {
        assert_eq!(
            Some(&processed.recorded.outcome),
            decided.get(&processed.delivery_key)
        );
    }
    let count = |kind| decided.values().filter(|k| **k == kind).count();
    assert_eq!(
        export.history.len(),
        count(OutcomeKind::Applied) + count(OutcomeKind::Stale)
    );
    assert_eq!(export.conflicts.len(), count(OutcomeKind::Conflict));
    for entry in &export.history {
        assert_eq!(decided.get(&entry.delivery_key), Some(&entry.outcome));
    }

    // The highest edition wins, whatever the interleaving.
    let state = current_state(&ledger);
    let expected: Vec<_> = (0..COURSES)
        .map(|course| {
            (
                format!("C{course}"),
                EDITIONS,
                digest_of(course, EDITIONS, 0),
            )
        })
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(state, expected);
    for current in &export.courses {
        assert_eq!(
            decided.get(&current.delivery_key),
            Some(&OutcomeKind::Applied)
        );
    }
    let keys = export.deliveries.iter().map(|d| d.delivery_key.0).collect();
    (state, keys)
}

/// Scenario 8: 8 threads apply the same 1 000 deliveries in shuffled orders; two such runs and one
/// single-threaded run end in the identical state.
#[test]
fn s8_eight_threads_same_deliveries_identical_state() {
    let first = check_run(1);
    let second = check_run(2);
    assert_eq!(first, second);

    let (_dir, ledger) = open_unsynced();
    let deliveries = deliveries();
    for delivery in deliveries.iter().rev() {
        ledger.apply(delivery).unwrap();
    }
    let sequential_keys = ledger
        .export()
        .unwrap()
        .deliveries
        .iter()
        .map(|d| d.delivery_key.0)
        .collect();
    assert_eq!(first, (current_state(&ledger), sequential_keys));
}

/// §3: two workers applying the same delivery at once give exactly one `Applied` and one `Duplicate`.
#[test]
fn same_delivery_by_two_workers_applies_once() {
    let (_dir, ledger) = open_unsynced();
    let context = TransportContext::new("eth", "0xpublisher", "mirror-17", "ccip");
    for round in 0..300u64 {
        let delivery = Delivery::new(
            context.clone(),
            format!("m-{round}"),
            format!("C{round}"),
            1,
            [1; 32],
        );
        let barrier = Barrier::new(2);
        let mut kinds: Vec<OutcomeKind> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..2)
                .map(|_| {
                    scope.spawn(|| {
                        barrier.wait();
                        ledger.apply(&delivery).unwrap().kind()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        kinds.sort();
        assert_eq!(
            kinds,
            vec![OutcomeKind::Applied, OutcomeKind::Duplicate],
            "round {round}"
        );
    }
}

/// §3: two different editions applied at once leave the higher one current.
#[test]
fn concurrent_editions_leave_the_higher_current() {
    let (_dir, ledger) = open_unsynced();
    let context = TransportContext::new("eth", "0xpublisher", "mirror-17", "ccip");
    for round in 0..300u64 {
        let course = format!("C{round}");
        let low = Delivery::new(
            context.clone(),
            format!("low-{round}"),
            course.clone(),
            2,
            [2; 32],
        );
        let high = Delivery::new(
            context.clone(),
            format!("high-{round}"),
            course.clone(),
            10,
            [10; 32],
        );
        let barrier = Barrier::new(2);
        let (low_kind, high_kind) = std::thread::scope(|scope| {
            let low = scope.spawn(|| {
                barrier.wait();
                ledger.apply(&low).unwrap().kind()
            });
            let high = scope.spawn(|| {
                barrier.wait();
                ledger.apply(&high).unwrap().kind()
            });
            (low.join().unwrap(), high.join().unwrap())
        });
        assert_eq!(high_kind, OutcomeKind::Applied, "round {round}");
        assert!(
            matches!(low_kind, OutcomeKind::Applied | OutcomeKind::Stale),
            "round {round}"
        );
        let current = ledger.current(&course).unwrap().unwrap();
        assert_eq!(
            (current.edition, current.digest.0),
            (10, [10; 32]),
            "round {round}"
        );
    }
}
