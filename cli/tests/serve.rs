//! End-to-end test of `regolith run`: the binary serves blockchain RPC over QUIC on 127.0.0.1, prints how to
//! reach it, exposes Prometheus metrics and stops cleanly on SIGTERM.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::{metric, spawn_run, Running};
use regolith_formats::archive::ArchiveEntryType;
use regolith_rpc::proto::{self, rpc, OverlayResponse};
use regolith_rpc::RawOverlayClient;
use regolith_test_support::{
    archive_1_bytes, archive_1_path, free_tcp_port, free_udp_port, http_get, wait_until,
    zerostate_path,
};
use tycho_network::PeerInfo;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_serves_rpc_metrics_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    common::ok(
        &data,
        &["init", "--zerostate", zerostate_path().to_str().unwrap()],
    );
    common::ok(
        &data,
        &["import", "--quiet", archive_1_path().to_str().unwrap()],
    );

    // init signed this node's peer info into the global config: created_at = now, finite TTL
    let global: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data.join("global.json")).unwrap()).unwrap();
    let own: PeerInfo = serde_json::from_value(global["bootstrap_peers"][0].clone()).unwrap();
    let now = regolith_rpc::network::now_sec();
    assert!(own.created_at <= now && own.created_at + 60 >= now);
    assert!(own.expires_at > now && own.expires_at != u32::MAX);
    assert!(own.verify(now));

    let metrics_port = free_tcp_port();
    common::edit_node_config(&data, |config| {
        config["listen_address"] = "127.0.0.1:0".into();
        config["metrics_address"] = format!("127.0.0.1:{metrics_port}").into();
    });

    let node = spawn_run(&data);
    let info: PeerInfo = serde_json::from_value(node.peer_info()).unwrap();
    let overlay_id = node.overlay_id();
    assert_eq!(info.id, own.id, "the same node key");

    let client = RawOverlayClient::connect(
        "127.0.0.1:0".parse().unwrap(),
        overlay_id,
        Arc::new(info),
        Default::default(),
    )
    .unwrap();
    let pong = client
        .query(Bytes::from(tl_proto::serialize(proto::Ping)))
        .await
        .unwrap();
    assert_eq!(&pong[..], &[0x04, 0x08, 0x70, 0x67]);
    let answer = client
        .query(Bytes::from(tl_proto::serialize(rpc::GetArchiveInfo {
            mc_seqno: 50,
        })))
        .await
        .unwrap();
    assert_eq!(
        tl_proto::deserialize::<OverlayResponse<proto::ArchiveInfo>>(&answer).unwrap(),
        OverlayResponse::Ok(proto::ArchiveInfo::TooNew),
        "archive 1 is still the open archive"
    );
    assert!(
        client
            .query(Bytes::from_static(&[9, 9, 9, 9]))
            .await
            .is_err(),
        "unknown: no answer"
    );

    // getBlockFull for every block of archive_1, answered by the `regolith` process to this one: block,
    // proof and queue diff byte-identical to the archive entries.
    let compressed = archive_1_bytes();
    let mut reader =
        regolith_formats::archive::ArchiveReader::new_compressed(&compressed[..]).unwrap();
    let mut entries = std::collections::HashMap::new();
    let mut order = Vec::new();
    while let Some(e) = reader.next_entry().unwrap() {
        if e.ty == ArchiveEntryType::Block {
            order.push(e.block_id);
        }
        entries.insert((e.block_id, e.ty), e.data);
    }
    assert_eq!(order.len(), 107);
    for id in &order {
        let answer = client
            .query(Bytes::from(tl_proto::serialize(rpc::GetBlockFull {
                block_id: *id,
            })))
            .await
            .unwrap();
        let OverlayResponse::Ok(proto::BlockFull::Found {
            block_id,
            block,
            proof,
            queue_diff,
        }) = tl_proto::deserialize::<OverlayResponse<proto::BlockFull>>(&answer).unwrap()
        else {
            panic!("block {id} not found");
        };
        assert_eq!(&block_id, id);
        assert_eq!(
            zstd::decode_all(&block.data[..]).unwrap(),
            entries[&(*id, ArchiveEntryType::Block)],
            "block {id}"
        );
        assert_eq!(&proof[..], &entries[&(*id, ArchiveEntryType::Proof)][..]);
        assert_eq!(
            &queue_diff[..],
            &entries[&(*id, ArchiveEntryType::QueueDiff)][..]
        );
    }

    let metrics = http_get(metrics_port, "/metrics").expect("the metrics endpoint answers");
    let has = |parts: &[&str], value: &str| {
        metrics
            .lines()
            .any(|l| parts.iter().all(|p| l.contains(p)) && l.ends_with(&format!(" {value}")))
    };
    assert!(
        has(&["regolith_rpc_requests_total{", "method=\"ping\""], "1"),
        "{metrics}"
    );
    assert!(
        has(
            &[
                "regolith_rpc_answers_total{",
                "method=\"getArchiveInfo\"",
                "code=\"ok\""
            ],
            "1"
        ),
        "{metrics}"
    );
    assert!(
        has(
            &["regolith_rpc_request_seconds_count{", "method=\"ping\""],
            "1"
        ),
        "{metrics}"
    );
    assert!(
        has(&["regolith_rpc_unknown_queries_total"], "1"),
        "{metrics}"
    );

    // SIGTERM → clean exit
    common::stop_within(node.child, Duration::from_secs(20));
}

fn init_with(data: &Path, extra: &[&str]) -> std::process::Output {
    let zerostate = zerostate_path();
    let mut args = vec!["init", "--zerostate", zerostate.to_str().unwrap()];
    args.extend_from_slice(extra);
    common::regolith(data, &args)
}

fn stop(mut running: Running) {
    common::sigterm(&running.child);
    let status = running.child.wait().unwrap();
    assert!(status.success(), "{status}");
}

#[test]
fn several_nodes_on_one_machine_and_ports_in_use() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, c, d) = (
        dir.path().join("a"),
        dir.path().join("b"),
        dir.path().join("c"),
        dir.path().join("d"),
    );
    let (listen_a, metrics_a) = (
        format!("127.0.0.1:{}", free_udp_port()),
        format!("127.0.0.1:{}", free_tcp_port()),
    );
    let (listen_b, metrics_b) = (
        format!("127.0.0.1:{}", free_udp_port()),
        format!("127.0.0.1:{}", free_tcp_port()),
    );
    for (data, listen, metrics) in [(&a, &listen_a, &metrics_a), (&b, &listen_b, &metrics_b)] {
        let out = init_with(data, &["--listen", listen, "--metrics", metrics]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let config: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(data.join("node.json")).unwrap())
                .unwrap();
        assert_eq!(config["listen_address"], listen.as_str());
        assert_eq!(config["metrics_address"], metrics.as_str());
    }
    // Re-running init with another address refuses and names the field.
    let out = init_with(&a, &["--listen", &listen_b]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("listen_address"));

    // Both nodes run side by side.
    let node_a = spawn_run(&a);
    let node_b = spawn_run(&b);
    assert_eq!(node_a.quic_address(), listen_a);
    assert_eq!(node_b.quic_address(), listen_b);
    for metrics in [&metrics_a, &metrics_b] {
        let port: u16 = metrics.rsplit(':').next().unwrap().parse().unwrap();
        assert!(http_get(port, "/metrics")
            .expect("the metrics endpoint answers")
            .starts_with("HTTP/1.1 200"));
    }

    // A third node on a's QUIC port, and a fourth on a's metrics port: each stops with an error that names
    // the address and the node.json field that sets it.
    let out = init_with(&c, &["--listen", &listen_a, "--metrics", "off"]);
    assert!(out.status.success());
    let config = std::fs::read_to_string(c.join("node.json")).unwrap();
    assert!(config.contains("\"metrics_address\": null"), "{config}");
    let listen_d = format!("127.0.0.1:{}", free_udp_port());
    let out = init_with(
        &d,
        &[
            "--listen",
            &listen_d,
            "--public-address",
            "10.1.2.3:4000",
            "--metrics",
            &metrics_a,
        ],
    );
    assert!(out.status.success());
    let config = std::fs::read_to_string(d.join("node.json")).unwrap();
    assert!(
        config.contains("\"public_address\": \"10.1.2.3:4000\""),
        "{config}"
    );
    for (data, address, field) in [
        (&c, &listen_a, "listen_address"),
        (&d, &metrics_a, "metrics_address"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_regolith"))
            .arg("--data")
            .arg(data)
            .arg("run")
            .env("RUST_LOG", "warn")
            .output()
            .unwrap();
        assert!(!out.status.success(), "{field}: run should fail");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(address.as_str()), "{field}: {err}");
        assert!(err.contains(&format!("`{field}`")), "{field}: {err}");
        assert!(err.contains("node.json"), "{field}: {err}");
        assert!(!err.contains("panicked"), "{field}: {err}");
    }
    stop(node_a);
    stop(node_b);
}

fn p2p(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_regolith"))
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap()
}

fn json_of(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn p2p_fetches_verifies_and_writes_from_a_running_node() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let listen = format!("127.0.0.1:{}", free_udp_port());
    let out = init_with(&data, &["--listen", &listen, "--metrics", "off"]);
    assert!(out.status.success());
    common::ok(
        &data,
        &["import", "--quiet", archive_1_path().to_str().unwrap()],
    );
    let node = spawn_run(&data);
    let global = data.join("global.json");
    let global = global.to_str().unwrap();
    let other = dir.path().join("elsewhere");
    let other = other.to_str().unwrap();
    let base = [
        "--data",
        other,
        "p2p",
        "--global-config",
        global,
        "--json",
        "--timeout",
        "20s",
    ];
    let run = |extra: &[&str]| {
        let mut args: Vec<&str> = base.to_vec();
        args.extend_from_slice(extra);
        p2p(&args)
    };

    let compressed = archive_1_bytes();
    let mut reader =
        regolith_formats::archive::ArchiveReader::new_compressed(&compressed[..]).unwrap();
    let mut entries = std::collections::HashMap::new();
    let mut order = Vec::new();
    while let Some(e) = reader.next_entry().unwrap() {
        if e.ty == ArchiveEntryType::Block {
            order.push(e.block_id);
        }
        entries.insert((e.block_id, e.ty), e.data);
    }
    let mc = |seqno: u32| {
        *order
            .iter()
            .find(|id| id.is_masterchain() && id.seqno == seqno)
            .unwrap()
    };
    let check_dir = |dir: &Path, id: &regolith_formats::BlockId| {
        for (name, ty) in [
            ("block.boc", ArchiveEntryType::Block),
            ("proof.boc", ArchiveEntryType::Proof),
            ("queue_diff.bin", ArchiveEntryType::QueueDiff),
        ] {
            assert_eq!(
                std::fs::read(dir.join(name)).unwrap(),
                entries[&(*id, ty)],
                "{name} of {id}"
            );
        }
    };

    // A block by id and by next, written only after verification.
    let by_id = dir.path().join("by_id");
    let answer = json_of(&run(&[
        "get-block",
        &mc(42).to_string(),
        "--out",
        by_id.to_str().unwrap(),
    ]));
    assert_eq!(answer["block_id"], mc(42).to_string());
    assert!(answer["neighbour"].as_str().is_some_and(|n| n.len() == 64));
    // proven by the validators' signatures, against the zerostate's validator set
    assert_eq!(answer["proof"]["signatures"], 3, "{answer}");
    check_dir(&by_id, &mc(42));
    let next = dir.path().join("next");
    let answer = json_of(&run(&[
        "get-block",
        &mc(42).to_string(),
        "--next",
        "--out",
        next.to_str().unwrap(),
    ]));
    assert_eq!(answer["block_id"], mc(43).to_string());
    check_dir(&next, &mc(43));
    // A block nobody has: an error that says so, and nothing written.
    let missing = regolith_formats::BlockId {
        seqno: 500,
        ..mc(42)
    };
    let nowhere = dir.path().join("nowhere");
    let out = run(&[
        "get-block",
        &missing.to_string(),
        "--out",
        nowhere.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not have the block"));
    assert!(!nowhere.exists());

    // The zerostate proof, checked against the global config's zerostate, and the zerostate states.
    let proof = dir.path().join("zerostate_proof.boc");
    json_of(&run(&[
        "get-zerostate-proof",
        "--out",
        proof.to_str().unwrap(),
    ]));
    let zerostate = std::fs::read(zerostate_path()).unwrap();
    let zs = regolith_formats::zerostate::McZerostate::parse(&zerostate).unwrap();
    regolith_formats::zerostate::check_zerostate_proof(
        &std::fs::read(&proof).unwrap(),
        &zs.id.root_hash,
    )
    .unwrap();
    let state = dir.path().join("zerostate.boc");
    json_of(&run(&[
        "get-state",
        &zs.id.to_string(),
        "--out",
        state.to_str().unwrap(),
    ]));
    assert_eq!(std::fs::read(&state).unwrap(), zerostate);
    let shard = zs.listed_shards().unwrap()[0].id;
    let shard_state = dir.path().join("shard.boc");
    json_of(&run(&[
        "get-state",
        &shard.to_string(),
        "--out",
        shard_state.to_str().unwrap(),
    ]));
    let root = tycho_types::boc::Boc::decode(std::fs::read(&shard_state).unwrap()).unwrap();
    assert_eq!(*root.repr_hash(), shard.root_hash);
    let queue_state = dir.path().join("queue.bin");
    let out = run(&[
        "get-state",
        &shard.to_string(),
        "--queue",
        "--out",
        queue_state.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("no neighbour has the persistent queue state"));
    assert!(!queue_state.exists());

    // Key block ids, the archive (still open: too new), ping.
    let answer = json_of(&run(&["get-key-block-ids", &zs.id.to_string()]));
    assert_eq!(answer["key_block_ids"], serde_json::json!([]));
    assert_eq!(answer["incomplete"], true);
    let archive = dir.path().join("archive.bin");
    let out = run(&["get-archive", "50", "--out", archive.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("too new"));
    assert!(!archive.exists());
    let answer = json_of(&run(&["ping"]));
    let neighbours = answer["neighbours"].as_array().unwrap();
    assert_eq!(neighbours.len(), 1);
    assert!(neighbours[0]["rtt_ms"].as_f64().is_some());

    // A global config without bootstrap peers is refused with a clear error.
    let empty = dir.path().join("empty_global.json");
    let mut g: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data.join("global.json")).unwrap()).unwrap();
    g["bootstrap_peers"] = serde_json::json!([]);
    std::fs::write(&empty, g.to_string()).unwrap();
    let out = p2p(&[
        "--data",
        other,
        "p2p",
        "--global-config",
        empty.to_str().unwrap(),
        "ping",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no valid bootstrap peer"));
    stop(node);
}

#[test]
fn devnet_nodes_sync_from_the_one_that_imported_the_chain() {
    let dir = tempfile::tempdir().unwrap();
    // Six consecutive free ports (3 × QUIC + metrics) in a range the other tests do not use.
    let base = 40_000 + (std::process::id() % 2_000) as u16 * 8;
    let run = || {
        Command::new(env!("CARGO_BIN_EXE_regolith"))
            .args([
                "devnet",
                "--nodes",
                "3",
                "--exit-when-synced",
                "--base-port",
            ])
            .arg(base.to_string())
            .arg("--dir")
            .arg(dir.path())
            .arg("--zerostate")
            .arg(zerostate_path())
            .arg("--archive")
            .arg(archive_1_path())
            .env("RUST_LOG", "warn")
            .output()
            .unwrap()
    };
    let out = run();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("every node holds the chain: mc block 100"),
        "{stdout}"
    );
    for k in 2..=3 {
        let data = dir.path().join(format!("node{k}"));
        let summary: serde_json::Value = serde_json::from_slice(
            &Command::new(env!("CARGO_BIN_EXE_regolith"))
                .arg("--data")
                .arg(&data)
                .args(["inspect", "--json", "summary"])
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap();
        assert_eq!(summary["blocks_total"], 109, "node{k}: {summary}");
        assert!(summary["last_applied_mc_block"]
            .as_str()
            .unwrap()
            .starts_with("-1:8000000000000000:100:"));
        let node1 = dir.path().join("node1");
        assert_eq!(
            inspect_json(&data, &["summary", "--digest"])["chain_digest"],
            inspect_json(&node1, &["summary", "--digest"])["chain_digest"],
            "node{k}: the blocks, proofs, queue diffs and connections of node1"
        );
        assert_eq!(
            inspect_json(&data, &["archives"]),
            inspect_json(&node1, &["archives"]),
            "node{k}: the archives of node1"
        );
        assert_eq!(
            common::beyond_gc(&inspect_json(&data, &["queue"])),
            common::beyond_gc(&inspect_json(&node1, &["queue"])),
            "node{k}: the queue of node1"
        );
    }
    // A second run resumes: nothing is downloaded again, every node is level at once.
    let out = run();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("every node holds the chain: mc block 100"),
        "{stdout}"
    );
}

fn metrics_height(port: u16) -> Option<u64> {
    metric(port, "regolith_sync_last_applied_mc_seqno").map(|v| v as u64)
}

fn inspect_json(data: &Path, args: &[&str]) -> serde_json::Value {
    let mut inspect = vec!["inspect", "--json"];
    inspect.extend_from_slice(args);
    json_of(&common::regolith(data, &inspect))
}

/// Discovery periods of seconds (as `regolith devnet` writes them): a restarted node finds its peer at once.
fn quick_discovery(data: &Path) {
    common::edit_node_config(data, |config| {
        let (overlay, dht) = regolith_rpc::network::quick_discovery();
        config["overlay"] = serde_json::to_value(overlay).unwrap();
        config["dht"] = serde_json::to_value(dht).unwrap();
    });
}

/// At least 20 SIGKILLs while a node syncs: half of them at a random instant within 100 ms of the node being
/// up (during discovery, a download or an import), half right after the height moved. The node resumes each time;
/// the serving node counts every block it served, so the test bounds what was downloaded twice (at most
/// the group in flight at each kill); and the node ends with the chain, archives and queue of the node
/// that imported the archive.
#[test]
fn sigkill_during_sync_resumes_to_the_same_chain() {
    use rand::Rng;
    const KILLS: usize = 20;
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let listen_a = format!("127.0.0.1:{}", free_udp_port());
    let metrics_a = free_tcp_port();
    assert!(init_with(
        &a,
        &[
            "--listen",
            &listen_a,
            "--metrics",
            &format!("127.0.0.1:{metrics_a}")
        ]
    )
    .status
    .success());
    quick_discovery(&a);
    common::ok(
        &a,
        &["import", "--quiet", archive_1_path().to_str().unwrap()],
    );
    let node_a = spawn_run(&a);

    let metrics_b = free_tcp_port();
    let listen_b = format!("127.0.0.1:{}", free_udp_port());
    let metrics_arg = format!("127.0.0.1:{metrics_b}");
    assert!(
        init_with(&b, &["--listen", &listen_b, "--metrics", &metrics_arg])
            .status
            .success()
    );
    quick_discovery(&b);
    let read = |p: &Path| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(p.join("global.json")).unwrap()).unwrap()
    };
    let mut global_b = read(&b);
    let peer_a = read(&a)["bootstrap_peers"][0].clone();
    global_b["bootstrap_peers"]
        .as_array_mut()
        .unwrap()
        .push(peer_a);
    std::fs::write(b.join("global.json"), global_b.to_string()).unwrap();

    let height = |data: &Path| {
        inspect_json(data, &["summary"])["last_applied_mc_block"]
            .as_str()
            .and_then(|id| id.split(':').nth(2).map(|s| s.parse::<u32>().unwrap()))
            .unwrap_or(0)
    };
    let mut rng = rand::thread_rng();
    let mut kills = 0;
    let mut heights = Vec::new();
    while kills < KILLS {
        let before = height(&b);
        assert!(
            before < 100,
            "synced before {KILLS} kills: heights {heights:?}"
        );
        let mut child = common::run_process(&b, Stdio::null());
        if kills % 2 == 0 {
            // At a random instant soon after the node is up: discovery, a download or an import.
            wait_until(
                "node b did not start",
                Duration::from_secs(60),
                Duration::from_millis(10),
                || metrics_height(metrics_b).is_some(),
            );
            std::thread::sleep(Duration::from_millis(rng.gen_range(0..100)));
        } else {
            // Right after the height moved (read from the node's own metrics).
            wait_until(
                &format!("no progress after {before}"),
                Duration::from_secs(60),
                Duration::from_millis(10),
                || metrics_height(metrics_b).is_some_and(|h| h > u64::from(before)),
            );
            std::thread::sleep(Duration::from_millis(rng.gen_range(0..20)));
        }
        let _ = child.kill();
        child.wait().unwrap();
        kills += 1;
        heights.push(height(&b));
    }
    eprintln!("heights after each of the {kills} kills: {heights:?}");
    let node_b = spawn_run(&b);
    wait_until(
        "node b did not reach mc 100",
        Duration::from_secs(120),
        Duration::from_millis(200),
        || metrics_height(metrics_b) == Some(100),
    );
    assert_eq!(
        metric(metrics_b, "regolith_sync_lag_blocks"),
        Some(0.0),
        "at the tip of its peer"
    );
    stop(node_b);
    let served = metric(metrics_a, "regolith_rpc_blocks_served_total").unwrap_or(0.0) as usize;
    eprintln!("blocks served: {served} for 107 blocks and {kills} kills");
    assert!(served >= 107, "every block came from a: {served}");
    // A kill loses what was in flight: the batch being applied and the one asked for meanwhile, each at
    // most 16 mc blocks with the shard blocks they reference (7 in the whole chain).
    let in_flight = 2 * (proto::MAX_BATCH_MC_BLOCKS as usize + 7);
    assert!(
        served <= 107 + in_flight * kills,
        "at most the batches in flight are downloaded again at each kill: {served} served"
    );
    stop(node_a);

    let summary = inspect_json(&b, &["summary", "--digest"]);
    assert_eq!(summary["blocks_total"], 109, "{summary}");
    assert_eq!(
        summary["chain_digest"],
        inspect_json(&a, &["summary", "--digest"])["chain_digest"],
        "blocks, proofs, queue diffs and connections equal to the importing node's"
    );
    for key in [
        "orphaned_flags_count",
        "restored_flags_count",
        "dangling_ids_count",
    ] {
        assert_eq!(summary["startup_check"][key], 0, "{key}: {summary}");
    }
    // Both nodes run queue GC on their own schedule: the queues are compared above the GC bounds.
    let queue = |data: &Path| common::beyond_gc(&inspect_json(data, &["queue"]));
    assert_eq!(
        queue(&b),
        queue(&a),
        "the same queue as the node that imported the archive"
    );
    assert_eq!(
        inspect_json(&b, &["archives"]),
        inspect_json(&a, &["archives"]),
        "the same archives"
    );
}

#[test]
fn node_json_is_written_for_its_owner_only_and_a_readable_one_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("n");
    let listen = format!("127.0.0.1:{}", free_udp_port());
    let out = init_with(&data, &["--listen", &listen, "--metrics", "off"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = data.join("node.json");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(
        mode(&path),
        0o600,
        "init writes node.json for its owner only"
    );
    // Re-running init keeps the mode.
    let out = init_with(&data, &["--listen", &listen, "--metrics", "off"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(mode(&path), 0o600);

    for loose in [0o644, 0o640, 0o606] {
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(loose)).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_regolith"))
            .arg("--data")
            .arg(&data)
            .arg("run")
            .output()
            .unwrap();
        assert!(!out.status.success(), "mode {loose:o} is refused");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&path.display().to_string()) && err.contains("chmod 600"),
            "the error names the file and the fix: {err}"
        );
    }
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    stop(spawn_run(&data));
}
