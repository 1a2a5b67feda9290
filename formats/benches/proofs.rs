//! Block proof verification: masterchain proofs of archive_1 verified per second on one thread.
//! Run with `cargo bench -p regolith-formats --bench proofs`.

#![allow(missing_docs)] // `criterion_group!` defines an undocumented public function.

use std::path::PathBuf;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use regolith_formats::archive::{ArchiveEntryType, ArchiveReader};
use regolith_formats::{BlockId, NoKeyBlocks, ParsedProof, ProofChecker, ZerostateConfig};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures")
}

fn mc_proofs() -> Vec<(BlockId, Vec<u8>)> {
    let file = std::fs::File::open(fixtures().join("archive_1.bin")).unwrap();
    ArchiveReader::new_compressed(file)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.ty == ArchiveEntryType::Proof && e.block_id.is_masterchain())
        .map(|e| (e.block_id, e.data))
        .collect()
}

fn proofs(c: &mut Criterion) {
    let zerostate =
        ZerostateConfig::from_boc(&std::fs::read(fixtures().join("zerostate.boc")).unwrap())
            .unwrap();
    let proofs = mc_proofs();
    assert_eq!(proofs.len(), 100);
    let parsed: Vec<ParsedProof> = proofs
        .iter()
        .map(|(id, raw)| ParsedProof::parse(id, raw).unwrap())
        .collect();

    let mut g = c.benchmark_group("mc_proofs");
    g.throughput(Throughput::Elements(proofs.len() as u64));
    // What import does: decode the BOC, check structure, verify 3 signatures; the subset is cached.
    let checker = ProofChecker::new(zerostate.clone());
    g.bench_function("decode_and_verify", |b| {
        b.iter(|| {
            for (id, raw) in &proofs {
                checker.verify_raw(id, raw, &NoKeyBlocks).unwrap();
            }
        });
    });
    g.bench_function("verify_parsed", |b| {
        b.iter(|| {
            for p in &parsed {
                checker.verify(p, &NoKeyBlocks).unwrap();
            }
        });
    });
    // A new checker per proof: the validator subset (and its keys) computed every time.
    g.bench_function("verify_parsed_uncached", |b| {
        b.iter(|| {
            for p in &parsed {
                ProofChecker::new(zerostate.clone())
                    .verify(p, &NoKeyBlocks)
                    .unwrap();
            }
        });
    });
    g.finish();
}

criterion_group!(benches, proofs);
criterion_main!(benches);
