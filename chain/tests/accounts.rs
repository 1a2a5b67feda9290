//! `--accounts`: a chain of many accounts is as deterministic as the default one, its mc state holds every
//! account from the zerostate on, and how many cells that state has.

use std::collections::HashSet;
use std::path::Path;

use regolith_chain::generator::DEPLOYS_PER_MC_BLOCK;
use regolith_chain::{generate, ChainShape, Generator};
use regolith_test_support::fixture_bytes;
use tycho_types::cell::{Cell, HashBytes};
use tycho_types::models::ShardStateUnsplit;

/// blake3 over every file under `dir` but `chain.json` (which holds the elapsed time), in path order.
fn digest_of_output(dir: &Path) -> String {
    fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(dir, &mut files);
    files.sort();
    let mut hasher = blake3::Hasher::new();
    for path in files {
        let name = path.strip_prefix(dir).unwrap().display().to_string();
        if name == "chain.json" {
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        hasher.update(name.as_bytes());
        hasher.update(&(bytes.len() as u64).to_le_bytes());
        hasher.update(&bytes);
    }
    hasher.finalize().to_hex().to_string()
}

/// The distinct cells under `root` (by representation hash).
fn distinct_cells(root: &Cell) -> usize {
    let mut seen: HashSet<HashBytes> = HashSet::new();
    let mut stack = vec![root.as_ref()];
    while let Some(cell) = stack.pop() {
        if seen.insert(*cell.repr_hash()) {
            stack.extend(cell.references());
        }
    }
    seen.len()
}

/// The accounts in the state `root`.
fn account_count(root: &Cell) -> usize {
    let state = root.parse::<ShardStateUnsplit>().unwrap();
    state.load_accounts().unwrap().keys().count()
}

fn shape(accounts: u32) -> ChainShape {
    ChainShape {
        seed: 3,
        shards: 2,
        messages: 10,
        message_bytes: 64,
        key_block_every: 2,
        accounts,
        ..ChainShape::default()
    }
}

#[test]
fn a_chain_of_many_accounts_has_the_same_bytes_every_time() {
    let accounts = DEPLOYS_PER_MC_BLOCK as u32 + 500;
    let options = shape(accounts).options(5, 2);
    let base = fixture_bytes("zerostate.boc");
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let summary = generate(&options, &base, a.path()).unwrap();
    assert!(summary.persistent_states > 0);
    generate(&options, &base, b.path()).unwrap();
    assert_eq!(digest_of_output(a.path()), digest_of_output(b.path()));

    // One account fewer is another chain (from the zerostate on: the mc accounts are in it).
    let fewer = tempfile::tempdir().unwrap();
    generate(&shape(accounts - 1).options(5, 2), &base, fewer.path()).unwrap();
    assert_ne!(
        std::fs::read(a.path().join("zerostate.boc")).unwrap(),
        std::fs::read(fewer.path().join("zerostate.boc")).unwrap()
    );
}

/// Generates the chain of `accounts` accounts per chain up to mc block `mc_blocks` and prints what its mc
/// state holds; returns (generated accounts in the mc state, distinct cells of the mc state).
fn mc_state_size(accounts: u32, mc_blocks: u32) -> (usize, usize) {
    let base = fixture_bytes("zerostate.boc");
    let base_root = tycho_types::boc::Boc::decode(&base).unwrap();
    let base_accounts = account_count(&base_root);
    let mut generator = Generator::new(shape(accounts).options(mc_blocks, 100), &base).unwrap();
    for _ in 0..mc_blocks {
        generator.next_mc_block().unwrap();
    }
    let root = generator.mc_state_root();
    let generated = account_count(root) - base_accounts;
    let cells = distinct_cells(root);
    println!(
        "--accounts {accounts}, mc block {mc_blocks}: the mc state holds {} accounts ({generated} generated, \
         {base_accounts} of the base zerostate) in {cells} distinct cells; the base zerostate has {} cells",
        generated + base_accounts,
        distinct_cells(&base_root)
    );
    (generated, cells)
}

#[test]
fn the_mc_state_holds_every_account_and_at_least_three_cells_each() {
    let accounts = 3_000;
    let (generated, cells) = mc_state_size(accounts, 3);
    assert_eq!(generated, accounts as usize);
    // Each generated account has its own account cell, data cell (its address) and dictionary leaf.
    assert!(cells >= 3 * generated, "{cells} cells");
}

/// The figure for a state of 100,000 accounts (slow in a debug build: run with `--release -- --ignored`).
#[test]
#[ignore]
fn the_mc_state_of_100000_accounts() {
    let (generated, cells) = mc_state_size(100_000, 3);
    assert_eq!(generated, 100_000);
    assert!(cells >= 3 * generated, "{cells} cells");
}
