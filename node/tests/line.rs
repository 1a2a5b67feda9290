//! Line topology on real network namespaces: node1 imports the fixture chain; node2, node3 and node4 each
//! live in a namespace of their own and reach only their neighbours (veth pairs, no forwarding), so node4,
//! three hops from node1, gets the chain only through the relays node3 and node2, which sync and serve.
//!
//! Needs `ip` (iproute2) and the right to create network namespaces (root in the sandbox, as in CI).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

const NODES: usize = 4;
const PORT: u16 = 30_500;

fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .expect("iproute2 `ip`");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The namespaces and links of one test run; dropping it removes them (and the links with them).
struct Line {
    names: Vec<String>,
}

impl Line {
    /// ns1 — ns2 — … — nsN. Node k listens on 10.77.0.k (on its namespace's loopback) and has host routes
    /// to its neighbours' addresses over the veth pair between them, and to nothing else.
    fn new(nodes: usize) -> Self {
        let tag = std::process::id() % 100_000;
        let names: Vec<String> = (1..=nodes).map(|k| format!("rg{tag}n{k}")).collect();
        let line = Self {
            names: names.clone(),
        };
        for ns in &names {
            ip(&["netns", "add", ns]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        for k in 1..=nodes {
            let ns = &names[k - 1];
            ip(&[
                "-n",
                ns,
                "addr",
                "add",
                &format!("10.77.0.{k}/32"),
                "dev",
                "lo",
            ]);
        }
        for k in 1..nodes {
            let (left, right) = (&names[k - 1], &names[k]);
            let (a, b) = (format!("r{tag}l{k}a"), format!("r{tag}l{k}b"));
            ip(&[
                "link", "add", &a, "netns", left, "type", "veth", "peer", "name", &b, "netns",
                right,
            ]);
            ip(&[
                "-n",
                left,
                "addr",
                "add",
                &format!("10.78.{k}.1/30"),
                "dev",
                &a,
            ]);
            ip(&[
                "-n",
                right,
                "addr",
                "add",
                &format!("10.78.{k}.2/30"),
                "dev",
                &b,
            ]);
            ip(&["-n", left, "link", "set", &a, "up"]);
            ip(&["-n", right, "link", "set", &b, "up"]);
            ip(&[
                "-n",
                left,
                "route",
                "add",
                &format!("10.77.0.{}/32", k + 1),
                "via",
                &format!("10.78.{k}.2"),
            ]);
            ip(&[
                "-n",
                right,
                "route",
                "add",
                &format!("10.77.0.{k}/32"),
                "via",
                &format!("10.78.{k}.1"),
            ]);
        }
        line
    }

    /// Whether node `from`'s namespace has a route to node `to`'s address.
    fn reaches(&self, from: usize, to: usize) -> bool {
        Command::new("ip")
            .args(["-n", &self.names[from - 1], "route", "get"])
            .arg(format!("10.77.0.{to}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// `regolith --data DATA run` inside node k's namespace.
    fn run(&self, k: usize, data: &Path) -> Child {
        Command::new("ip")
            .args(["netns", "exec", &self.names[k - 1]])
            .arg(env!("CARGO_BIN_EXE_regolith"))
            .arg("--data")
            .arg(data)
            .arg("run")
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(data.join("run.log")).unwrap())
            .spawn()
            .unwrap()
    }
}

/// The last lines of every node's log (printed when the test fails).
fn log_tails(data: &[PathBuf]) -> String {
    let mut out = String::new();
    for d in data {
        let log = std::fs::read_to_string(d.join("run.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        out.push_str(&format!("--- {}\n", d.display()));
        for line in &lines[lines.len().saturating_sub(15)..] {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

impl Drop for Line {
    fn drop(&mut self) {
        for ns in &self.names {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

/// Children killed on drop (a failing assertion must not leave nodes behind).
struct Nodes(Vec<Child>);

impl Drop for Nodes {
    fn drop(&mut self) {
        for child in &mut self.0 {
            sigterm(child);
        }
        for child in &mut self.0 {
            let _ = child.wait();
        }
    }
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn height(data: &Path) -> u32 {
    let out = regolith(data, &["inspect", "--json", "summary"]);
    if !out.status.success() {
        return 0;
    }
    serde_json::from_slice::<Value>(&out.stdout).unwrap()["last_applied_mc_block"]
        .as_str()
        .and_then(|id| id.split(':').nth(2))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

#[test]
fn a_node_three_hops_away_syncs_through_the_relays() {
    let dir = tempfile::tempdir().unwrap();
    let line = Line::new(NODES);
    assert!(
        line.reaches(2, 1) && line.reaches(4, 3),
        "neighbours reach each other"
    );
    assert!(
        !line.reaches(4, 1) && !line.reaches(3, 1) && !line.reaches(4, 2),
        "only neighbours reach each other"
    );

    let data: Vec<PathBuf> = (1..=NODES)
        .map(|k| dir.path().join(format!("node{k}")))
        .collect();
    let zerostate = fixtures().join("zerostate.boc");
    for (k, d) in data.iter().enumerate() {
        let listen = format!("10.77.0.{}:{PORT}", k + 1);
        ok(
            d,
            &[
                "init",
                "--zerostate",
                zerostate.to_str().unwrap(),
                "--listen",
                &listen,
                "--metrics",
                "off",
            ],
        );
        let path = d.join("node.json");
        let mut config = json(&path);
        let (overlay, dht) = regolith_rpc::network::quick_discovery();
        config["overlay"] = serde_json::to_value(overlay).unwrap();
        config["dht"] = serde_json::to_value(dht).unwrap();
        std::fs::write(&path, config.to_string()).unwrap();
    }
    ok(&data[0], &["import", "--quiet", &archive_1()]);
    // Node k knows only node k−1 (`init` writes the node's own signed peer info as its bootstrap peer).
    let own: Vec<Value> = data
        .iter()
        .map(|d| json(&d.join("global.json"))["bootstrap_peers"][0].clone())
        .collect();
    for k in 1..NODES {
        let previous = own[k - 1].clone();
        let path = data[k].join("global.json");
        let mut global = json(&path);
        global["bootstrap_peers"] = Value::Array(vec![previous]);
        std::fs::write(&path, global.to_string()).unwrap();
    }

    let started = Instant::now();
    let nodes = Nodes((1..=NODES).map(|k| line.run(k, &data[k - 1])).collect());
    let deadline = started + Duration::from_secs(180);
    loop {
        let heights: Vec<u32> = data.iter().map(|d| height(d)).collect();
        if heights.iter().all(|h| *h == 100) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "heights after 180 s: {heights:?}\n{}",
            log_tails(&data)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    eprintln!("node4 holds the chain after {:?}", started.elapsed());
    drop(nodes);

    let last = summary(&data[NODES - 1]);
    assert_full_chain(&last);
    let queue = |d: &Path| beyond_gc(&queue_view(d));
    let archives = |d: &Path| ok(d, &["inspect", "--json", "archives"]);
    for d in &data[1..] {
        assert_eq!(
            summary(d)["blocks_total"],
            summary(&data[0])["blocks_total"],
            "{d:?}"
        );
        assert_eq!(queue(d), queue(&data[0]), "{d:?}: the queue of node1");
        assert_eq!(
            archives(d),
            archives(&data[0]),
            "{d:?}: the archives of node1"
        );
    }
}
