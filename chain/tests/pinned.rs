//! The default chain is pinned: the bytes a default-shaped chain generates (archives, persistent states,
//! zerostate, validator keys) must not change unless a change means to change them. A new generator option
//! that keeps its default must keep this digest.

use std::path::{Path, PathBuf};

use regolith_chain::{generate, ChainOptions, ChainShape};
use regolith_test_support::fixture_bytes;

/// blake3 over every file the generator wrote under `dir` but `chain.json` (which holds the elapsed time),
/// in path order: each file's relative path, length and bytes.
fn digest_of_output(dir: &Path) -> String {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
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
    let mut files: Vec<(String, PathBuf)> = files
        .into_iter()
        .map(|p| (p.strip_prefix(dir).unwrap().display().to_string(), p))
        .filter(|(name, _)| name != "chain.json")
        .collect();
    files.sort();
    let mut hasher = blake3::Hasher::new();
    for (name, path) in &files {
        let bytes = std::fs::read(path).unwrap();
        hasher.update(name.as_bytes());
        hasher.update(&(bytes.len() as u64).to_le_bytes());
        hasher.update(&bytes);
    }
    hasher.finalize().to_hex().to_string()
}

/// 30 mc blocks of the default shape, with a key block every 5 (so rotations, an announced set and persistent
/// states are in it), in archives of 10 mc blocks.
fn default_chain() -> ChainOptions {
    ChainOptions {
        mc_blocks: 30,
        mc_blocks_per_archive: 10,
        shape: ChainShape {
            key_block_every: 5,
            ..ChainShape::default()
        },
    }
}

#[test]
fn the_default_chain_keeps_its_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let summary = generate(
        &default_chain(),
        &fixture_bytes("zerostate.boc"),
        dir.path(),
    )
    .unwrap();
    assert_eq!(summary.key_blocks, 6);
    assert!(summary.persistent_states > 0);
    assert_eq!(
        digest_of_output(dir.path()),
        "75dc49115bd6103c5b39218095eee6919e9b21485ff7cf50dc0630131d726a51",
        "the default chain's bytes changed"
    );
}
