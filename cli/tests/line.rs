//! Line topology on real network namespaces: node1 imports the fixture chain; node2, node3 and node4 each
//! live in a namespace of their own and reach only their neighbours (veth pairs, no forwarding), so node4,
//! three hops from node1, gets the chain only through the relays node3 and node2, which sync and serve.
//!
//! Needs `ip` (iproute2) and the right to create network namespaces (root in the sandbox, as in CI).

mod common;

use regolith_test_support::{archive_1_arg, wait_for};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::netns::*;
use common::*;

const NODES: usize = 4;
const PORT: u16 = 30_500;

#[test]
fn a_node_three_hops_away_syncs_through_the_relays() {
    let dir = tempfile::tempdir().unwrap();
    // ns1 — ns2 — … — nsN: node k listens on 10.77.0.k, the link between k and k+1 is 10.78.k.0/30.
    let line = Namespaces::new("l", NODES, "10.77.0");
    let _links: Vec<Link> = (1..NODES)
        .map(|k| line.link(k, k + 1, &format!("10.78.{k}")))
        .collect();
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
    for (k, d) in data.iter().enumerate() {
        init_node(d, &format!("10.77.0.{}:{PORT}", k + 1), None, None);
    }
    ok(&data[0], &["import", "--quiet", &archive_1_arg()]);
    // Node k knows only node k−1 (`init` writes the node's own signed peer info as its bootstrap peer).
    let own: Vec<_> = data.iter().map(|d| own_peer(d)).collect();
    for k in 1..NODES {
        set_bootstrap_peers(&data[k], vec![own[k - 1].clone()]);
    }

    let started = Instant::now();
    let nodes = Nodes((1..=NODES).map(|k| line.run(k, &data[k - 1])).collect());
    wait_for(Duration::from_secs(180), Duration::from_millis(500), || {
        let heights: Vec<u32> = data.iter().map(|d| height(d)).collect();
        if heights.iter().all(|h| *h == 100) {
            return Ok(());
        }
        Err(format!(
            "heights after 180 s: {heights:?}\n{}",
            log_tails(&data)
        ))
    });
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
