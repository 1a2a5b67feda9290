//! Helpers shared by the CLI tests: running the `regolith` binary on a data dir and reading its JSON.
#![allow(dead_code)]

pub(crate) mod netns;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use regolith_test_support::{archive_1_arg, bytes32_from_hex, http_get, wait_for, zerostate_path};
use serde_json::Value;

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
    let zerostate = zerostate_path();
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
    // Any free port and no metrics endpoint, so that tests can run nodes side by side.
    edit_node_config(data, |config| {
        config["listen_address"] = "127.0.0.1:0".into();
        config["metrics_address"] = Value::Null;
    });
    let mut child = run_process(data, Stdio::piped());
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

/// Spawns `regolith --data DATA run` with warnings logged and stderr dropped (nobody reads it while the
/// node runs, and a full pipe would block the node).
pub(crate) fn run_process(data: &Path, stdout: Stdio) -> Child {
    Command::new(env!("CARGO_BIN_EXE_regolith"))
        .arg("--data")
        .arg(data)
        .arg("run")
        .env("RUST_LOG", "warn")
        .stdout(stdout)
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Rewrites the node's `node.json` through `edit`.
pub(crate) fn edit_node_config(data: &Path, edit: impl FnOnce(&mut Value)) {
    let path = data.join("node.json");
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut config);
    std::fs::write(&path, serde_json::to_string_pretty(&config).unwrap()).unwrap();
}

/// A running `regolith run` with what it printed about itself (each `None` when it printed no such line).
pub(crate) struct Running {
    /// The node process.
    pub child: Child,
    quic_address: Option<String>,
    overlay_id: Option<String>,
    peer_info: Option<String>,
}

impl Running {
    /// The value of its `QUIC address:` line.
    pub(crate) fn quic_address(&self) -> &str {
        self.quic_address
            .as_deref()
            .expect("run prints its QUIC address")
    }

    /// The overlay id of its `overlay id:` line.
    pub(crate) fn overlay_id(&self) -> [u8; 32] {
        bytes32_from_hex(
            self.overlay_id
                .as_deref()
                .expect("run prints its overlay id"),
        )
    }

    /// The JSON of its `peer info:` line.
    pub(crate) fn peer_info(&self) -> Value {
        let peer_info = self
            .peer_info
            .as_deref()
            .expect("regolith run prints its peer info");
        serde_json::from_str(peer_info).unwrap()
    }
}

/// Starts `regolith run` and returns it once it printed its peer info, the last line it prints about
/// itself at start.
pub(crate) fn spawn_run(data: &Path) -> Running {
    let mut child = run_process(data, Stdio::piped());
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let (mut quic_address, mut overlay_id, mut peer_info) = (None, None, None);
    for line in lines.by_ref() {
        let line = line.unwrap();
        let line = line.trim();
        if let Some(v) = line.strip_prefix("QUIC address:") {
            quic_address = Some(v.trim().to_owned());
        }
        if let Some(v) = line.strip_prefix("overlay id:") {
            overlay_id = Some(v.trim().to_owned());
        }
        if let Some(v) = line.strip_prefix("peer info:") {
            peer_info = Some(v.trim().to_owned());
            break;
        }
    }
    // Keep reading what the node prints, so that it never writes into a closed pipe.
    std::thread::spawn(move || lines.for_each(drop));
    Running {
        child,
        quic_address,
        overlay_id,
        peer_info,
    }
}

/// Sends SIGTERM, waits for the exit at most `timeout`, and checks that it was a clean one.
pub(crate) fn stop_within(mut child: Child, timeout: Duration) {
    sigterm(&child);
    let status = wait_for(timeout, Duration::from_millis(100), || {
        child
            .try_wait()
            .unwrap()
            .ok_or_else(|| "no exit after SIGTERM".to_owned())
    });
    assert!(status.success(), "regolith run exited with {status}");
}

/// The `/metrics` page on 127.0.0.1:`port`, `None` while the endpoint does not answer 200.
pub(crate) fn metrics_page(port: u16) -> Option<String> {
    http_get(port, "/metrics").filter(|page| page.starts_with("HTTP/1.1 200"))
}

/// The value of the first series of metric `name` on a metrics page (labels or not).
pub(crate) fn metric_value(page: &str, name: &str) -> Option<f64> {
    page.lines()
        .find(|l| l.split(['{', ' ']).next() == Some(name))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// The value of metric `name` on 127.0.0.1:`port`/metrics, `None` while the endpoint does not answer.
pub(crate) fn metric(port: u16, name: &str) -> Option<f64> {
    metric_value(&metrics_page(port)?, name)
}

/// Initialises `data` from `zerostate` as a node on loopback: its own QUIC and metrics ports (and the account
/// API on `api`), one-second discovery periods, `boot` as its boot config when given, and the first bootstrap
/// peer of each of `peers` (initialised data dirs) as its own. Returns its metrics port.
#[allow(dead_code)]
pub(crate) fn init_loopback_node(
    data: &Path,
    zerostate: &Path,
    api: Option<u16>,
    peers: &[&Path],
    boot: Option<Value>,
) -> u16 {
    let metrics = regolith_test_support::free_tcp_port();
    let listen = format!("127.0.0.1:{}", regolith_test_support::free_udp_port());
    let metrics_arg = format!("127.0.0.1:{metrics}");
    let api_arg = api.map(|port| format!("127.0.0.1:{port}"));
    let mut args = vec![
        "init",
        "--zerostate",
        zerostate.to_str().unwrap(),
        "--listen",
        &listen,
        "--metrics",
        &metrics_arg,
    ];
    if let Some(api) = &api_arg {
        args.extend(["--api", api.as_str()]);
    }
    ok(data, &args);
    edit_node_config(data, |config| {
        let (overlay, dht) = regolith_rpc::network::quick_discovery();
        config["overlay"] = serde_json::to_value(overlay).unwrap();
        config["dht"] = serde_json::to_value(dht).unwrap();
        if let Some(boot) = boot {
            config["boot"] = boot;
        }
    });
    let global_path = data.join("global.json");
    let mut global: Value = serde_json::from_slice(&std::fs::read(&global_path).unwrap()).unwrap();
    for peer in peers {
        let theirs: Value =
            serde_json::from_slice(&std::fs::read(peer.join("global.json")).unwrap()).unwrap();
        global["bootstrap_peers"]
            .as_array_mut()
            .unwrap()
            .push(theirs["bootstrap_peers"][0].clone());
    }
    std::fs::write(&global_path, global.to_string()).unwrap();
    metrics
}

/// Kills (SIGKILL) the processes it was given when dropped: a test that fails half-way leaves no node running.
/// A process that has exited already is not there to kill (its pid is not reused while we hold no wait on it
/// for long: the test reaps its children before it ends).
#[derive(Default)]
pub(crate) struct Reaper(Vec<u32>);

impl Reaper {
    /// Kills `child` when the reaper is dropped.
    #[allow(dead_code)]
    pub(crate) fn watch(&mut self, child: &Child) {
        self.0.push(child.id());
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        for pid in &self.0 {
            // SAFETY: kill(2) only sends a signal, here to a child process this test started.
            unsafe { libc::kill(*pid as i32, libc::SIGKILL) };
        }
    }
}

/// Sends SIGTERM (a clean stop) to a child process.
pub(crate) fn sigterm(child: &Child) {
    // SAFETY: kill(2) only sends a signal, here to our own child process.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
}

/// Starts `regolith import --quiet archive_1` in the background (for kill loops).
pub(crate) fn spawn_import(data: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_regolith"))
        .arg("--data")
        .arg(data)
        .args(["import", "--quiet", &archive_1_arg()])
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
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
