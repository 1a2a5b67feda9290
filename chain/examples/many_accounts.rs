//! Time and size of a chain of many accounts: builds a generator with `ACCOUNTS` accounts per chain, generates
//! `MC_BLOCKS` mc blocks with the step API and prints how long each part took, the largest block, and what the
//! mc state and the shard states hold (accounts, distinct cells, BOC bytes).
//!
//! `cargo run --release -p regolith-chain --example many_accounts -- [ACCOUNTS] [MC_BLOCKS] [SHARDS]`
//! (defaults: 100000 20 2); run it under `/usr/bin/time -v` for the peak RSS.

use std::collections::HashSet;
use std::time::Instant;

use regolith_chain::generator::DEPLOYS_PER_MC_BLOCK;
use regolith_chain::{ChainShape, Generator};
use regolith_test_support::fixture_bytes;
use tycho_types::boc::Boc;
use tycho_types::cell::{Cell, HashBytes};
use tycho_types::models::ShardStateUnsplit;

fn arg<T: std::str::FromStr>(index: usize, default: T) -> T {
    match std::env::args().nth(index) {
        Some(text) => text.parse().unwrap_or_else(|_| {
            eprintln!("argument {index}: not a number: {text}");
            std::process::exit(2)
        }),
        None => default,
    }
}

/// (accounts, distinct cells, BOC bytes) of the state `root`.
fn state_size(root: &Cell) -> (usize, usize, usize) {
    let accounts = root
        .parse::<ShardStateUnsplit>()
        .and_then(|s| s.load_accounts())
        .map(|a| a.keys().count())
        .unwrap_or_else(|e| panic!("a state without accounts: {e}"));
    let mut seen: HashSet<HashBytes> = HashSet::new();
    let mut stack = vec![root.as_ref()];
    while let Some(cell) = stack.pop() {
        if seen.insert(*cell.repr_hash()) {
            stack.extend(cell.references());
        }
    }
    (accounts, seen.len(), Boc::encode(root).len())
}

fn main() {
    let accounts: u32 = arg(1, 100_000);
    let mc_blocks: u32 = arg(2, 20);
    let shards: u8 = arg(3, 2);
    let shape = ChainShape {
        accounts,
        shards,
        ..ChainShape::default()
    };
    let base = fixture_bytes("zerostate.boc");

    let started = Instant::now();
    let mut generator = Generator::new(shape.options(mc_blocks, 100), &base).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1)
    });
    let built = started.elapsed();
    println!(
        "generator of {accounts} accounts per chain ({shards} shards) built in {:.2} s",
        built.as_secs_f64()
    );

    let started = Instant::now();
    let (mut largest, mut largest_at, mut slowest, mut slowest_at) = (0, 0, 0.0f64, 0);
    // The groups after the one that imports the last deployment: only the shard blocks' messages.
    let deploying = accounts.div_ceil(DEPLOYS_PER_MC_BLOCK as u32) + 1;
    let (mut ordinary, mut ordinary_secs) = (0u32, 0.0f64);
    for _ in 0..mc_blocks {
        let block_started = Instant::now();
        let group = generator.next_mc_block().unwrap_or_else(|e| {
            eprintln!("{e}");
            std::process::exit(1)
        });
        let secs = block_started.elapsed().as_secs_f64();
        if group.mc.seqno > deploying {
            ordinary += 1;
            ordinary_secs += secs;
        }
        if secs > slowest {
            (slowest, slowest_at) = (secs, group.mc.seqno);
        }
        for block in &group.blocks {
            if block.data.len() > largest {
                (largest, largest_at) = (block.data.len(), group.mc.seqno);
            }
        }
    }
    let generated = started.elapsed();
    println!(
        "{mc_blocks} mc blocks generated in {:.2} s (slowest: mc block {slowest_at}, {:.2} s; largest block: \
         {largest} B, in the group of mc block {largest_at})",
        generated.as_secs_f64(),
        slowest,
    );
    if ordinary > 0 {
        println!(
            "mc blocks {}..={mc_blocks}, after the last deployment (imported with mc block {deploying}): {:.1} ms \
             each on average",
            deploying + 1,
            ordinary_secs * 1000.0 / f64::from(ordinary)
        );
    }

    let (mc_accounts, mc_cells, mc_bytes) = state_size(generator.mc_state_root());
    println!("mc state: {mc_accounts} accounts, {mc_cells} distinct cells, {mc_bytes} B as a BOC");
    for (id, root) in generator.shard_tips() {
        let (accounts, cells, bytes) = state_size(&root);
        println!(
            "shard {} state: {accounts} accounts, {cells} distinct cells, {bytes} B as a BOC",
            id.shard
        );
    }
}
