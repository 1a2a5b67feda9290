//! Network faults (issue #11 part 4): a fresh node syncs the fixture chain from two serving nodes under
//! packet loss, latency with jitter, a serving node killed in the middle of an archive download and a
//! partition that heals, and ends identical to the serving node that stayed up: same chain digest
//! (`inspect summary --digest`), same archives, same queue above the GC bounds. Each test prints its sync
//! time; `scripts/faults.sh` runs them all and prints the table.
//!
//! Topology: three network namespaces, the servers s1 and s2 (both import the fixture chain, so two
//! independent sources hold it from the start) and the fresh node f, linked to each server by a veth pair;
//! the servers do not reach each other. Every node announces a port where a relay in its namespace
//! ([`common::relay`]) listens and impairs what it forwards: the kernel here has no netem. Archives span 10
//! mc blocks (`storage.archives.mc_blocks_per_archive`), so the sync downloads nine committed archives, then
//! takes the last ten blocks one by one.
//!
//! Needs root (network namespaces), as CI has.

mod common;

use regolith_test_support::archive_1_arg;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::netns::*;
use common::*;
use regolith_testbed::relay::{Impairment, Relay};

/// The port a node listens on, and the one its relay listens on (the one it announces).
const LISTEN_PORT: u16 = 30_600;
const PUBLIC_PORT: u16 = 30_601;
const SERVERS: [usize; 2] = [1, 2];
const FRESH: usize = 3;
const SPAN: u32 = 10;
/// Generous: the box is loaded and the slowest scenarios wait out timeouts.
const DEADLINE: Duration = Duration::from_secs(400);

/// The fault a scenario applies.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Fault {
    None,
    Loss,
    Latency,
    KillServer,
    Partition,
}

/// One scenario's network: namespaces, links, relays and data dirs.
struct Net {
    namespaces: Namespaces,
    links: Vec<Link>,
    _relays: Vec<Relay>,
    data: Vec<PathBuf>,
    dir: tempfile::TempDir,
}

impl Net {
    /// `label` and `subnet` keep scenarios that run side by side apart: nodes at 10.{subnet}.0.k, links on
    /// 10.{subnet+1}.k.0/30 (line.rs uses 10.77 and 10.78).
    fn new(label: &str, subnet: u8, impairment: Impairment) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let namespaces = Namespaces::new(label, 3, &format!("10.{subnet}.0"));
        let links = SERVERS
            .iter()
            .map(|&s| namespaces.link(FRESH, s, &format!("10.{}.{s}", subnet + 1)))
            .collect();
        for &s in &SERVERS {
            assert!(namespaces.reaches(FRESH, s) && namespaces.reaches(s, FRESH));
        }
        assert!(
            !namespaces.reaches(1, 2),
            "the servers do not reach each other"
        );
        let data: Vec<PathBuf> = (1..=3).map(|k| dir.path().join(format!("n{k}"))).collect();
        let addr = |k: usize, port: u16| -> SocketAddr {
            format!("{}:{port}", namespaces.address(k)).parse().unwrap()
        };
        let relays = (1..=3)
            .map(|k| {
                let (listen, public) = (addr(k, LISTEN_PORT), addr(k, PUBLIC_PORT));
                init_node(
                    &data[k - 1],
                    &listen.to_string(),
                    Some(&public.to_string()),
                    Some(SPAN),
                );
                Relay::start(namespaces.name(k), public, listen, impairment).expect("the relay")
            })
            .collect();
        for &s in &SERVERS {
            ok(&data[s - 1], &["import", "--quiet", &archive_1_arg()]);
        }
        let servers = SERVERS.iter().map(|&s| own_peer(&data[s - 1])).collect();
        set_bootstrap_peers(&data[FRESH - 1], servers);
        Self {
            namespaces,
            links,
            _relays: relays,
            data,
            dir,
        }
    }

    fn data(&self, k: usize) -> &Path {
        &self.data[k - 1]
    }

    fn fresh_log(&self) -> String {
        std::fs::read_to_string(self.data(FRESH).join("run.log")).unwrap_or_default()
    }
}

/// What the scenario saw besides the sync time.
struct Outcome {
    elapsed: Duration,
    /// The server left to compare with.
    reference: usize,
}

/// Runs the scenario: the servers first, then the fresh node until it holds mc block 100; applies the fault
/// on the way and checks that the fresh node ends identical to a server that stayed up. The sync time runs
/// from the fresh node's start (peer discovery included) to mc block 100.
fn sync_under(fault: Fault, label: &str, subnet: u8) -> Duration {
    let impairment = match fault {
        Fault::Loss => Impairment {
            loss: 0.05,
            ..Default::default()
        },
        Fault::Latency => Impairment {
            delay: Duration::from_millis(100),
            jitter: Duration::from_millis(20),
            ..Default::default()
        },
        // Slow answers, so that an archive download lasts long enough to be interrupted.
        Fault::KillServer => Impairment {
            delay: Duration::from_millis(150),
            ..Default::default()
        },
        Fault::None | Fault::Partition => Impairment::default(),
    };
    let net = Net::new(label, subnet, impairment);
    let mut nodes = Nodes(
        SERVERS
            .iter()
            .map(|&s| net.namespaces.run(s, net.data(s)))
            .collect(),
    );
    let started = Instant::now();
    nodes.0.push(net.namespaces.run(FRESH, net.data(FRESH)));
    let outcome = match fault {
        Fault::KillServer => kill_during_an_archive_download(&net, &mut nodes, started),
        Fault::Partition => partition_for_10_s(&net, started),
        _ => Outcome {
            elapsed: wait_for_the_chain(&net, started),
            reference: 1,
        },
    };
    drop(nodes);
    eprintln!(
        "faults: {fault:?}: the fresh node synced in {:.1} s",
        outcome.elapsed.as_secs_f64()
    );
    if std::env::var_os("REGOLITH_FAULTS_KEEP").is_some() {
        // The data dirs and logs stay for a look, also when the comparison below fails.
        let kept = net.dir.keep();
        eprintln!("faults: {fault:?}: data in {}", kept.display());
    }
    assert_identical(&net.data[FRESH - 1], &net.data[outcome.reference - 1]);
    outcome.elapsed
}

/// Waits until the fresh node holds mc block 100; the time since `started`.
fn wait_for_the_chain(net: &Net, started: Instant) -> Duration {
    loop {
        if height(net.data(FRESH)) == 100 {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < DEADLINE,
            "the fresh node is at {} after {DEADLINE:?}\n{}",
            height(net.data(FRESH)),
            log_tails(&net.data)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits for the fresh node to start downloading the third archive (two applied before it, six after),
/// SIGKILLs the server it downloads from, and checks from the fresh node's log that the kill cut that very
/// download: the download from the killed server failed.
fn kill_during_an_archive_download(net: &Net, nodes: &mut Nodes, started: Instant) -> Outcome {
    let peers: Vec<String> = SERVERS
        .iter()
        .map(|&s| {
            own_peer(net.data(s))["id"]
                .as_str()
                .expect("a peer id")
                .to_owned()
        })
        .collect();
    let target_archive = 2 * SPAN + 1;
    let line = wait_for_a_download(net, target_archive, started);
    let index = peers
        .iter()
        .position(|p| line.contains(p.as_str()))
        .unwrap_or_else(|| panic!("no server's peer id in {line:?}: {peers:?}"));
    let (victim, peer) = (SERVERS[index], peers[index].clone());
    nodes.kill(victim);
    let at_kill = net.fresh_log();
    let failed = format!("downloading archive {target_archive} from {peer}");
    assert!(
        !at_kill.contains(&failed),
        "the download failed before the kill:\n{at_kill}"
    );
    let elapsed = wait_for_the_chain(net, started);
    let log = net.fresh_log();
    let failure = log
        .lines()
        .find(|l| l.contains(&failed))
        .unwrap_or_else(|| {
            panic!(
            "the kill of server {victim} did not cut the download of archive {target_archive} (no \
             `{failed}` in the log): it had finished before\n{}",
            log_tails(&net.data)
        )
        });
    // The server went silent: the failure is the transport's, not a fault found in what it sent.
    assert!(
        !failure.contains("invalid response"),
        "a download cut by a dead server is blamed on its content: {failure}"
    );
    eprintln!("faults: killed server {victim} while it served archive {target_archive}");
    Outcome {
        elapsed,
        reference: if victim == 1 { 2 } else { 1 },
    }
}

/// The fresh node's log line saying it started downloading the archive with this id (waits for it).
fn wait_for_a_download(net: &Net, archive: u32, started: Instant) -> String {
    let needle = format!("archive={archive} ");
    loop {
        let log = net.fresh_log();
        let line = log
            .lines()
            .find(|l| l.contains("downloading an archive") && l.contains(&needle));
        if let Some(line) = line {
            return line.to_owned();
        }
        assert!(
            started.elapsed() < DEADLINE,
            "no download of archive {archive} after {DEADLINE:?}\n{}",
            log_tails(&net.data)
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Cuts both links (`ip link set down` on both ends) once the fresh node has started downloading its second
/// archive, heals them 10 s later, and checks that the partition caught the sync in the middle.
fn partition_for_10_s(net: &Net, started: Instant) -> Outcome {
    wait_for_a_download(net, SPAN + 1, started);
    for link in &net.links {
        link.set_up(false);
    }
    assert!(
        SERVERS.iter().all(|&s| !net.namespaces.reaches(FRESH, s)),
        "the partition cuts both servers off"
    );
    std::thread::sleep(Duration::from_secs(10));
    let at_heal = height(net.data(FRESH));
    for link in &net.links {
        link.set_up(true);
    }
    eprintln!(
        "faults: partitioned while downloading archive {}, healed at mc block {at_heal}",
        SPAN + 1
    );
    assert!(
        at_heal < 100,
        "the sync had finished before the partition healed: nothing was tested"
    );
    Outcome {
        elapsed: wait_for_the_chain(net, started),
        reference: 1,
    }
}

/// The fresh node holds what the server holds: the chain digest, the archives, the queue above GC.
fn assert_identical(fresh: &Path, server: &Path) {
    assert_full_chain(&summary(fresh));
    let digest = |d: &Path| -> serde_json::Value {
        serde_json::from_str::<serde_json::Value>(&ok(
            d,
            &["inspect", "--json", "summary", "--digest"],
        ))
        .unwrap()["chain_digest"]
            .clone()
    };
    assert!(digest(fresh).is_string(), "a chain digest");
    assert_eq!(digest(fresh), digest(server), "the chain digest");
    let archives = |d: &Path| ok(d, &["inspect", "--json", "archives"]);
    assert_eq!(archives(fresh), archives(server), "the archives");
    let queue = |d: &Path| beyond_gc(&queue_view(d));
    assert_eq!(queue(fresh), queue(server), "the queue above the GC bounds");
}

#[test]
fn a_clean_sync_from_two_servers() {
    sync_under(Fault::None, "c", 80);
}

#[test]
fn a_sync_under_5_percent_packet_loss() {
    sync_under(Fault::Loss, "o", 82);
}

#[test]
fn a_sync_under_100_ms_latency_with_20_ms_jitter() {
    sync_under(Fault::Latency, "d", 84);
}

#[test]
fn a_sync_survives_a_server_killed_during_an_archive_download() {
    sync_under(Fault::KillServer, "k", 86);
}

#[test]
fn a_sync_survives_a_partition_that_heals_after_10_s() {
    sync_under(Fault::Partition, "p", 88);
}
