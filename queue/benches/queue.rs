//! `cargo bench -p regolith-queue --bench queue [-- --json] [-- --quick]`: runs the queue.md §12 cases
//! through `regolith_queue::bench::run` (a fresh temp database per case) and prints the figures, then a
//! criterion micro-benchmark of one 10k-message apply.

#![allow(missing_docs)] // `criterion_group!` defines an undocumented public function.

use std::path::PathBuf;

use criterion::Criterion;
use regolith_formats::{BlockId, HashBytes, ShardIdent};
use regolith_queue::bench::{self, BenchCase, BenchParams, ImportInput};

fn import_input() -> Option<ImportInput> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/fixtures/queue_state/shard.bin");
    let data = std::fs::read(path).ok()?;
    let mut hash = [0u8; 32];
    let hex = "794fe9ce31b7919d2b6ca9ae0f97501f4017382a273b8f3ee512dcfcb5b14482";
    for (i, b) in hash.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(ImportInput {
        block_id: BlockId {
            shard: ShardIdent::BASECHAIN,
            seqno: 160,
            root_hash: HashBytes::ZERO,
            file_hash: HashBytes::ZERO,
        },
        diff_hash: HashBytes(hash),
        tail_len: 3,
        data,
    })
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let json = args.iter().any(|a| a == "--json");
    let quick = args.iter().any(|a| a == "--quick");
    let mut params = BenchParams {
        import_input: import_input(),
        ..BenchParams::default()
    };
    if quick {
        params = params.quick();
    }
    let cases: Vec<BenchCase> = match std::env::var("REGOLITH_QUEUE_BENCH_CASES") {
        Ok(list) => BenchCase::ALL
            .into_iter()
            .filter(|c| list.split(',').any(|n| n.trim() == c.name()))
            .collect(),
        Err(_) => BenchCase::ALL.to_vec(),
    };
    let rows = bench::run(&cases, &params).expect("queue benchmark failed");
    if json {
        println!("{}", bench::format_json(&rows));
    } else {
        print!("{}", bench::format_table(&rows));
    }

    if std::env::var("REGOLITH_QUEUE_BENCH_CRITERION").is_ok() {
        let mut c = Criterion::default().sample_size(10).configure_from_args();
        c.bench_function("apply 10k-message diff (incl. temp db)", |b| {
            b.iter(|| {
                let p = BenchParams {
                    apply_diffs: 1,
                    ..BenchParams::default()
                };
                bench::run(&[BenchCase::Apply], &p).expect("apply")
            });
        });
        c.final_summary();
    }
}
