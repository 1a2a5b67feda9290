//! rpc.md §10 items 10 (S3 provider) and 11 (hybrid provider), against a real S3-compatible server on
//! loopback: `moto` in server mode, started here. A missing server fails the tests loudly.

mod common;

use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use object_store::aws::AmazonS3Builder;
use object_store::path::Path;
use object_store::{ObjectStore, PutPayload};
use regolith_rpc::config::{S3ClientConfig, S3Credentials, S3ProxyConfig};
use regolith_rpc::proto::{self, rpc, OverlayResponse};
use regolith_rpc::providers::{block_key_text, S3Settings, StateChunkRequest};
use regolith_rpc::{
    ArchiveLookup, BlockchainRpcService, HybridProvider, RpcDataProvider, S3Provider, StateInfo,
    StateKind, StatePart,
};
use regolith_test_support::{fixture_bytes, free_tcp_port, http_request};

const MIB: u64 = 1 << 20;
const BUCKET: &str = "regolith";

/// A moto server on 127.0.0.1, killed on drop.
struct S3Server {
    child: Child,
    endpoint: String,
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts moto on a free port. A port picked free can be taken by another process before moto binds it (the
/// tests of this workspace bind many), so a start that does not answer as moto is retried on a new port.
fn start_server() -> S3Server {
    let python = std::env::var("REGOLITH_PYTHON").unwrap_or_else(|_| "python3".into());
    let mut last_failure = String::new();
    for _ in 0..5 {
        let port = free_tcp_port();
        let child = Command::new(&python)
            .args(["-m", "moto.server", "-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start the S3 test server ({python} -m moto.server): {e}; run `pip install 'moto[server]'`"));
        let mut server = S3Server {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = server.child.try_wait().unwrap() {
                last_failure = format!("the S3 test server exited with {status}: is moto[server] installed? (`pip install 'moto[server]'`)");
                break;
            }
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                let answer = http_request(port, &format!("PUT /{BUCKET} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"));
                match answer {
                    Some(a) if a.starts_with("HTTP/1.1 200") => return server,
                    other => {
                        last_failure = format!("bucket creation failed: {other:?}");
                        break;
                    }
                }
            }
            if Instant::now() >= deadline {
                last_failure = "the S3 test server did not start within 30 s".into();
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        drop(server);
    }
    panic!("{last_failure}");
}

fn client_config(endpoint: &str, chunk: u64) -> S3ClientConfig {
    S3ClientConfig {
        region: "us-east-1".into(),
        endpoint: endpoint.into(),
        bucket: BUCKET.into(),
        archive_key_prefix: "archives/".into(),
        state_key_prefix: "states/".into(),
        credentials: Some(S3Credentials {
            access_key: "test".into(),
            secret_key: "test".into(),
            token: None,
        }),
        chunk_size: bytesize::ByteSize::b(chunk),
        download_retries: 10,
    }
}

async fn put(endpoint: &str, key: &str, data: Vec<u8>) {
    let store = AmazonS3Builder::new()
        .with_region("us-east-1")
        .with_endpoint(endpoint)
        .with_bucket_name(BUCKET)
        .with_allow_http(true)
        .with_access_key_id("test")
        .with_secret_access_key("test")
        .build()
        .unwrap();
    store
        .put(&Path::from(key), PutPayload::from(data))
        .await
        .unwrap();
}

fn provider(endpoint: &str, chunk: u64, proxy: Option<S3ProxyConfig>) -> S3Provider {
    S3Provider::new(
        &S3Settings {
            client: client_config(endpoint, chunk),
            max_frame_size: 8 * MIB,
        },
        proxy.as_ref(),
    )
    .unwrap()
}

fn svc_with(p: impl RpcDataProvider) -> BlockchainRpcService {
    BlockchainRpcService::builder()
        .with_storage(Arc::new(StubStorage::default()))
        .with_provider(p)
        .without_broadcast_listener()
        .build()
}

async fn download_all(
    p: &dyn RpcDataProvider,
    size: u64,
    chunk: u64,
    f: impl Fn(u64) -> (StateKind, StatePart),
    block: &tycho_types::models::BlockId,
) -> Vec<u8> {
    let mut out = Vec::new();
    let mut offset = 0;
    while offset < size {
        let (kind, part) = f(offset);
        let bytes = p
            .state_chunk(&StateChunkRequest::new(block, offset, kind, part))
            .await
            .unwrap()
            .expect("chunk");
        assert!(bytes.len() as u64 <= chunk);
        out.extend_from_slice(&bytes);
        offset += chunk;
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item10_s3_provider() {
    let server = start_server();
    let ep = server.endpoint.clone();
    let archive = fixture_bytes("archive_1.bin");
    put(&ep, "archives/1", archive.clone()).await;

    let shard = shard_block(10, 1);
    let b = block_key_text(&shard);
    let unsplit = pseudo_random(3 * MIB as usize / 2, 1);
    let queue = fixture_bytes("queue_state/shard.bin");
    put(&ep, &format!("states/{b}.boc"), unsplit.clone()).await;
    put(&ep, &format!("states/{b}.queue"), queue.clone()).await;

    let split = shard_block(20, 2);
    let sb = block_key_text(&split);
    let root = pseudo_random(1000, 2);
    let left = pseudo_random(MIB as usize + 10, 3);
    let right = pseudo_random(500, 4);
    put(&ep, &format!("states/{sb}.boc.split"), root.clone()).await;
    put(
        &ep,
        &format!("states/{sb}_part_4000000000000000.boc"),
        left.clone(),
    )
    .await;
    put(
        &ep,
        &format!("states/{sb}_part_c000000000000000.boc"),
        right.clone(),
    )
    .await;
    put(
        &ep,
        &format!("states/{sb}.meta.json"),
        br#"{"version":1,"split_depth":1,"parts":["4000000000000000","c000000000000000"]}"#
            .to_vec(),
    )
    .await;

    let p = provider(&ep, MIB, None);
    // archive info estimates id 1 (no key blocks) and every chunk downloads intact
    for seqno in [1, 50, 100] {
        assert_eq!(
            p.archive_info(seqno).await.unwrap(),
            ArchiveLookup::Found {
                id: 1,
                size: archive.len() as u64,
                chunk_size: MIB
            }
        );
    }
    assert_eq!(
        p.archive_info(101).await.unwrap(),
        ArchiveLookup::NotFound,
        "archive 101 is not there"
    );
    let mut downloaded = Vec::new();
    let mut offset = 0;
    while offset < archive.len() as u64 {
        downloaded.extend_from_slice(&p.archive_chunk(1, offset).await.unwrap());
        offset += MIB;
    }
    assert_eq!(downloaded, archive);
    assert!(p.archive_chunk(1, 5).await.is_err(), "misaligned");
    assert!(p.archive_chunk(7, 0).await.is_err(), "unknown archive");

    // unsplit shard and queue states
    assert_eq!(
        p.state_info(&shard, StateKind::Shard).await.unwrap(),
        Some(StateInfo {
            size: unsplit.len() as u64,
            chunk_size: MIB,
            split_depth: 0,
            parts: vec![]
        })
    );
    assert_eq!(
        download_all(
            &p,
            unsplit.len() as u64,
            MIB,
            |_| (StateKind::Shard, StatePart::Unsplit),
            &shard
        )
        .await,
        unsplit
    );
    assert_eq!(
        p.state_info(&shard, StateKind::Queue)
            .await
            .unwrap()
            .unwrap()
            .size,
        queue.len() as u64
    );
    assert_eq!(
        download_all(
            &p,
            queue.len() as u64,
            MIB,
            |_| (StateKind::Queue, StatePart::Unsplit),
            &shard
        )
        .await,
        queue
    );
    assert_eq!(
        p.state_chunk(&StateChunkRequest::new(
            &shard,
            0,
            StateKind::Queue,
            StatePart::SplitRoot
        ))
        .await
        .unwrap(),
        None,
        "a part of a queue"
    );
    assert_eq!(
        p.state_chunk(&StateChunkRequest::new(
            &shard,
            3,
            StateKind::Shard,
            StatePart::Unsplit
        ))
        .await
        .unwrap(),
        None,
        "misaligned"
    );

    // split state
    let info = p
        .state_info(&split, StateKind::Shard)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(info.split_depth, 1);
    assert_eq!(info.size, root.len() as u64);
    assert_eq!(
        info.parts
            .iter()
            .map(|x| (x.prefix, x.size))
            .collect::<Vec<_>>(),
        vec![
            (0x4000000000000000, left.len() as u64),
            (0xc000000000000000, right.len() as u64)
        ]
    );
    assert_eq!(
        download_all(
            &p,
            root.len() as u64,
            MIB,
            |_| (StateKind::Shard, StatePart::SplitRoot),
            &split
        )
        .await,
        root
    );
    assert_eq!(
        download_all(
            &p,
            left.len() as u64,
            MIB,
            |_| (StateKind::Shard, StatePart::SplitPart(0x4000000000000000)),
            &split
        )
        .await,
        left
    );
    let svc = svc_with(p.clone());
    assert!(matches!(
        ask::<proto::PersistentStateInfo, _>(
            &svc,
            rpc::GetPersistentShardStateInfo { block_id: split }
        )
        .await,
        OverlayResponse::Ok(proto::PersistentStateInfo::FoundWithParts { split_depth: 1, .. })
    ));

    // an invalid manifest → err 2; a missing part → notFound
    let bad = shard_block(30, 5);
    put(
        &ep,
        &format!("states/{}.meta.json", block_key_text(&bad)),
        br#"{"version":1,"split_depth":1,"parts":["4000000000000000","4000000000000000"]}"#
            .to_vec(),
    )
    .await;
    put(
        &ep,
        &format!("states/{}.boc.split", block_key_text(&bad)),
        root.clone(),
    )
    .await;
    assert_eq!(
        ask::<proto::PersistentStateInfo, _>(
            &svc,
            rpc::GetPersistentShardStateInfo { block_id: bad }
        )
        .await,
        OverlayResponse::Err(2)
    );
    let missing = shard_block(40, 6);
    let mb = block_key_text(&missing);
    put(
        &ep,
        &format!("states/{mb}.meta.json"),
        br#"{"version":1,"split_depth":1,"parts":["4000000000000000","c000000000000000"]}"#
            .to_vec(),
    )
    .await;
    put(&ep, &format!("states/{mb}.boc.split"), root.clone()).await;
    put(
        &ep,
        &format!("states/{mb}_part_4000000000000000.boc"),
        left.clone(),
    )
    .await;
    assert_eq!(
        ask::<proto::PersistentStateInfo, _>(
            &svc,
            rpc::GetPersistentShardStateInfo { block_id: missing }
        )
        .await,
        OverlayResponse::Ok(proto::PersistentStateInfo::NotFound)
    );
    // a missing state chunk → err 3 through the service
    assert_eq!(
        ask::<proto::Data, _>(
            &svc,
            rpc::GetPersistentShardStateChunk {
                block_id: missing,
                offset: 0
            }
        )
        .await,
        OverlayResponse::Err(3)
    );

    // rate_limit 2: the 3rd call within a second → err 2
    let limited = svc_with(provider(
        &ep,
        MIB,
        Some(S3ProxyConfig {
            rate_limit: 2,
            bandwidth_limit: bytesize::ByteSize::b(0),
        }),
    ));
    let chunk = rpc::GetArchiveChunk {
        archive_id: 1,
        offset: 0,
    };
    assert!(matches!(
        ask::<proto::Data, _>(&limited, chunk).await,
        OverlayResponse::Ok(_)
    ));
    assert!(matches!(
        ask::<proto::Data, _>(&limited, chunk).await,
        OverlayResponse::Ok(_)
    ));
    assert_eq!(
        ask::<proto::Data, _>(&limited, chunk).await,
        OverlayResponse::Err(2)
    );
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert!(
        matches!(
            ask::<proto::Data, _>(&limited, chunk).await,
            OverlayResponse::Ok(_)
        ),
        "refilled"
    );

    // chunk_size 10 MiB: advertised 8 MiB − 1 KiB, a 9 MiB object downloads
    let big = pseudo_random(9 * MIB as usize, 9);
    put(&ep, "archives/201", big.clone()).await;
    let p10 = provider(&ep, 10 * MIB, None);
    let cap = 8 * MIB - 1024;
    assert_eq!(p10.chunk_size(), cap);
    assert_eq!(
        p10.archive_info(250).await.unwrap(),
        ArchiveLookup::Found {
            id: 201,
            size: big.len() as u64,
            chunk_size: cap
        }
    );
    let svc10 = svc_with(p10.clone());
    assert_eq!(
        ask::<proto::ArchiveInfo, _>(&svc10, rpc::GetArchiveInfo { mc_seqno: 250 }).await,
        OverlayResponse::Ok(proto::ArchiveInfo::Found {
            id: 201,
            size: big.len() as u64,
            chunk_size: cap as u32
        })
    );
    let mut got = Vec::new();
    let mut offset = 0;
    while offset < big.len() as u64 {
        let body = svc10
            .handle_query(&tl_proto::serialize(rpc::GetArchiveChunk {
                archive_id: 201,
                offset,
            }))
            .await
            .unwrap();
        assert!(body.len() as u64 <= 8 * MIB, "the answer fits the frame");
        got.extend_from_slice(&data_of(tl_proto::deserialize(&body).unwrap()));
        offset += cap;
    }
    assert_eq!(got, big);
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item11_hybrid_provider() {
    let server = start_server();
    let ep = server.endpoint.clone();
    let archive = fixture_bytes("archive_1.bin");
    put(&ep, "archives/101", archive.clone()).await;
    put(&ep, "archives/1", archive.clone()).await;
    let state_block = shard_block(10, 1);
    let state = pseudo_random(1000, 5);
    put(
        &ep,
        &format!("states/{}.boc", block_key_text(&state_block)),
        state.clone(),
    )
    .await;

    let primary = Arc::new(StubProvider::new(MIB));
    primary
        .archive_info
        .lock()
        .insert(150, ArchiveLookup::TooNew);
    primary
        .archive_info
        .lock()
        .insert(50, ArchiveLookup::NotFound);
    *primary.fail.lock() = false;
    let hybrid = HybridProvider::new(primary.clone(), Some(provider(&ep, MIB, None)));

    // a state only in S3 is served
    assert_eq!(
        hybrid
            .state_info(&state_block, StateKind::Shard)
            .await
            .unwrap()
            .unwrap()
            .size,
        state.len() as u64
    );
    assert_eq!(
        hybrid
            .state_chunk(&StateChunkRequest::new(
                &state_block,
                0,
                StateKind::Shard,
                StatePart::Unsplit
            ))
            .await
            .unwrap()
            .unwrap(),
        Bytes::from(state.clone())
    );
    // storage tooNew stays tooNew although S3 has archive 101
    assert_eq!(
        provider(&ep, MIB, None).archive_info(150).await.unwrap(),
        ArchiveLookup::Found {
            id: 101,
            size: archive.len() as u64,
            chunk_size: MIB
        }
    );
    assert_eq!(
        hybrid.archive_info(150).await.unwrap(),
        ArchiveLookup::TooNew
    );
    // storage notFound with S3 found → found
    assert_eq!(
        hybrid.archive_info(50).await.unwrap(),
        ArchiveLookup::Found {
            id: 1,
            size: archive.len() as u64,
            chunk_size: MIB
        }
    );
    // a storage chunk error (archive unknown to the primary) → the S3 chunk
    assert_eq!(
        hybrid.archive_chunk(1, 0).await.unwrap(),
        Bytes::from(archive[..MIB.min(archive.len() as u64) as usize].to_vec())
    );
    *primary.fail.lock() = true;
    assert_eq!(
        hybrid.archive_info(50).await.unwrap(),
        ArchiveLookup::Found {
            id: 1,
            size: archive.len() as u64,
            chunk_size: MIB
        },
        "error → fallback"
    );
    // without a fallback the primary's answer stands
    let alone: HybridProvider<_, S3Provider> = HybridProvider::new(primary.clone(), None);
    assert!(alone.archive_info(50).await.is_err());
    *primary.fail.lock() = false;
    assert_eq!(
        alone.archive_info(50).await.unwrap(),
        ArchiveLookup::NotFound
    );
    // the fallback's own error is final
    let dead = HybridProvider::new(
        primary.clone(),
        Some(provider("http://127.0.0.1:1", MIB, None)),
    );
    assert!(dead.archive_chunk(1, 0).await.is_err());
    drop(server);
}
