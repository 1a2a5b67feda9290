//! Import of archive_1 (107 blocks) into a fresh data directory, with block proof verification on and off
//! (off exists only here, to measure what verification costs). Run with
//! `cargo bench -p regolith-node --bench import`.

#![allow(missing_docs)] // `criterion_group!` defines an undocumented public function.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use regolith_node::apply::import::{import_archive_with, ImportOptions};
use regolith_node::config::DataDir;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures")
}

/// One import into a new data dir (initialised outside the measured time); returns the import's wall time.
async fn timed_import(root: &Path, options: &ImportOptions) -> Duration {
    let data = DataDir::new(root);
    regolith_node::init::init(
        &data,
        &fixtures().join("zerostate.boc"),
        &Default::default(),
    )
    .unwrap();
    let config = data.load_node_config().unwrap();
    let storage = regolith_node::open_storage(config.storage.clone()).unwrap();
    let (queue, _) =
        regolith_node::queue_sync::start(&data.root, &storage, config.internal_queue, false)
            .await
            .unwrap();
    let progress = regolith_node::progress::Progress::new(true);
    let archive = fixtures().join("archive_1.bin");
    let started = Instant::now();
    let report = import_archive_with(&storage, &queue, &archive, &progress, options)
        .await
        .unwrap();
    let elapsed = started.elapsed();
    assert_eq!(report.blocks_imported, 107);
    elapsed
}

fn import(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut g = c.benchmark_group("import_archive_1");
    g.throughput(Throughput::Elements(107));
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(20));
    for (name, verify_proofs) in [("verify_on", true), ("verify_off", false)] {
        let options = ImportOptions {
            verify_proofs,
            ..Default::default()
        };
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let dir = tempfile::tempdir().unwrap();
                    total += runtime.block_on(timed_import(dir.path(), &options));
                }
                total
            });
        });
    }
    g.finish();
}

criterion_group!(benches, import);
criterion_main!(benches);
