//! End-to-end test of `regolith run`: the binary serves blockchain RPC over QUIC on 127.0.0.1, prints how to
//! reach it, exposes Prometheus metrics and stops cleanly on SIGTERM.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use regolith_formats::archive::ArchiveEntryType;
use regolith_rpc::proto::{self, rpc, OverlayResponse};
use regolith_rpc::RawOverlayClient;
use tycho_network::PeerInfo;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures")
}

fn regolith(data: &Path, args: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_regolith"))
        .arg("--data")
        .arg(data)
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn http_get(port: u16, path: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_serves_rpc_metrics_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    regolith(
        &data,
        &[
            "init",
            "--zerostate",
            fixtures().join("zerostate.boc").to_str().unwrap(),
        ],
    );
    regolith(
        &data,
        &[
            "import",
            "--quiet",
            fixtures().join("archive_1.bin").to_str().unwrap(),
        ],
    );

    // init signed this node's peer info into the global config: created_at = now, finite TTL
    let global: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data.join("global.json")).unwrap()).unwrap();
    let own: PeerInfo = serde_json::from_value(global["bootstrap_peers"][0].clone()).unwrap();
    let now = regolith_rpc::network::now_sec();
    assert!(own.created_at <= now && own.created_at + 60 >= now);
    assert!(own.expires_at > now && own.expires_at != u32::MAX);
    assert!(own.verify(now));

    let metrics_port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data.join("node.json")).unwrap()).unwrap();
    config["listen_address"] = "127.0.0.1:0".into();
    config["metrics_address"] = format!("127.0.0.1:{metrics_port}").into();
    std::fs::write(
        data.join("node.json"),
        serde_json::to_vec_pretty(&config).unwrap(),
    )
    .unwrap();

    let mut child = Command::new(env!("CARGO_BIN_EXE_regolith"))
        .arg("--data")
        .arg(&data)
        .arg("run")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut peer_info = None;
    let mut overlay_id = None;
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some(v) = line.trim().strip_prefix("overlay id:") {
            overlay_id = Some(v.trim().to_owned());
        }
        if let Some(v) = line.trim().strip_prefix("peer info:") {
            peer_info = Some(v.trim().to_owned());
            break;
        }
    }
    let info: PeerInfo =
        serde_json::from_str(&peer_info.expect("run prints the peer info")).unwrap();
    let overlay_id: [u8; 32] = hex::decode(overlay_id.unwrap())
        .unwrap()
        .try_into()
        .unwrap();
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
    let compressed = std::fs::read(fixtures().join("archive_1.bin")).unwrap();
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

    let metrics = http_get(metrics_port, "/metrics");
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
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no exit after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(status.success(), "{status}");
    drop(lines);
}
