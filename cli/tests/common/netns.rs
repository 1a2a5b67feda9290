//! Network namespaces for multi-node tests: one namespace per node, veth pairs between chosen pairs, a /32
//! address per node on its namespace's loopback and host routes only to the neighbours a link joins (no
//! forwarding), `regolith run` processes inside the namespaces, and their logs. Dropping the namespaces
//! removes them and the links with them, also when the test fails.
//!
//! Needs `ip` (iproute2) and the right to create network namespaces (root in the sandbox, as in CI).

use regolith_test_support::zerostate_path;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

use super::{ok, regolith};

/// Runs `ip ARGS` and fails the test when it fails.
pub(crate) fn ip(args: &[&str]) {
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

/// A veth pair between two namespaces: its ends, their addresses and the node routes over it.
pub(crate) struct Link {
    /// (namespace, device, this end's address, the node address routed through the other end).
    ends: [(String, String, String, String); 2],
}

impl Link {
    /// Sets both ends down (the routes over the link go with them) or up again with their routes.
    pub(crate) fn set_up(&self, up: bool) {
        for (ns, dev, _, _) in &self.ends {
            ip(&["-n", ns, "link", "set", dev, if up { "up" } else { "down" }]);
        }
        if up {
            self.add_routes();
        }
    }

    fn add_routes(&self) {
        for (k, (ns, _, _, to)) in self.ends.iter().enumerate() {
            let via = &self.ends[1 - k].2;
            ip(&[
                "-n",
                ns,
                "route",
                "replace",
                &format!("{to}/32"),
                "via",
                via,
            ]);
        }
    }
}

/// The namespaces of one test run, node k (from 1) in the k-th, at `{node_net}.k`.
pub(crate) struct Namespaces {
    names: Vec<String>,
    node_net: String,
    tag: String,
}

impl Namespaces {
    /// `nodes` namespaces named after the process id and `label` (tests of one process run side by side),
    /// node k listening on `{node_net}.k/32` on its namespace's loopback.
    pub(crate) fn new(label: &str, nodes: usize, node_net: &str) -> Self {
        let tag = format!("{}{label}", std::process::id() % 100_000);
        let names: Vec<String> = (1..=nodes).map(|k| format!("rg{tag}n{k}")).collect();
        let namespaces = Self {
            names: names.clone(),
            node_net: node_net.to_owned(),
            tag,
        };
        for (k, ns) in names.iter().enumerate() {
            ip(&["netns", "add", ns]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
            let address = format!("{}/32", namespaces.address(k + 1));
            ip(&["-n", ns, "addr", "add", &address, "dev", "lo"]);
        }
        namespaces
    }

    /// Node k's namespace.
    pub(crate) fn name(&self, k: usize) -> &str {
        &self.names[k - 1]
    }

    /// Node k's address.
    pub(crate) fn address(&self, k: usize) -> String {
        format!("{}.{k}", self.node_net)
    }

    /// A veth pair between the namespaces of nodes a and b on `{link_net}.0/30`, and a route to each one's
    /// node address over it.
    pub(crate) fn link(&self, a: usize, b: usize, link_net: &str) -> Link {
        let end = |k: usize, side: &str, host: u8| {
            (
                self.name(k).to_owned(),
                format!("r{}l{a}{b}{side}", self.tag),
                format!("{link_net}.{host}"),
                self.address(if k == a { b } else { a }),
            )
        };
        let link = Link {
            ends: [end(a, "a", 1), end(b, "b", 2)],
        };
        let [(ns_a, dev_a, _, _), (ns_b, dev_b, _, _)] = &link.ends;
        ip(&[
            "link", "add", dev_a, "netns", ns_a, "type", "veth", "peer", "name", dev_b, "netns",
            ns_b,
        ]);
        for (ns, dev, address, _) in &link.ends {
            ip(&[
                "-n",
                ns,
                "addr",
                "add",
                &format!("{address}/30"),
                "dev",
                dev,
            ]);
            ip(&["-n", ns, "link", "set", dev, "up"]);
        }
        link.add_routes();
        link
    }

    /// Whether node `from`'s namespace has a route to node `to`'s address.
    pub(crate) fn reaches(&self, from: usize, to: usize) -> bool {
        Command::new("ip")
            .args(["-n", self.name(from), "route", "get"])
            .arg(self.address(to))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// `regolith --data DATA run` inside node k's namespace, logging to `DATA/run.log`.
    pub(crate) fn run(&self, k: usize, data: &Path) -> Child {
        Command::new("ip")
            .args(["netns", "exec", self.name(k)])
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

impl Drop for Namespaces {
    fn drop(&mut self) {
        for ns in &self.names {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

/// Children stopped on drop (a failing assertion must not leave nodes behind).
pub(crate) struct Nodes(pub Vec<Child>);

impl Nodes {
    /// SIGKILL to node k (from 1), and waits for it.
    pub(crate) fn kill(&mut self, k: usize) {
        let child = &mut self.0[k - 1];
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        for child in &mut self.0 {
            // `ip netns exec` execs the node, so the child's pid is the node's.
            super::sigterm(child);
        }
        for child in &mut self.0 {
            let _ = child.wait();
        }
    }
}

/// `regolith init` in `data` listening on `listen` (announcing `public` when given, else `listen`), with no
/// metrics endpoint and quick peer discovery; `mc_blocks_per_archive` sets the test-only archive span.
pub(crate) fn init_node(
    data: &Path,
    listen: &str,
    public: Option<&str>,
    mc_blocks_per_archive: Option<u32>,
) {
    let zerostate = zerostate_path();
    let mut args = vec![
        "init",
        "--zerostate",
        zerostate.to_str().unwrap(),
        "--listen",
        listen,
        "--metrics",
        "off",
    ];
    if let Some(public) = public {
        args.extend(["--public-address", public]);
    }
    ok(data, &args);
    let path = data.join("node.json");
    let mut config = json(&path);
    let (overlay, dht) = regolith_rpc::network::quick_discovery();
    config["overlay"] = serde_json::to_value(overlay).unwrap();
    config["dht"] = serde_json::to_value(dht).unwrap();
    if let Some(span) = mc_blocks_per_archive {
        config["storage"]["archives"]["mc_blocks_per_archive"] = span.into();
    }
    std::fs::write(&path, config.to_string()).unwrap();
}

/// The node's own signed peer info (`init` writes it as the node's bootstrap peer).
pub(crate) fn own_peer(data: &Path) -> Value {
    json(&data.join("global.json"))["bootstrap_peers"][0].clone()
}

/// Replaces the node's bootstrap peers.
pub(crate) fn set_bootstrap_peers(data: &Path, peers: Vec<Value>) {
    let path = data.join("global.json");
    let mut global = json(&path);
    global["bootstrap_peers"] = Value::Array(peers);
    std::fs::write(&path, global.to_string()).unwrap();
}

/// The last lines of every node's log (printed when a test fails).
pub(crate) fn log_tails(data: &[PathBuf]) -> String {
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

/// A JSON file.
pub(crate) fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The node's last applied mc seqno (0 while `inspect` cannot tell).
pub(crate) fn height(data: &Path) -> u32 {
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
