//! Applies per second: new deliveries (each one `Applied`, so one committed transaction) and duplicates (a
//! read-only lookup), with one thread and with two threads sharing the ledger; with the WAL fsync of the
//! default options and without it.

#![allow(missing_docs)] // `criterion_group!` defines an undocumented public function.

use std::sync::atomic::{AtomicU64, Ordering};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use regolith_ledger::{Delivery, Ledger, LedgerOptions, OutcomeKind, TransportContext};

/// Deliveries applied before the duplicate benchmarks, which then cycle through them.
const PRELOADED: u64 = 20_000;
const COURSES: u64 = 1_000;

fn context() -> TransportContext {
    TransportContext::new("eth-mainnet", "0xpublisher", "mirror-17", "ccip")
}

fn delivery(context: &TransportContext, n: u64) -> Delivery {
    let mut digest = [0u8; 32];
    digest[..8].copy_from_slice(&n.to_le_bytes());
    // Editions grow with n, so every new delivery of a course is newer than its current edition.
    Delivery::new(
        context.clone(),
        format!("msg-{n}"),
        format!("C{}", n % COURSES),
        n,
        digest,
    )
    .with_sequence(n)
}

/// Applies deliveries `first..first + count` split over `threads` threads.
fn apply_range(
    ledger: &Ledger,
    context: &TransportContext,
    first: u64,
    count: u64,
    threads: u64,
    expect: OutcomeKind,
) {
    let per_thread = count / threads;
    std::thread::scope(|scope| {
        for t in 0..threads {
            scope.spawn(move || {
                let start = first + t * per_thread;
                for n in start..start + per_thread {
                    let outcome = ledger.apply(&delivery(context, n)).expect("apply");
                    debug_assert_eq!(outcome.kind(), expect);
                }
            });
        }
    });
}

fn bench_apply(c: &mut Criterion) {
    let context = context();
    // Deliveries per measured iteration: fewer when every commit waits for an fsync.
    for (sync_writes, sync_name, batch) in [(true, "synced", 100u64), (false, "unsynced", 1_000)] {
        let mut group = c.benchmark_group(format!("ledger_apply_{sync_name}"));
        group.throughput(Throughput::Elements(batch));
        group.sample_size(10);
        for threads in [1u64, 2] {
            let dir = tempfile::tempdir().expect("temp dir");
            let ledger =
                Ledger::open_with(dir.path(), LedgerOptions { sync_writes }).expect("open");
            let next = AtomicU64::new(0);
            group.bench_function(format!("new/{threads}_thread"), |b| {
                b.iter(|| {
                    let first = next.fetch_add(batch, Ordering::Relaxed);
                    apply_range(
                        &ledger,
                        &context,
                        first,
                        batch,
                        threads,
                        OutcomeKind::Applied,
                    );
                });
            });

            let dir = tempfile::tempdir().expect("temp dir");
            let preload =
                Ledger::open_with(dir.path(), LedgerOptions { sync_writes: false }).expect("open");
            apply_range(&preload, &context, 0, PRELOADED, 2, OutcomeKind::Applied);
            drop(preload);
            let ledger =
                Ledger::open_with(dir.path(), LedgerOptions { sync_writes }).expect("open");
            let probe = ledger.apply(&delivery(&context, 7)).expect("apply");
            assert_eq!(probe.kind(), OutcomeKind::Duplicate);
            let next = AtomicU64::new(0);
            group.bench_function(format!("duplicate/{threads}_thread"), |b| {
                b.iter(|| {
                    let first = next.fetch_add(batch, Ordering::Relaxed) % PRELOADED;
                    apply_range(
                        &ledger,
                        &context,
                        first,
                        batch,
                        threads,
                        OutcomeKind::Duplicate,
                    );
                });
            });
        }
        group.finish();
    }
}

criterion_group!(benches, bench_apply);
criterion_main!(benches);
