//! The live devnet (issue #19 point 4): node1 makes a new chain while it runs, through the apply pipeline,
//! and the other nodes follow its tip through sync; a restarted node1 replays its chain and goes on from its
//! tip, and refuses a chain its options do not give.

mod common;

use regolith_test_support::zerostate_path;
use std::path::Path;
use std::process::{Command, Output};

use common::{beyond_gc, fails, ok};
use serde_json::Value;

/// A small chain with key blocks and a rotation within a few dozen blocks.
const CHAIN: &[&str] = &[
    "--shards",
    "2",
    "--messages",
    "3",
    "--message-bytes",
    "64",
    "--key-block-every",
    "10",
    "--validators",
    "4",
    "--rotate-every",
    "2",
    "--seed",
    "5",
];

fn devnet(dir: &Path, base_port: u16, mc_blocks: u32) -> Output {
    Command::new(env!("CARGO_BIN_EXE_regolith"))
        .args(["devnet", "--live", "--nodes", "3", "--exit-when-synced"])
        .args(["--block-interval", "250ms", "--mc-blocks"])
        .arg(mc_blocks.to_string())
        .arg("--base-port")
        .arg(base_port.to_string())
        .arg("--dir")
        .arg(dir)
        .arg("--zerostate")
        .arg(zerostate_path())
        .args(CHAIN)
        .env("RUST_LOG", "info,tycho_network=warn")
        .output()
        .unwrap()
}

fn inspect(data: &Path, args: &[&str]) -> Value {
    let mut all = vec!["inspect", "--json"];
    all.extend_from_slice(args);
    serde_json::from_str(&ok(data, &all)).unwrap()
}

/// The heights of each status line of the devnet's output: `[  4s] last applied mc block: node1 7  node2 5 …`.
fn status_lines(stdout: &str) -> Vec<Vec<Option<u64>>> {
    stdout
        .lines()
        .filter_map(|l| l.split_once("last applied mc block: "))
        .map(|(_, rest)| {
            rest.split_whitespace()
                .skip(1)
                .step_by(2)
                .map(|h| h.parse().ok())
                .collect()
        })
        .collect()
}

/// Every node holds node1's chain: blocks, proofs, diffs, connections, archives and queue.
fn assert_same_chain(dir: &Path, mc_seqno: u32) {
    let node1 = dir.join("node1");
    let summary = inspect(&node1, &["summary", "--digest"]);
    assert!(
        summary["last_applied_mc_block"]
            .as_str()
            .unwrap()
            .starts_with(&format!("-1:8000000000000000:{mc_seqno}:")),
        "{summary}"
    );
    // mc blocks and one block of each of the 2 shards per mc block, with the 3 zerostates.
    assert_eq!(summary["blocks_total"], 3 * mc_seqno + 3, "{summary}");
    for k in 2..=3 {
        let data = dir.join(format!("node{k}"));
        let other = inspect(&data, &["summary", "--digest"]);
        assert_eq!(
            other["last_applied_mc_block"], summary["last_applied_mc_block"],
            "node{k}"
        );
        assert_eq!(
            other["chain_digest"], summary["chain_digest"],
            "node{k}: the blocks, proofs, queue diffs and connections of node1"
        );
        assert_eq!(
            inspect(&data, &["archives"]),
            inspect(&node1, &["archives"]),
            "node{k}: the archives of node1"
        );
        assert_eq!(
            beyond_gc(&inspect(&data, &["queue"])),
            beyond_gc(&inspect(&node1, &["queue"])),
            "node{k}: the queue of node1"
        );
    }
}

#[test]
fn a_live_devnet_is_followed_and_node1_resumes_from_its_tip() {
    let dir = tempfile::tempdir().unwrap();
    let base = 20_000 + (std::process::id() % 1_000) as u16 * 8;

    // node1 makes 24 mc blocks (two key blocks, one rotation) while the others follow.
    let out = devnet(dir.path(), base, 24);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("node1 makes a live chain"), "{stdout}");
    assert!(
        stdout.contains("every node holds the chain: mc block 24"),
        "{stdout}"
    );
    let lines = status_lines(&stdout);
    let first = lines.first().expect("a status line");
    // The others started before node1 had made the chain they end with: they followed its tip.
    let node1_at_start = first[0].expect("node1's height");
    assert!(node1_at_start < 24, "{stdout}");
    assert_same_chain(dir.path(), 24);
    // The key-block index holds the zerostate and the key blocks 10 and 20.
    assert_eq!(
        inspect(&dir.path().join("node2"), &["summary"])["key_blocks"],
        3
    );
    let live = std::fs::metadata(dir.path().join("node1/live.json")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(live.permissions().mode() & 0o077, 0, "live.json is 0600");

    // A second run: node1 replays its 24 blocks, checks the tip and goes on to 36.
    let out = devnet(dir.path(), base, 36);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("every node holds the chain: mc block 36"),
        "{stdout}"
    );
    let log = std::fs::read_to_string(dir.path().join("node1/run.log")).unwrap();
    assert!(
        log.contains("live chain replayed: the stored tip is the generated one"),
        "{log}"
    );
    assert_same_chain(dir.path(), 36);

    // Other options on the same data: the devnet refuses them, and node1 refuses a live.json changed
    // behind its back (the replay gives another block 36).
    let mut args = CHAIN.to_vec();
    args[3] = "4";
    let out = Command::new(env!("CARGO_BIN_EXE_regolith"))
        .args(["devnet", "--live", "--nodes", "3", "--exit-when-synced"])
        .arg("--base-port")
        .arg(base.to_string())
        .arg("--dir")
        .arg(dir.path())
        .arg("--zerostate")
        .arg(zerostate_path())
        .args(&args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("other generator options"), "{stderr}");

    let path = dir.path().join("node1/live.json");
    let mut live: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    live["chain"]["messages"] = 4.into();
    std::fs::write(&path, serde_json::to_string_pretty(&live).unwrap()).unwrap();
    let stderr = fails(&dir.path().join("node1"), &["run"]);
    assert!(
        stderr.contains("the replayed chain differs at mc block 36"),
        "{stderr}"
    );
}

#[test]
fn live_json_is_parsed_strictly() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("node");
    common::init(&data);
    let zerostate = zerostate_path();
    std::fs::copy(&zerostate, data.join("live-base-zerostate.boc")).unwrap();
    let live = serde_json::json!({
        "chain": {
            "seed": 0, "shards": 2, "messages": 1, "message_bytes": 10, "key_block_every": 10,
            "validators": 3, "rotate_every": 2, "persistent_every": 2
        },
        "block_interval": "1s",
        "stop_at": null,
        "typo": 1
    });
    std::fs::write(data.join("live.json"), live.to_string()).unwrap();
    let stderr = fails(&data, &["run"]);
    assert!(stderr.contains("unknown field `typo`"), "{stderr}");
}
