//! Block storage benchmarks: handles, setters, connections, components and archive_1 ingestion.
//! Run with `cargo bench -p regolith-storage`.

#![allow(missing_docs)] // `criterion_group!` defines an undocumented public function.

#[path = "../tests/common/mod.rs"]
mod common;

use std::sync::atomic::{AtomicU32, Ordering};

use bytes::Bytes;
use common::*;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use regolith_formats::ShardIdent;
use regolith_storage::Direction;

fn handles(c: &mut Criterion) {
    let t = TempStorage::new();
    let s = t.s();
    let next = AtomicU32::new(0);
    let mut g = c.benchmark_group("handles");
    g.throughput(Throughput::Elements(1));

    g.bench_function("create_or_load/new", |b| {
        b.iter(|| {
            let id = synthetic_id(
                ShardIdent::BASECHAIN,
                next.fetch_add(1, Ordering::Relaxed),
                1,
            );
            s.handles().create_or_load_handle(&id, meta(1)).unwrap()
        });
    });
    let held_id = synthetic_id(ShardIdent::BASECHAIN, u32::MAX - 1, 2);
    let held = s
        .handles()
        .create_or_load_handle(&held_id, meta(1))
        .unwrap()
        .0;
    g.bench_function("create_or_load/cached", |b| {
        b.iter(|| {
            s.handles()
                .create_or_load_handle(&held_id, meta(1))
                .unwrap()
        });
    });

    let cold: Vec<_> = (0..10_000)
        .map(|i| {
            let id = synthetic_id(ShardIdent::BASECHAIN, i, 3);
            drop(s.handles().create_or_load_handle(&id, meta(1)).unwrap());
            id
        })
        .collect();
    let mut i = 0;
    g.bench_function("load_handle/cold", |b| {
        b.iter(|| {
            i = (i + 1) % cold.len();
            // Dropped at once, so the next load of any id reads the DB again.
            s.handles().load_handle(&cold[i]).unwrap().unwrap()
        });
    });
    g.bench_function("load_handle/hot", |b| {
        b.iter(|| s.handles().load_handle(&held_id).unwrap().unwrap());
    });

    g.bench_function("set_block_committed/writes", |b| {
        b.iter_batched(
            || {
                let id = synthetic_id(
                    ShardIdent::BASECHAIN,
                    next.fetch_add(1, Ordering::Relaxed),
                    4,
                );
                s.handles().create_or_load_handle(&id, meta(1)).unwrap().0
            },
            |h| assert!(s.handles().set_block_committed(&h).unwrap()),
            BatchSize::SmallInput,
        );
    });

    g.bench_function("store_connection+load_connection", |b| {
        b.iter_batched(
            || {
                let id = synthetic_id(
                    ShardIdent::BASECHAIN,
                    next.fetch_add(1, Ordering::Relaxed),
                    5,
                );
                s.handles().create_or_load_handle(&id, meta(1)).unwrap().0
            },
            |h| {
                s.connections()
                    .store_connection(&h, Direction::Next1, &held_id)
                    .unwrap();
                s.connections()
                    .load_connection(h.id(), Direction::Next1)
                    .unwrap()
                    .unwrap()
            },
            BatchSize::SmallInput,
        );
    });
    drop(held);
    g.finish();
}

fn components(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let t = TempStorage::new();
    let s = t.s().clone();
    let blocks = archive_1_blocks();
    let mut g = c.benchmark_group("components");

    let raw = fixture("block.bin");
    let id = regolith_formats::block_id::parse_block_id(
        &String::from_utf8(fixture("block_id.txt")).unwrap(),
    )
    .unwrap();
    g.throughput(Throughput::Bytes(raw.len() as u64));
    g.bench_function("store_block_data/block.bin", |b| {
        b.to_async(&rt).iter_batched(
            || {
                let t = TempStorage::new();
                (t, Bytes::from(raw.clone()))
            },
            |(t, raw)| async move {
                let r = t
                    .s()
                    .components()
                    .store_block_data(&id, raw, meta(1))
                    .await
                    .unwrap();
                assert!(r.updated);
                t
            },
            BatchSize::PerIteration,
        );
    });

    let h = rt.block_on(store_parts(&s, &blocks[0]));
    let size = s
        .components()
        .get_compressed_block_data_size(&h)
        .unwrap()
        .unwrap();
    g.throughput(Throughput::Bytes(size));
    g.bench_function("load_block_data_range/whole_frame", |b| {
        b.iter(|| {
            s.components()
                .load_block_data_range(&h, 0, 1 << 20)
                .unwrap()
                .unwrap()
        });
    });
    g.throughput(Throughput::Bytes(1000));
    g.bench_function("load_block_data_range/1000B", |b| {
        b.iter(|| {
            s.components()
                .load_block_data_range(&h, 500, 1000)
                .unwrap()
                .unwrap()
        });
    });
    g.finish();
}

fn ingest(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let blocks = archive_1_blocks();
    let bytes: usize = blocks
        .iter()
        .map(|b| b.data.len() + b.proof.len() + b.queue_diff.len())
        .sum();
    let mut g = c.benchmark_group("ingest_archive_1");
    g.sample_size(10);
    g.throughput(Throughput::Elements(blocks.len() as u64));
    g.bench_function("blocks", |b| {
        b.to_async(&rt).iter_batched(
            TempStorage::new,
            |t| async move {
                ingest_archive_1(t.s()).await;
                t
            },
            BatchSize::PerIteration,
        );
    });
    g.throughput(Throughput::Bytes(bytes as u64));
    g.bench_function("bytes", |b| {
        b.to_async(&rt).iter_batched(
            TempStorage::new,
            |t| async move {
                ingest_archive_1(t.s()).await;
                t
            },
            BatchSize::PerIteration,
        );
    });
    g.finish();
}

criterion_group!(benches, handles, components, ingest);
criterion_main!(benches);
