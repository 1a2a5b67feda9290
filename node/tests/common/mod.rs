//! Helpers shared by the CLI tests: running the `regolith` binary on a data dir and reading its JSON.
#![allow(dead_code)]

pub(crate) mod netns;
pub(crate) mod relay;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

pub(crate) fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures")
}

pub(crate) fn regolith(data: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_regolith"))
        .arg("--data")
        .arg(data)
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap()
}

pub(crate) fn ok(data: &Path, args: &[&str]) -> String {
    let out = regolith(data, args);
    assert!(
        out.status.success(),
        "regolith {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

pub(crate) fn fails(data: &Path, args: &[&str]) -> String {
    let out = regolith(data, args);
    assert!(!out.status.success(), "regolith {args:?} should fail");
    String::from_utf8(out.stderr).unwrap()
}

pub(crate) fn summary(data: &Path) -> Value {
    serde_json::from_str(&ok(data, &["inspect", "--json", "summary"])).unwrap()
}

pub(crate) fn init(data: &Path) {
    let zerostate = fixtures().join("zerostate.boc");
    let out = ok(data, &["init", "--zerostate", zerostate.to_str().unwrap()]);
    assert!(
        out.contains("zerostate id: -1:8000000000000000:0:"),
        "{out}"
    );
    assert!(
        out.contains("1172c1f335257481cd1fcd0e4778a68cdefc39f0c9c1633ec6e43cca6819eb1a"),
        "{out}"
    );
    assert!(out.contains("overlay id:"), "{out}");
}

pub(crate) fn archive_1() -> String {
    fixtures()
        .join("archive_1.bin")
        .to_str()
        .unwrap()
        .to_string()
}

pub(crate) fn assert_clean(summary: &Value) {
    let check = &summary["startup_check"];
    for key in [
        "orphaned_flags_count",
        "restored_flags_count",
        "dangling_ids_count",
    ] {
        assert_eq!(check[key], 0, "{key} in {summary}");
    }
}

pub(crate) fn assert_full_chain(summary: &Value) {
    // 107 blocks of archive_1, the mc zerostate and the shard zerostate it lists.
    assert_eq!(summary["blocks_total"], 109, "{summary}");
    assert!(summary["last_applied_mc_block"]
        .as_str()
        .unwrap()
        .starts_with("-1:8000000000000000:100:"));
    let shards = summary["blocks_per_shard"].as_array().unwrap();
    let count = |shard: &str| {
        shards
            .iter()
            .find(|s| s["shard"] == shard)
            .map(|s| s["blocks"].as_u64().unwrap())
    };
    assert_eq!(count("-1:8000000000000000"), Some(101));
    assert_eq!(count("0:8000000000000000"), Some(8));
}

/// `inspect queue --json --digest`.
pub(crate) fn queue_view(data: &Path) -> Value {
    serde_json::from_str(&ok(data, &["inspect", "--json", "queue", "--digest"])).unwrap()
}

/// Starts `regolith run`, waits until it reports that it is running, then stops it with SIGTERM and checks
/// that it exits cleanly.
pub(crate) fn start_and_stop(data: &Path) {
    use std::io::{BufRead, BufReader};
    // Any free port and no metrics endpoint, so that tests can run nodes side by side.
    let config_path = data.join("node.json");
    let mut config: Value =
        serde_json::from_str(&std::fs::read_to_string(&config_path).unwrap()).unwrap();
    config["listen_address"] = "127.0.0.1:0".into();
    config["metrics_address"] = Value::Null;
    std::fs::write(&config_path, serde_json::to_string_pretty(&config).unwrap()).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_regolith"))
        .arg("--data")
        .arg(data)
        .arg("run")
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        // Not piped: nobody reads it while the node runs, and a full pipe would block the node.
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let running = lines.any(|l| l.is_ok_and(|l| l.contains("Press Ctrl-C to stop")));
    if !running {
        let status = child.wait().unwrap();
        panic!("regolith run did not start ({status}); run it by hand on {data:?} to see why");
    }
    sigterm(&child);
    let status = child.wait().unwrap();
    assert!(status.success(), "regolith run exited with {status}");
}

/// Sends SIGTERM (a clean stop) to a child process.
pub(crate) fn sigterm(child: &std::process::Child) {
    // SAFETY: kill(2) only sends a signal, here to our own child process.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
}

/// Starts `regolith import --quiet archive_1` in the background (for kill loops).
pub(crate) fn spawn_import(data: &Path) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_regolith"))
        .arg("--data")
        .arg(data)
        .args(["import", "--quiet", &archive_1()])
        .env("RUST_LOG", "error")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// A `queue_view` without what queue GC may delete by now: the digest, the diff counts, every diff at or
/// below its shard's stored GC bound, and the message counts of a diff the bound cuts. Two views that are
/// equal this way hold the same queue above the bounds; a running node collects below them.
pub(crate) fn beyond_gc(view: &Value) -> Value {
    let key = |k: &Value| {
        (
            k["lt"].as_u64().unwrap(),
            k["hash"].as_str().unwrap().to_owned(),
        )
    };
    let bounds: std::collections::HashMap<String, (u64, String)> = view["gc_bounds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["source_shard"].as_str().unwrap().to_owned(),
                key(&b["delete_up_to"]),
            )
        })
        .collect();
    let mut out = view.clone();
    let object = out.as_object_mut().unwrap();
    object.remove("content_digest");
    object.remove("committed_diffs");
    for shard in object["shards"].as_array_mut().unwrap() {
        let name = shard["shard"].as_str().unwrap().to_owned();
        let Some(bound) = bounds.get(&name) else {
            continue;
        };
        let diffs = shard["diffs"].as_array_mut().unwrap();
        diffs.retain(|d| key(&d["max_message"]) > *bound);
        for d in diffs.iter_mut() {
            if key(&d["min_message"]) <= *bound {
                d["messages_per_partition"] = Value::Null;
            }
        }
    }
    out
}
