//! In-process multi-node tests over loopback QUIC: a node serving the imported fixture chain and raw
//! clients sending overlay queries through tycho-network. rpc.md §10 items 2 and 4 (service side), the
//! fuzz-robustness test and the flood test.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::join_all;
use rand::{Rng, SeedableRng};
use regolith_formats::archive::{ArchiveEntryType, ArchiveReader};
use regolith_node::run::{start_node, Node};
use regolith_rpc::config::RateLimitsConfig;
use regolith_rpc::proto::{self, rpc, OverlayResponse};
use regolith_rpc::RawOverlayClient;
use regolith_test_support::net::{loopback, random_secret_key};
use regolith_test_support::{archive_1_bytes, fixtures, wait_for_async, zerostate_path};
use tycho_types::models::BlockId;

/// Discovery settings for nodes that must find each other within seconds (the defaults wait up to 3.5 min).
fn quick_overlay() -> tycho_network::OverlayConfig {
    regolith_rpc::network::quick_discovery().0
}

fn quick_dht() -> tycho_network::DhtConfig {
    regolith_rpc::network::quick_discovery().1
}

struct Archive {
    /// Block ids in archive order.
    order: Vec<BlockId>,
    entries: HashMap<(BlockId, ArchiveEntryType), Vec<u8>>,
}

fn read_archive(bytes: &[u8]) -> Archive {
    let mut reader = ArchiveReader::new_compressed(bytes).unwrap();
    let mut order = Vec::new();
    let mut entries = HashMap::new();
    while let Some(e) = reader.next_entry().unwrap() {
        if e.ty == ArchiveEntryType::Block {
            order.push(e.block_id);
        }
        assert!(entries.insert((e.block_id, e.ty), e.data).is_none());
    }
    Archive { order, entries }
}

async fn serve(
    dir: &std::path::Path,
    ip_last: u8,
    rate_limits: Option<RateLimitsConfig>,
    next_archive: bool,
) -> Node {
    serve_with(dir, ip_last, next_archive, |config| {
        config.blockchain_rpc_service.rate_limits = rate_limits;
    })
    .await
}

/// [`serve`] with the node config edited by `edit` before the node starts.
async fn serve_with(
    dir: &std::path::Path,
    ip_last: u8,
    next_archive: bool,
    edit: impl FnOnce(&mut regolith_node::config::NodeConfig),
) -> Node {
    let (data, mut config, storage) =
        regolith_testbed::fixture::import_fixture_chain(dir, &fixtures(), loopback(ip_last))
            .await
            .unwrap();
    if next_archive {
        regolith_testbed::fixture::start_next_archive(&storage)
            .await
            .unwrap();
    }
    edit(&mut config);
    (config.overlay, config.dht) = regolith_rpc::network::quick_discovery();
    let global = data.load_global_config().unwrap();
    start_node(&config, &global, storage).unwrap()
}

fn client(node: &Node, ip_last: u8) -> RawOverlayClient {
    let info = Arc::new(node.network.signed_peer_info(Duration::from_secs(3600)));
    RawOverlayClient::connect(loopback(ip_last), node.overlay_id, info, Default::default()).unwrap()
}

async fn ask<T>(
    client: &RawOverlayClient,
    request: impl tl_proto::TlWrite<Repr = tl_proto::Boxed>,
) -> OverlayResponse<T>
where
    for<'a> T: tl_proto::TlRead<'a, Repr = tl_proto::Boxed>,
{
    let answer = client
        .query(Bytes::from(tl_proto::serialize(request)))
        .await
        .expect("an answer");
    tl_proto::deserialize(&answer).expect("a decodable answer")
}

fn check_full(archive: &Archive, expected: &BlockId, answer: OverlayResponse<proto::BlockFull>) {
    let OverlayResponse::Ok(proto::BlockFull::Found {
        block_id,
        block,
        proof,
        queue_diff,
    }) = answer
    else {
        panic!("block {expected} not found: {answer:?}")
    };
    assert_eq!(&block_id, expected);
    assert_eq!(
        block.size as usize,
        block.data.len(),
        "fixture blocks fit one chunk"
    );
    assert_eq!(block.chunk_size, 1 << 20);
    let boc = zstd::decode_all(&block.data[..]).unwrap();
    assert_eq!(
        boc,
        archive.entries[&(*expected, ArchiveEntryType::Block)],
        "block {expected}"
    );
    assert_eq!(
        &proof[..],
        &archive.entries[&(*expected, ArchiveEntryType::Proof)][..]
    );
    assert_eq!(
        &queue_diff[..],
        &archive.entries[&(*expected, ArchiveEntryType::QueueDiff)][..]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item2_fixture_blocks_over_the_overlay() {
    let dir = tempfile::tempdir().unwrap();
    let node = serve(dir.path(), 21, None, false).await;
    let c = client(&node, 22);
    let archive = read_archive(&archive_1_bytes());
    assert_eq!(archive.order.len(), 107);

    for id in &archive.order {
        check_full(
            &archive,
            id,
            ask(&c, rpc::GetBlockFull { block_id: *id }).await,
        );
    }
    let by_seqno = |mc: bool, seqno: u32| {
        *archive
            .order
            .iter()
            .find(|id| id.is_masterchain() == mc && id.seqno == seqno)
            .unwrap()
    };
    for seqno in 1..=99 {
        let answer = ask(
            &c,
            rpc::GetNextBlockFull {
                prev_block_id: by_seqno(true, seqno),
            },
        )
        .await;
        check_full(&archive, &by_seqno(true, seqno + 1), answer);
    }
    for seqno in 1..=6 {
        let answer = ask(
            &c,
            rpc::GetNextBlockFull {
                prev_block_id: by_seqno(false, seqno),
            },
        )
        .await;
        check_full(&archive, &by_seqno(false, seqno + 1), answer);
    }
    assert_eq!(
        ask::<proto::BlockFull>(
            &c,
            rpc::GetNextBlockFull {
                prev_block_id: by_seqno(true, 100)
            }
        )
        .await,
        OverlayResponse::Ok(proto::BlockFull::NotFound)
    );
    // The batched query walks the whole chain in answers of at most 16 mc blocks, each mc block followed by
    // the shard blocks it is the first to reference (read from the stored handles), every block whole.
    let mut prev = by_seqno(true, 1);
    let mut batched_shards = BTreeSet::new();
    loop {
        let OverlayResponse::Ok(answer) = ask::<proto::NextBlocks>(
            &c,
            rpc::GetNextBlocksFull {
                prev_block_id: prev,
                max_mc_blocks: 100,
                max_bytes: 4 << 20,
            },
        )
        .await
        else {
            panic!("an error answer");
        };
        if answer.blocks.is_empty() {
            break;
        }
        let mut current_mc = 0;
        for entry in &answer.blocks {
            let id = entry.block_id;
            let data = zstd::decode_all(&entry.data[..]).unwrap();
            assert_eq!(
                data,
                archive.entries[&(id, ArchiveEntryType::Block)],
                "{id}"
            );
            assert_eq!(
                &entry.proof[..],
                &archive.entries[&(id, ArchiveEntryType::Proof)][..]
            );
            if id.is_masterchain() {
                assert_eq!(id.seqno, prev.seqno + 1, "mc blocks in order");
                prev = id;
                current_mc = id.seqno;
            } else {
                let handle = node.storage.handles().load_handle(&id).unwrap().unwrap();
                assert_eq!(
                    handle.ref_by_mc_seqno(),
                    current_mc,
                    "{id} after its mc block"
                );
                assert!(batched_shards.insert(id), "{id} twice");
            }
        }
        assert!(
            answer
                .blocks
                .iter()
                .filter(|b| b.block_id.is_masterchain())
                .count()
                <= 16
        );
    }
    assert_eq!(prev, by_seqno(true, 100));
    let expected_shards: BTreeSet<BlockId> = archive
        .order
        .iter()
        .filter(|id| !id.is_masterchain())
        .filter(|id| {
            node.storage
                .handles()
                .load_handle(id)
                .unwrap()
                .unwrap()
                .ref_by_mc_seqno()
                > 1
        })
        .copied()
        .collect();
    assert!(!expected_shards.is_empty());
    assert_eq!(batched_shards, expected_shards);
    // an unknown constructor or a truncated getBlockFull gets no answer: a transport error here
    let full = tl_proto::serialize(rpc::GetBlockFull {
        block_id: archive.order[0],
    });
    assert!(c
        .query(Bytes::from(full[..full.len() - 1].to_vec()))
        .await
        .is_err());
    assert!(c
        .query(Bytes::from_static(&[0xde, 0xad, 0xbe, 0xef]))
        .await
        .is_err());
    // ping is answered with a bare pong through the network too
    let pong = c
        .query(Bytes::from(tl_proto::serialize(proto::Ping)))
        .await
        .unwrap();
    assert_eq!(&pong[..], &[0x04, 0x08, 0x70, 0x67]);
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item4_archive_1_over_the_overlay() {
    let dir = tempfile::tempdir().unwrap();
    let (data, config, storage) =
        regolith_testbed::fixture::import_fixture_chain(dir.path(), &fixtures(), loopback(23))
            .await
            .unwrap();
    let global = data.load_global_config().unwrap();
    let node = start_node(&config, &global, storage.clone()).unwrap();
    let c = client(&node, 24);

    // archive 1 is the last (open) archive
    assert_eq!(
        ask::<proto::ArchiveInfo>(&c, rpc::GetArchiveInfo { mc_seqno: 50 }).await,
        OverlayResponse::Ok(proto::ArchiveInfo::TooNew)
    );
    regolith_testbed::fixture::start_next_archive(&storage)
        .await
        .unwrap();
    let size = storage.archives().get_archive_size(1).unwrap().unwrap();
    for k in 1..=100 {
        assert_eq!(
            ask::<proto::ArchiveInfo>(&c, rpc::GetArchiveInfo { mc_seqno: k }).await,
            OverlayResponse::Ok(proto::ArchiveInfo::Found {
                id: 1,
                size,
                chunk_size: 1 << 20
            }),
            "mc seqno {k}"
        );
    }
    assert_eq!(
        ask::<proto::ArchiveInfo>(&c, rpc::GetArchiveInfo { mc_seqno: 101 }).await,
        OverlayResponse::Ok(proto::ArchiveInfo::TooNew),
        "last applied + 1"
    );

    let mut compressed = Vec::new();
    let mut offset = 0;
    while offset < size {
        match ask::<proto::Data>(
            &c,
            rpc::GetArchiveChunk {
                archive_id: 1,
                offset,
            },
        )
        .await
        {
            OverlayResponse::Ok(d) => compressed.extend_from_slice(&d.data),
            OverlayResponse::Err(code) => panic!("chunk at {offset}: err {code}"),
        }
        offset += 1 << 20;
    }
    assert_eq!(compressed.len() as u64, size);
    let served = read_archive(&compressed);
    let original = read_archive(&archive_1_bytes());
    let set = |a: &Archive| {
        a.entries
            .iter()
            .map(|(k, v)| (k.0, k.1, v.clone()))
            .collect::<BTreeSet<_>>()
    };
    assert_eq!(set(&served), set(&original));
    // misaligned and unknown → err 2
    assert_eq!(
        ask::<proto::Data>(
            &c,
            rpc::GetArchiveChunk {
                archive_id: 1,
                offset: 1
            }
        )
        .await,
        OverlayResponse::Err(2)
    );
    assert_eq!(
        ask::<proto::Data>(
            &c,
            rpc::GetArchiveChunk {
                archive_id: 2,
                offset: 0
            }
        )
        .await,
        OverlayResponse::Err(2)
    );
    node.shutdown().await;
}

/// Random and mutated request bodies (deliverable 4).
fn fuzz_body(rng: &mut rand::rngs::StdRng, valid: &[Vec<u8>]) -> Vec<u8> {
    let base = valid[rng.gen_range(0..valid.len())].clone();
    match rng.gen_range(0..7) {
        // random bytes
        0 => (0..rng.gen_range(0..300)).map(|_| rng.gen()).collect(),
        // truncated TL
        1 => base[..rng.gen_range(0..base.len())].to_vec(),
        // bit flips
        2 => {
            let mut b = base;
            for _ in 0..rng.gen_range(1..4) {
                let i = rng.gen_range(0..b.len());
                b[i] ^= 1 << rng.gen_range(0..8);
            }
            b
        }
        // unknown constructor with a valid tail
        3 => {
            let mut b = base;
            b[..4].copy_from_slice(&rng.gen::<u32>().to_le_bytes());
            b
        }
        // oversized lengths and counts: a bytes header claiming 16 MiB, huge sizes and offsets
        4 => {
            let mut b = base;
            b.extend_from_slice(&[0xfe, 0xff, 0xff, 0xff]);
            let n = b.len();
            if n > 12 {
                let at = rng.gen_range(4..n - 8);
                b[at..at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
            }
            b
        }
        // misaligned offsets on the chunk requests
        5 => match rng.gen_range(0..3) {
            0 => tl_proto::serialize(rpc::GetArchiveChunk {
                archive_id: rng.gen_range(0..3),
                offset: rng.gen(),
            }),
            1 => tl_proto::serialize(rpc::GetArchiveChunk {
                archive_id: rng.gen(),
                offset: rng.gen_range(0..4) << 20,
            }),
            _ => {
                let mut b = valid[1].clone();
                let n = b.len();
                b[n - 4..].copy_from_slice(&rng.gen::<u32>().to_le_bytes());
                b
            }
        },
        // garbage appended to a valid request (accepted as trailing bytes)
        _ => {
            let mut b = base;
            b.extend((0..rng.gen_range(1..64)).map(|_| rng.gen::<u8>()));
            b
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fuzzed_requests_never_crash_or_stall_the_node() {
    let dir = tempfile::tempdir().unwrap();
    let node = serve(dir.path(), 31, None, true).await;
    let archive = read_archive(&archive_1_bytes());
    let id = archive.order[5];
    let valid: Vec<Vec<u8>> = vec![
        tl_proto::serialize(rpc::GetBlockFull { block_id: id }),
        tl_proto::serialize(rpc::GetBlockDataChunk {
            block_id: id,
            offset: 0,
        }),
        tl_proto::serialize(rpc::GetNextKeyBlockIds {
            block_id: archive.order[0],
            max_size: 8,
        }),
        tl_proto::serialize(rpc::GetArchiveInfo { mc_seqno: 10 }),
        tl_proto::serialize(rpc::GetArchiveChunk {
            archive_id: 1,
            offset: 0,
        }),
        tl_proto::serialize(rpc::GetPersistentShardStatePartChunk {
            block_id: id,
            prefix: 1 << 62,
            offset: 0,
        }),
        tl_proto::serialize(rpc::GetKeyBlockProof { block_id: id }),
        tl_proto::serialize(proto::Ping),
        proto::broadcast_body(b"not a boc").to_vec(),
    ];
    let fuzzer = Arc::new(client(&node, 32));
    let observer = client(&node, 33);

    const TOTAL: usize = 10_000;
    const WORKERS: usize = 32;
    let sent = Arc::new(AtomicUsize::new(0));
    let answered = Arc::new(AtomicUsize::new(0));
    let (fuzzer_w, sent_w, answered_w) = (fuzzer.clone(), sent.clone(), answered.clone());
    let workers = (0..WORKERS).map(move |w| {
        let (fuzzer, sent, answered, valid) = (
            fuzzer_w.clone(),
            sent_w.clone(),
            answered_w.clone(),
            valid.clone(),
        );
        tokio::spawn(async move {
            let mut rng = rand::rngs::StdRng::seed_from_u64(w as u64);
            for i in 0..TOTAL / WORKERS + 1 {
                let body = Bytes::from(fuzz_body(&mut rng, &valid));
                if i % 10 == 0 {
                    // one-way messages get no answer; they must not hurt either
                    let _ = fuzzer.send(body).await;
                } else if let Ok(Ok(answer)) =
                    tokio::time::timeout(Duration::from_secs(10), fuzzer.query(body)).await
                {
                    // whatever is answered is a well-formed answer
                    let ok = answer.as_ref() == [0x04, 0x08, 0x70, 0x67]
                        || matches!(
                            u32::from_le_bytes(answer[..4].try_into().unwrap()),
                            0xcc3f9b07 | 0x34f19def
                        );
                    assert!(ok, "malformed answer {answer:?}");
                    answered.fetch_add(1, Ordering::Relaxed);
                }
                sent.fetch_add(1, Ordering::Relaxed);
            }
        })
    });
    let fuzzing = tokio::spawn(async move { join_all(workers).await });

    // while the fuzzer runs, another client keeps getting answers promptly
    let ping = Bytes::from(tl_proto::serialize(proto::Ping));
    let mut observed = 0;
    while !fuzzing.is_finished() {
        let answer = tokio::time::timeout(Duration::from_secs(5), observer.query(ping.clone()))
            .await
            .expect("the observer is answered during the fuzzing")
            .expect("no transport error for the observer");
        assert_eq!(&answer[..], &[0x04, 0x08, 0x70, 0x67]);
        observed += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for r in fuzzing.await.unwrap() {
        r.expect("a fuzz worker panicked");
    }
    assert!(
        sent.load(Ordering::Relaxed) >= TOTAL,
        "{}",
        sent.load(Ordering::Relaxed)
    );
    assert!(observed > 0);
    assert!(
        answered.load(Ordering::Relaxed) > 0,
        "valid-but-mutated bodies get answers"
    );

    // afterwards a valid request is still answered correctly, also from the fuzzing client
    for c in [&*fuzzer, &observer] {
        check_full(
            &archive,
            &id,
            ask(c, rpc::GetBlockFull { block_id: id }).await,
        );
    }
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_from_one_ip_does_not_starve_others() {
    let dir = tempfile::tempdir().unwrap();
    let limits: RateLimitsConfig =
        serde_json::from_str(r#"{"whitelist": ["127.0.0.42"]}"#).unwrap();
    let node = serve(dir.path(), 41, Some(limits), true).await;
    let archive = read_archive(&archive_1_bytes());
    let id = archive.order[3];
    let flooder = Arc::new(client(&node, 43));
    let whitelisted = client(&node, 42);
    let other = client(&node, 44);

    let flood_answers = Arc::new(AtomicUsize::new(0));
    let flood_sent = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flood = (0..32).map(|_| {
        let (flooder, answers, sent, stop) = (
            flooder.clone(),
            flood_answers.clone(),
            flood_sent.clone(),
            stop.clone(),
        );
        let body = Bytes::from(tl_proto::serialize(rpc::GetBlockFull { block_id: id }));
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                if let Ok(Ok(_)) =
                    tokio::time::timeout(Duration::from_secs(2), flooder.query(body.clone())).await
                {
                    answers.fetch_add(1, Ordering::Relaxed);
                }
                sent.fetch_add(1, Ordering::Relaxed);
            }
        })
    });
    let flood = join_all(flood);
    let flood = tokio::spawn(flood);
    tokio::time::sleep(Duration::from_millis(500)).await;

    // during the flood: the whitelisted IP gets everything, another IP gets its own (light) budget
    for _ in 0..30 {
        check_full(
            &archive,
            &id,
            ask(&whitelisted, rpc::GetBlockFull { block_id: id }).await,
        );
    }
    for _ in 0..10 {
        let answer = tokio::time::timeout(
            Duration::from_secs(5),
            other.query(Bytes::from(tl_proto::serialize(proto::Ping))),
        )
        .await
        .expect("answered in time")
        .expect("answered");
        assert_eq!(&answer[..], &[0x04, 0x08, 0x70, 0x67]);
        tokio::time::sleep(Duration::from_millis(60)).await;
    }
    check_full(
        &archive,
        &id,
        ask(&other, rpc::GetBlockFull { block_id: id }).await,
    );
    stop.store(true, Ordering::Relaxed);
    flood.await.unwrap();
    let (sent, answered) = (
        flood_sent.load(Ordering::Relaxed),
        flood_answers.load(Ordering::Relaxed),
    );
    assert!(sent > 200, "the flood was a flood: {sent}");
    assert!(
        answered < sent / 2,
        "the flooder was limited: {answered} of {sent} answered"
    );
    node.shutdown().await;
}

/// Downloads a persistent state with its chunk request and returns the decompressed bytes.
async fn download_state(
    c: &RawOverlayClient,
    block_id: BlockId,
    queue: bool,
    size: u64,
    chunk_size: u64,
) -> Vec<u8> {
    let mut compressed = Vec::new();
    let mut offset = 0;
    while offset < size {
        let answer: OverlayResponse<proto::Data> = if queue {
            ask(c, rpc::GetPersistentQueueStateChunk { block_id, offset }).await
        } else {
            ask(c, rpc::GetPersistentShardStateChunk { block_id, offset }).await
        };
        let OverlayResponse::Ok(proto::Data { data }) = answer else {
            panic!("chunk {offset} of {block_id}: {answer:?}")
        };
        assert!(data.len() as u64 <= chunk_size);
        compressed.extend_from_slice(&data);
        offset += chunk_size;
    }
    assert_eq!(compressed.len() as u64, size, "{block_id}");
    zstd::decode_all(&compressed[..]).expect("a zstd stream")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn genesis_zerostate_proof_and_persistent_states_over_the_overlay() {
    use regolith_formats::zerostate::{check_zerostate_proof, McZerostate};
    use tycho_types::boc::Boc;
    use tycho_types::models::ShardStateUnsplit;

    let dir = tempfile::tempdir().unwrap();
    let node = serve(dir.path(), 27, None, false).await;
    let c = client(&node, 28);
    let zerostate_bytes = std::fs::read(zerostate_path()).unwrap();
    let zerostate = McZerostate::parse(&zerostate_bytes).unwrap();

    // Item 1: the zerostate proof is found and passes the receiving side's check.
    let answer = ask::<proto::ZerostateProof>(&c, rpc::GetZerostateProof).await;
    let OverlayResponse::Ok(proto::ZerostateProof::Found { proof }) = answer else {
        panic!("no zerostate proof: {answer:?}")
    };
    let checked = check_zerostate_proof(&proof, &zerostate.id.root_hash).unwrap();
    assert!(checked.extra.config.get_raw(34).unwrap().is_some());
    // What a stock client checks (rpc.md §3.3): the BOC's root is the pruned tree itself, whose level-0 hash
    // is the zerostate root hash, byte for byte what the zerostate's proof builder makes.
    let root = Boc::decode(&proof).unwrap();
    assert!(!root.descriptor().is_exotic(), "no Merkle-proof wrapper");
    assert_eq!(*root.hash(0), zerostate.id.root_hash);
    assert_eq!(&proof[..], &zerostate.build_proof().unwrap()[..]);
    assert!(
        proof.len() < zerostate_bytes.len(),
        "the accounts are pruned"
    );

    // Item 2: the mc zerostate and every shard zerostate it lists are persistent shard states.
    let mut ids = vec![zerostate.id];
    ids.extend(zerostate.listed_shards().unwrap().iter().map(|l| l.id));
    assert!(ids.len() >= 2, "the fixture lists a shard");
    for id in ids {
        let answer = ask::<proto::PersistentStateInfo>(
            &c,
            rpc::GetPersistentShardStateInfo { block_id: id },
        )
        .await;
        let OverlayResponse::Ok(proto::PersistentStateInfo::Found { size, chunk_size }) = answer
        else {
            panic!("no persistent state of {id}: {answer:?}")
        };
        assert_eq!(chunk_size, 1 << 20);
        let boc = download_state(&c, id, false, size, chunk_size.into()).await;
        let root = Boc::decode(&boc).unwrap();
        assert_eq!(*root.repr_hash(), id.root_hash, "{id}");
        assert_eq!(
            blake3::hash(&boc).as_bytes(),
            id.file_hash.as_array(),
            "{id}"
        );
        let state = root.parse::<ShardStateUnsplit>().unwrap();
        assert_eq!((state.shard_ident, state.seqno), (id.shard, 0));
        if id.is_masterchain() {
            assert_eq!(boc, zerostate_bytes);
        }
        assert_eq!(
            ask::<proto::PersistentStateInfo>(
                &c,
                rpc::GetPersistentQueueStateInfo { block_id: id }
            )
            .await,
            OverlayResponse::Ok(proto::PersistentStateInfo::NotFound),
            "no queue state of {id}"
        );
    }
    // A block of the chain has no persistent state.
    let archive = read_archive(&archive_1_bytes());
    assert_eq!(
        ask::<proto::PersistentStateInfo>(
            &c,
            rpc::GetPersistentShardStateInfo {
                block_id: archive.order[0]
            }
        )
        .await,
        OverlayResponse::Ok(proto::PersistentStateInfo::NotFound)
    );
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_imported_queue_state_is_served_as_a_persistent_queue_state() {
    let dir = tempfile::tempdir().unwrap();
    let (data, config, storage) =
        regolith_testbed::fixture::import_fixture_chain(dir.path(), &fixtures(), loopback(29))
            .await
            .unwrap();
    let master = fixtures().join("queue_state/master.bin");
    let block: regolith_cli::block_ref::BlockRef = "-1:8000000000000000:90".parse().unwrap();
    let hash = "5795ca5d1b8d0c1ce96394eef851bde718ff2e14fd2840098ed2bb7640f278c5";
    let report = regolith_node::boot::queue_state::import(
        &data.root,
        &storage,
        block.resolve(&storage).unwrap(),
        &master,
        Some(hash.parse().unwrap()),
        Some(1),
    )
    .await
    .unwrap();
    let id = block.resolve(&storage).unwrap();
    assert!(storage
        .handles()
        .load_handle(&id)
        .unwrap()
        .unwrap()
        .has_persistent_queue_state());
    assert!(report.state_file.ends_with(".queue"));
    let global = data.load_global_config().unwrap();
    let node = start_node(&config, &global, storage).unwrap();
    let c = client(&node, 30);
    let answer =
        ask::<proto::PersistentStateInfo>(&c, rpc::GetPersistentQueueStateInfo { block_id: id })
            .await;
    let OverlayResponse::Ok(proto::PersistentStateInfo::Found { size, chunk_size }) = answer else {
        panic!("no queue state of {id}: {answer:?}")
    };
    let state = download_state(&c, id, true, size, chunk_size.into()).await;
    assert_eq!(state, std::fs::read(&master).unwrap());
    node.shutdown().await;
}

/// A downloading node that knows `server` as its bootstrap peer, with the blockchain RPC client on top.
async fn rpc_client(
    server: &Node,
    ip_last: u8,
) -> (
    regolith_rpc::BlockchainNetwork,
    regolith_rpc::client::BlockchainRpcClient,
) {
    use regolith_rpc::client::{BlockchainRpcClient, PublicOverlayClient};
    use regolith_rpc::network::{BlockchainNetwork, NetworkSettings, Silent};
    let network = BlockchainNetwork::start(
        NetworkSettings {
            bind_address: loopback(ip_last),
            remote_address: None,
            secret_key: random_secret_key(),
            network: Default::default(),
            dht: quick_dht(),
            overlay: quick_overlay(),
            peer_resolver: Default::default(),
            bootstrap_peers: vec![server.network.signed_peer_info(Duration::from_secs(3600))],
            overlay_id: server.overlay_id,
            rate_limits: None,
        },
        Silent,
    )
    .unwrap();
    let overlay = PublicOverlayClient::new(
        network.network.clone(),
        network.overlay.clone(),
        Default::default(),
    );
    tokio::time::timeout(Duration::from_secs(30), overlay.wait_for_peers(1))
        .await
        .expect("the server becomes a neighbour");
    let client = BlockchainRpcClient::builder()
        .with_overlay_client(overlay)
        .build()
        .unwrap();
    (network, client)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item2_fixture_blocks_through_the_client() {
    use regolith_rpc::client::DataRequirement::Required;
    let dir = tempfile::tempdir().unwrap();
    let node = serve(dir.path(), 31, None, false).await;
    let (_client_node, client) = rpc_client(&node, 32).await;
    let archive = read_archive(&archive_1_bytes());
    let check = |id: &BlockId, data: regolith_rpc::client::BlockDataFull| {
        assert_eq!(&data.block_id, id);
        assert_eq!(
            &data.block[..],
            &archive.entries[&(*id, ArchiveEntryType::Block)][..]
        );
        assert_eq!(
            &data.proof[..],
            &archive.entries[&(*id, ArchiveEntryType::Proof)][..]
        );
        assert_eq!(
            &data.queue_diff[..],
            &archive.entries[&(*id, ArchiveEntryType::QueueDiff)][..]
        );
    };
    for id in &archive.order {
        let got = client.get_block_full(id, Required).await.unwrap();
        check(id, got.data.expect("found"));
    }
    let by_seqno = |mc: bool, seqno: u32| {
        *archive
            .order
            .iter()
            .find(|id| id.is_masterchain() == mc && id.seqno == seqno)
            .unwrap()
    };
    for (mc, last) in [(true, 99), (false, 6)] {
        for seqno in 1..=last {
            let got = client
                .get_next_block_full(&by_seqno(mc, seqno), Required)
                .await
                .unwrap();
            check(&by_seqno(mc, seqno + 1), got.data.expect("found"));
        }
    }
    let last = client
        .get_next_block_full(
            &by_seqno(true, 100),
            regolith_rpc::DataRequirement::Optional,
        )
        .await
        .unwrap();
    assert!(last.data.is_none(), "nothing after mc 100");
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item4_archive_1_through_the_client() {
    use regolith_rpc::client::ArchiveSearch;
    let dir = tempfile::tempdir().unwrap();
    let node = serve(dir.path(), 33, None, false).await;
    let (_client_node, client) = rpc_client(&node, 34).await;
    // While archive 1 is the open archive: tooNew, never a punishment.
    assert!(matches!(
        client.find_archive(50).await,
        Ok(ArchiveSearch::TooNew)
    ));
    regolith_testbed::fixture::start_next_archive(&node.storage)
        .await
        .unwrap();
    for k in [1, 2, 50, 99, 100] {
        let Ok(ArchiveSearch::Found(found)) = client.find_archive(k).await else {
            panic!("archive of {k} not found")
        };
        assert_eq!((found.id, found.chunk_size), (1, 1 << 20));
    }
    assert!(matches!(
        client.find_archive(102).await,
        Ok(ArchiveSearch::TooNew)
    ));
    let Ok(ArchiveSearch::Found(found)) = client.find_archive(1).await else {
        panic!()
    };
    let bytes = client
        .download_archive(&found, Vec::new(), |_| {})
        .await
        .unwrap();
    let mut reader = ArchiveReader::new(&bytes[..]);
    let mut got = BTreeSet::new();
    while let Some(e) = reader.next_entry().unwrap() {
        got.insert((e.block_id.to_string(), e.ty.as_byte(), e.data));
    }
    let expected: BTreeSet<_> = read_archive(&archive_1_bytes())
        .entries
        .into_iter()
        .map(|((id, ty), data)| (id.to_string(), ty.as_byte(), data))
        .collect();
    assert_eq!(got, expected);
    // The compressed form as served decompresses to the same archive.
    let compressed = client
        .download_archive_compressed(&found, Box::new(std::io::sink()), |_| {})
        .await;
    assert!(compressed.is_ok());
    node.shutdown().await;
}

/// A fresh data dir that syncs from `server` in-process until its last applied mc block is `target`.
async fn sync_from(
    server: &Node,
    dir: &std::path::Path,
    ip_last: u8,
    target: u32,
) -> (
    regolith_storage::Storage,
    Arc<regolith_node::sync::SyncStats>,
) {
    let data = regolith_node::config::DataDir::new(dir);
    regolith_node::init::init(&data, &zerostate_path(), &Default::default()).unwrap();
    let mut config = data.load_node_config().unwrap();
    config.listen_address = loopback(ip_last);
    config.metrics_address = None;
    (config.overlay, config.dht) = regolith_rpc::network::quick_discovery();
    let mut global = data.load_global_config().unwrap();
    global.bootstrap_peers =
        vec![
            serde_json::to_value(server.network.signed_peer_info(Duration::from_secs(3600)))
                .unwrap(),
        ];
    let storage = regolith_node::open_storage(config.storage.clone()).unwrap();
    let (queue, _) =
        regolith_node::queue_sync::start(&data.root, &storage, config.internal_queue, false)
            .await
            .unwrap();
    let node = start_node(&config, &global, storage.clone()).unwrap();
    let client = regolith_node::run::rpc_client(&node, &config).unwrap();
    let sync = regolith_node::sync::Sync::new(storage.clone(), queue, client, &data.root).unwrap();
    let stats = sync.stats();
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(sync.run(stop_rx));
    wait_for_async(
        Duration::from_secs(120),
        Duration::from_millis(200),
        async || {
            let last = storage
                .node_state()
                .load_last_mc_block_id()
                .unwrap()
                .unwrap();
            if last.seqno >= target {
                return Ok(());
            }
            Err(format!("synced only to {}", last.seqno))
        },
    )
    .await;
    stop.send(true).unwrap();
    task.await.unwrap();
    node.shutdown().await;
    (storage, stats)
}

/// Every stored block: its id, whether it is complete, the BLAKE3 of its data, proof and queue diff, and its
/// connections.
async fn chain_digest(storage: &regolith_storage::Storage) -> Vec<(String, Vec<String>)> {
    let ids: Vec<BlockId> = storage
        .handles()
        .iter_block_ids_from(regolith_formats::BlockKey([0; 48]))
        .map(|id| id.unwrap())
        .collect();
    let mut out = Vec::new();
    for id in ids {
        let handle = storage.handles().load_handle(&id).unwrap().unwrap();
        let complete = handle.has_data() && handle.has_proof() && handle.has_queue_diff();
        let mut parts = Vec::new();
        if complete {
            let c = storage.components();
            for raw in [
                c.load_block_data_raw(&handle).await.unwrap(),
                c.load_block_proof_raw(&handle).await.unwrap(),
                c.load_queue_diff_raw(&handle).await.unwrap(),
            ] {
                parts.push(blake3::hash(&raw).to_string());
            }
        }
        for dir in regolith_storage::Direction::ALL {
            if let Some(other) = storage.connections().load_connection(&id, dir).unwrap() {
                parts.push(format!("{dir:?} {other}"));
            }
        }
        out.push((format!("{id} {complete}"), parts));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_node_syncs_the_fixture_chain_block_by_block() {
    let dir = tempfile::tempdir().unwrap();
    let node = serve(&dir.path().join("server"), 35, None, false).await;
    let (synced, stats) = sync_from(&node, &dir.path().join("fresh"), 36, 100).await;
    assert_eq!(
        stats.from_archives.load(Ordering::Relaxed),
        0,
        "archive 1 is still open"
    );
    assert_eq!(stats.from_blocks.load(Ordering::Relaxed), 107);
    // A regolith server answers the batched query: 100 mc blocks in batches of at most 16.
    let batches = stats.batches.load(Ordering::Relaxed);
    assert!((7..=100).contains(&batches), "{batches} batches");
    // The same blocks, components and connections as the node that imported the archive.
    assert_eq!(
        chain_digest(&synced).await,
        chain_digest(&node.storage).await
    );
    node.shutdown().await;
}

/// A server that leaves the batched query unanswered, as a stock node does: the sync goes on with
/// getNextBlockFull and ends with the same chain, and the server keeps its score.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_node_syncs_block_by_block_from_a_server_without_batches() {
    let dir = tempfile::tempdir().unwrap();
    let node = serve_with(&dir.path().join("server"), 43, false, |config| {
        config.blockchain_rpc_service.serve_next_blocks_batch = false;
    })
    .await;
    let (synced, stats) = sync_from(&node, &dir.path().join("fresh"), 44, 100).await;
    assert_eq!(stats.batches.load(Ordering::Relaxed), 0);
    assert_eq!(stats.from_blocks.load(Ordering::Relaxed), 107);
    assert_eq!(stats.failures.load(Ordering::Relaxed), 0, "no step failed");
    assert_eq!(
        chain_digest(&synced).await,
        chain_digest(&node.storage).await
    );
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_node_syncs_from_archives_when_far_behind() {
    let dir = tempfile::tempdir().unwrap();
    let node = serve(&dir.path().join("server"), 37, None, true).await;
    let (synced, stats) = sync_from(&node, &dir.path().join("fresh"), 38, 100).await;
    assert_eq!(
        stats.from_archives.load(Ordering::Relaxed),
        107,
        "archive 1 in one piece"
    );
    assert_eq!(stats.from_blocks.load(Ordering::Relaxed), 0);
    let server_digest: Vec<_> = chain_digest(&node.storage)
        .await
        .into_iter()
        .filter(|(id, _)| !id.contains(":101:"))
        .collect();
    assert_eq!(chain_digest(&synced).await, server_digest);
    node.shutdown().await;
}

/// Answers like the honest service, but forges: asked for the block after mc 30..=39, it answers the one
/// after that (a real block whose prev link is not the asked one); it forges the proof of every mc block from
/// seqno 50 on (one flipped byte in its signatures' region), and the data of shard blocks from seqno 4 on (a
/// wrong hash). Its batches (`regolith.getNextBlocksFull`) carry the same forgeries, and after mc 30..=39
/// they start one mc block late. The counter is the number of answers that carried a forgery.
#[derive(Clone)]
struct Forger(regolith_rpc::BlockchainRpcService, Arc<AtomicUsize>);

/// The forgeries of [`Forger`] on one block: the proof of an mc block from seqno 50, the data (zstd) of a
/// shard block from seqno 4. Whether it forged anything.
fn forge(block_id: &BlockId, data: &mut Bytes, proof: &mut Bytes) -> bool {
    if block_id.is_masterchain() && block_id.seqno >= 50 {
        let mut forged = proof.to_vec();
        let at = forged.len() - 40;
        forged[at] ^= 0x01;
        *proof = Bytes::from(forged);
    } else if !block_id.is_masterchain() && block_id.seqno >= 4 {
        let mut raw = zstd::decode_all(&data[..]).unwrap();
        let at = raw.len() - 5;
        raw[at] ^= 0x01;
        *data = Bytes::from(zstd::encode_all(&raw[..], 3).unwrap());
    } else {
        return false;
    }
    true
}

impl Forger {
    async fn answer(&self, body: &[u8]) -> Option<Bytes> {
        let mut answer = self.0.handle_query(body).await?;
        if let Ok(request) = tl_proto::deserialize::<rpc::GetNextBlocksFull>(body) {
            let Ok(OverlayResponse::Ok(mut batch)) =
                tl_proto::deserialize::<OverlayResponse<proto::NextBlocks>>(&answer)
            else {
                return Some(answer);
            };
            let mut lied = (30..40).contains(&request.prev_block_id.seqno);
            if lied {
                // Skip the first mc block and the shard blocks after it.
                let next_mc = batch.blocks[1..]
                    .iter()
                    .position(|b| b.block_id.is_masterchain())
                    .map_or(batch.blocks.len(), |i| i + 1);
                batch.blocks.drain(..next_mc);
            }
            for entry in &mut batch.blocks {
                lied |= forge(&entry.block_id, &mut entry.data, &mut entry.proof);
            }
            if lied {
                self.1.fetch_add(1, Ordering::Relaxed);
            }
            return Some(Bytes::from(tl_proto::serialize(OverlayResponse::Ok(batch))));
        }
        let mut lied = false;
        if let Ok(rpc::GetNextBlockFull { prev_block_id }) = tl_proto::deserialize(body) {
            if prev_block_id.is_masterchain() && (30..40).contains(&prev_block_id.seqno) {
                if let Ok(OverlayResponse::Ok(proto::BlockFull::Found { block_id, .. })) =
                    tl_proto::deserialize::<OverlayResponse<proto::BlockFull>>(&answer)
                {
                    let skip = tl_proto::serialize(rpc::GetNextBlockFull {
                        prev_block_id: block_id,
                    });
                    answer = self.0.handle_query(&skip).await?;
                    lied = true;
                }
            }
        }
        let Ok(OverlayResponse::Ok(proto::BlockFull::Found {
            block_id,
            mut block,
            mut proof,
            queue_diff,
        })) = tl_proto::deserialize::<OverlayResponse<proto::BlockFull>>(&answer)
        else {
            return Some(answer);
        };
        lied |= forge(&block_id, &mut block.data, &mut proof);
        if lied {
            self.1.fetch_add(1, Ordering::Relaxed);
        }
        block.size = block.data.len() as u32;
        Some(Bytes::from(tl_proto::serialize(OverlayResponse::Ok(
            proto::BlockFull::Found {
                block_id,
                block,
                proof,
                queue_diff,
            },
        ))))
    }
}

impl tycho_network::Service<tycho_network::ServiceRequest> for Forger {
    type QueryResponse = tycho_network::Response;
    type OnQueryFuture = futures_util::future::BoxFuture<'static, Option<tycho_network::Response>>;
    type OnMessageFuture = futures_util::future::Ready<()>;

    fn on_query(&self, req: tycho_network::ServiceRequest) -> Self::OnQueryFuture {
        let this = self.clone();
        Box::pin(async move {
            this.answer(&req.body)
                .await
                .map(|body| tycho_network::Response {
                    version: Default::default(),
                    body,
                })
        })
    }

    fn on_message(&self, _: tycho_network::ServiceRequest) -> Self::OnMessageFuture {
        futures_util::future::ready(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dishonest_peer_is_punished_and_nothing_forged_is_stored() {
    dishonest_peer(regolith_node::sync::SyncConfig::default()).await;
}

/// As [`a_dishonest_peer_is_punished_and_nothing_forged_is_stored`], with a client that asks for every block
/// with getNextBlockFull, as it does from stock peers: its runs ask for the block after each one before that
/// one is verified, and must not take a forged one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dishonest_peer_is_punished_and_nothing_forged_is_stored_block_by_block() {
    dishonest_peer(regolith_node::sync::SyncConfig {
        archives: false,
        batches: false,
    })
    .await;
}

async fn dishonest_peer(sync_config: regolith_node::sync::SyncConfig) {
    let dir = tempfile::tempdir().unwrap();
    let honest = serve(&dir.path().join("honest"), 40, None, false).await;
    // The forger holds the same chain and answers from it through the honest service, then forges.
    let (data, config, storage) = regolith_testbed::fixture::import_fixture_chain(
        &dir.path().join("forger"),
        &fixtures(),
        loopback(41),
    )
    .await
    .unwrap();
    let provider = regolith_node::run::make_provider(&config, &storage).unwrap();
    let service = regolith_rpc::BlockchainRpcService::builder()
        .with_storage(storage.clone())
        .with_provider(provider)
        .without_broadcast_listener()
        .build();
    let lies = Arc::new(AtomicUsize::new(0));
    let forger = regolith_rpc::BlockchainNetwork::start(
        regolith_rpc::NetworkSettings {
            bind_address: loopback(41),
            remote_address: None,
            secret_key: random_secret_key(),
            network: Default::default(),
            dht: quick_dht(),
            overlay: quick_overlay(),
            peer_resolver: Default::default(),
            bootstrap_peers: vec![honest.network.signed_peer_info(Duration::from_secs(3600))],
            overlay_id: honest.overlay_id,
            rate_limits: None,
        },
        Forger(service, lies.clone()),
    )
    .unwrap();
    drop(data);

    // A fresh node that knows both.
    let fresh = regolith_node::config::DataDir::new(dir.path().join("fresh"));
    regolith_node::init::init(&fresh, &zerostate_path(), &Default::default()).unwrap();
    let mut fresh_config = fresh.load_node_config().unwrap();
    fresh_config.listen_address = loopback(42);
    fresh_config.metrics_address = None;
    (fresh_config.overlay, fresh_config.dht) = regolith_rpc::network::quick_discovery();
    let mut global = fresh.load_global_config().unwrap();
    global.bootstrap_peers = vec![
        serde_json::to_value(honest.network.signed_peer_info(Duration::from_secs(3600))).unwrap(),
        serde_json::to_value(forger.signed_peer_info(Duration::from_secs(3600))).unwrap(),
    ];
    let fresh_storage = regolith_node::open_storage(fresh_config.storage.clone()).unwrap();
    let (queue, _) = regolith_node::queue_sync::start(
        &fresh.root,
        &fresh_storage,
        fresh_config.internal_queue,
        false,
    )
    .await
    .unwrap();
    let node = start_node(&fresh_config, &global, fresh_storage.clone()).unwrap();
    let client = regolith_node::run::rpc_client(&node, &fresh_config).unwrap();
    tokio::time::timeout(
        Duration::from_secs(30),
        client.overlay_client().wait_for_peers(2),
    )
    .await
    .expect("both servers become neighbours");
    let sync =
        regolith_node::sync::Sync::new(fresh_storage.clone(), queue, client.clone(), &fresh.root)
            .unwrap()
            .with_config(&sync_config);
    let stats = sync.stats();
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(sync.run(stop_rx));
    wait_for_async(
        Duration::from_secs(180),
        Duration::from_millis(200),
        async || {
            let last = fresh_storage
                .node_state()
                .load_last_mc_block_id()
                .unwrap()
                .unwrap();
            if last.seqno >= 100 {
                return Ok(());
            }
            Err(format!("synced only to {}", last.seqno))
        },
    )
    .await;
    stop.send(true).unwrap();
    task.await.unwrap();
    // The forger is chosen about half the time, so a sync can pass it by (about one run in fifty): when it
    // told a lie, the lie was caught and the forger punished. Either way the chain is the honest one.
    if lies.load(Ordering::Relaxed) > 0 {
        assert!(
            stats.failures.load(Ordering::Relaxed) >= 1,
            "a forged block was refused"
        );
        let forger_score = client
            .overlay_client()
            .neighbours()
            .find(&forger.peer_id())
            .map_or(0, |n| n.score());
        assert!(
            forger_score < 16,
            "the forger is unreliable now: {forger_score}"
        );
    } else {
        eprintln!("the sync never asked the forger for a block it forges");
    }
    assert_eq!(
        chain_digest(&fresh_storage).await,
        chain_digest(&honest.storage).await
    );
    node.shutdown().await;
    forger.network.shutdown().await;
    honest.shutdown().await;
}

/// Stored mc seqnos, the archive ids and the number of queue diff records of a node.
struct GcView {
    mc: BTreeSet<u32>,
    shard: BTreeSet<u32>,
    archives: Vec<u32>,
    queue_records: usize,
}

fn gc_view(
    storage: &regolith_storage::Storage,
    queue: &regolith_node::queue_sync::NodeQueue,
) -> GcView {
    let mut mc = BTreeSet::new();
    let mut shard = BTreeSet::new();
    for seqno in 1..=100 {
        if !storage
            .handles()
            .find_block_ids(&tycho_types::models::ShardIdent::MASTERCHAIN, seqno)
            .unwrap()
            .is_empty()
        {
            mc.insert(seqno);
        }
        if !storage
            .handles()
            .find_block_ids(&tycho_types::models::ShardIdent::BASECHAIN, seqno)
            .unwrap()
            .is_empty()
        {
            shard.insert(seqno);
        }
    }
    GcView {
        mc,
        shard,
        archives: storage.archives().list_archive_ids(),
        queue_records: queue.storage().overview(false).unwrap().diffs.len(),
    }
}

/// Polls `check` until it holds (GC runs on its own schedule).
async fn eventually(what: &str, mut check: impl FnMut() -> Result<(), String>) {
    wait_for_async(
        Duration::from_secs(60),
        Duration::from_millis(100),
        async || check().map_err(|e| format!("{what}: {e}")),
    )
    .await;
}

/// A node with a small safe distance and 10-block archives syncs the fixture chain in three windows. After
/// each, block GC has removed the mc blocks below its target, archive GC the archives below its bound, and
/// queue GC the diff records below the committed bounds; the last window runs without queue GC, and a
/// restart with GC and no sync (so no new commit) still collects: the bounds survived. Then the node serves
/// every block and archive it kept, byte for byte, and answers notFound for what it removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_windows_remove_blocks_archives_and_queue_diffs_and_the_node_serves_the_rest() {
    use regolith_storage::config::{ArchivesGcConfig, BlocksGcConfig, BlocksGcKind};
    const BLOCK_DISTANCE: u32 = 20;
    const ARCHIVE_DISTANCE: u32 = 30;
    let dir = tempfile::tempdir().unwrap();
    let server = serve(&dir.path().join("server"), 52, None, false).await;
    let fixture = read_archive(&archive_1_bytes());

    let data = regolith_node::config::DataDir::new(dir.path().join("gc"));
    regolith_node::init::init(&data, &zerostate_path(), &Default::default()).unwrap();
    let mut config = data.load_node_config().unwrap();
    config.listen_address = loopback(53);
    config.metrics_address = None;
    (config.overlay, config.dht) = regolith_rpc::network::quick_discovery();
    config.storage.archives.mc_blocks_per_archive = 10;
    config.storage.blocks_gc = Some(BlocksGcConfig {
        kind: BlocksGcKind::BeforeSafeDistance {
            safe_distance: BLOCK_DISTANCE,
            min_interval: Duration::from_millis(100),
        },
        max_blocks_per_batch: 7,
    });
    config.storage.archives_gc = Some(ArchivesGcConfig::BeforeSafeDistance {
        safe_distance: ARCHIVE_DISTANCE,
        min_interval: Duration::from_millis(100),
    });
    config.internal_queue.gc_interval = Duration::from_millis(100);
    // Block GC never passes the state checkpoint: windows of 20 mc blocks need a checkpoint at each mc block.
    config.states.checkpoint_every = 1;
    config.validate().unwrap();
    let mut global = data.load_global_config().unwrap();
    global.bootstrap_peers =
        vec![
            serde_json::to_value(server.network.signed_peer_info(Duration::from_secs(3600)))
                .unwrap(),
        ];

    let mut queue_records_before = usize::MAX;
    let mut bounds_before = std::collections::BTreeMap::new();
    for (window, (stop_at, queue_gc)) in [(40u32, true), (70, true), (100, false)]
        .into_iter()
        .enumerate()
    {
        let storage = regolith_node::open_storage(config.storage.clone()).unwrap();
        let (queue, _) =
            regolith_node::queue_sync::start(&data.root, &storage, config.internal_queue, queue_gc)
                .await
                .unwrap();
        let node = start_node(&config, &global, storage.clone()).unwrap();
        let client = regolith_node::run::rpc_client(&node, &config).unwrap();
        let gc = regolith_node::gc::GcTasks::start(&storage);
        // Block by block without batches, so that each window stops within a block of its bound.
        let sync =
            regolith_node::sync::Sync::new(storage.clone(), queue.clone(), client, &data.root)
                .unwrap()
                .with_config(&regolith_node::sync::SyncConfig {
                    archives: true,
                    batches: false,
                })
                .with_states(&config.states);
        let (stop, stop_rx) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(sync.run(stop_rx));
        let last = storage.node_state();
        eventually(&format!("window {window}: sync to {stop_at}"), || {
            let seqno = last.load_last_mc_block_id().unwrap().unwrap().seqno;
            (seqno >= stop_at)
                .then_some(())
                .ok_or(format!("at {seqno}"))
        })
        .await;
        stop.send(true).unwrap();
        task.await.unwrap();
        let last = storage
            .node_state()
            .load_last_mc_block_id()
            .unwrap()
            .unwrap();

        // The expected block GC target, from the chain's own facts: the tail length in the last mc block, and
        // the first archive not yet committed (its blocks are never removed).
        let handle = storage.handles().load_handle(&last).unwrap().unwrap();
        let tail = storage
            .components()
            .load_block_data(&handle)
            .await
            .unwrap()
            .block
            .out_msg_queue_updates
            .tail_len;
        let distance = BLOCK_DISTANCE.max(10).max(tail + 1);
        let ctx = format!("window {window} (last {}, tail {tail})", last.seqno);
        eventually(&format!("{ctx}: block and archive GC"), || {
            let uncommitted = storage.archives().first_uncommitted_archive_id().unwrap();
            let target = (last.seqno - distance).min(uncommitted - 1);
            let view = gc_view(&storage, &queue);
            let expected: BTreeSet<u32> = (target..=last.seqno).collect();
            if view.mc != expected {
                return Err(format!(
                    "mc blocks {:?}, expected {target}..={}",
                    view.mc, last.seqno
                ));
            }
            let keep = view
                .archives
                .iter()
                .copied()
                .filter(|id| *id < last.seqno - ARCHIVE_DISTANCE)
                .max()
                .unwrap();
            if view.archives.iter().any(|id| *id < keep) {
                return Err(format!("archives {:?}, keep from {keep}", view.archives));
            }
            Ok(())
        })
        .await;
        let view = gc_view(&storage, &queue);
        if window > 0 {
            assert!(
                view.archives[0] > 1,
                "{ctx}: archive 1 removed: {:?}",
                view.archives
            );
        }
        if window == 2 {
            assert!(
                view.shard.first().copied().unwrap_or(0) > 1,
                "{ctx}: shard blocks removed: {:?}",
                view.shard
            );
        }
        if queue_gc {
            // The window's commits moved the stored GC bounds on, and GC collected up to them: no record of
            // a shard whose newest message is at or below its shard's bound is left. (How many records that
            // leaves depends on where the window stopped, so the count is no measure.)
            eventually(&format!("{ctx}: queue GC"), || {
                let overview = queue.storage().overview(false).unwrap();
                let moved = overview
                    .gc_bounds
                    .iter()
                    .any(|(shard, bound)| bounds_before.get(shard).is_none_or(|old| bound > old));
                if !moved {
                    return Err(format!(
                        "GC bounds {:?}, {bounds_before:?} before",
                        overview.gc_bounds
                    ));
                }
                let left: Vec<(String, u32)> = overview
                    .diffs
                    .iter()
                    .filter(|d| {
                        overview
                            .gc_bounds
                            .get(&d.shard)
                            .is_some_and(|bound| d.info.max_message <= *bound)
                    })
                    .map(|d| (d.shard.to_string(), d.seqno))
                    .collect();
                let records = overview.diffs.len();
                (left.is_empty() && records < 107)
                    .then_some(())
                    .ok_or(format!(
                        "{records} records, at or below the bounds: {left:?}"
                    ))
            })
            .await;
            bounds_before = queue.storage().overview(false).unwrap().gc_bounds;
        }
        queue_records_before = gc_view(&storage, &queue).queue_records;
        gc.stop().await;
        node.shutdown().await;
        queue.stop_gc();
        drop(queue);
        storage.archives().wait_for_archive_commit().await;
    }

    // Restart with queue GC and no sync: nothing commits, yet the stored bounds are collected.
    let storage = regolith_node::open_storage(config.storage.clone()).unwrap();
    let (queue, report) =
        regolith_node::queue_sync::start(&data.root, &storage, config.internal_queue, true)
            .await
            .unwrap();
    assert_eq!(
        report.last_committed_mc_seqno,
        Some(100),
        "no commit at the start"
    );
    eventually("queue GC after the restart", || {
        let records = gc_view(&storage, &queue).queue_records;
        (records < queue_records_before)
            .then_some(())
            .ok_or(format!(
                "{records} records, {queue_records_before} before the restart"
            ))
    })
    .await;

    // The node serves what it kept and nothing else.
    let node = start_node(&config, &global, storage.clone()).unwrap();
    let c = client(&node, 54);
    let view = gc_view(&storage, &queue);
    for id in &fixture.order {
        let kept = if id.is_masterchain() {
            view.mc.contains(&id.seqno)
        } else {
            view.shard.contains(&id.seqno)
        };
        let answer = ask::<proto::BlockFull>(&c, rpc::GetBlockFull { block_id: *id }).await;
        if kept {
            check_full(&fixture, id, answer);
        } else {
            assert_eq!(
                answer,
                OverlayResponse::Ok(proto::BlockFull::NotFound),
                "{id} was removed"
            );
        }
    }
    let committed: Vec<u32> = view
        .archives
        .iter()
        .copied()
        .filter(|id| storage.archives().get_archive_size(*id).unwrap().is_some())
        .collect();
    assert!(!committed.is_empty());
    for id in &committed {
        let OverlayResponse::Ok(proto::ArchiveInfo::Found {
            id: found, size, ..
        }) = ask::<proto::ArchiveInfo>(&c, rpc::GetArchiveInfo { mc_seqno: *id }).await
        else {
            panic!("archive {id} is served");
        };
        assert_eq!(found, u64::from(*id));
        let OverlayResponse::Ok(chunk) = ask::<proto::Data>(
            &c,
            rpc::GetArchiveChunk {
                archive_id: u64::from(*id),
                offset: 0,
            },
        )
        .await
        else {
            panic!("archive {id}: chunk 0");
        };
        assert_eq!(
            chunk.data.len() as u64,
            size,
            "small archives fit one chunk"
        );
        let served = read_archive(&chunk.data);
        for ((block, ty), bytes) in &served.entries {
            assert_eq!(
                &fixture.entries[&(*block, *ty)],
                bytes,
                "archive {id}: {block} {ty:?}"
            );
        }
        assert!(served
            .order
            .iter()
            .any(|b| b.is_masterchain() && b.seqno == *id));
    }
    assert_eq!(
        ask::<proto::ArchiveInfo>(&c, rpc::GetArchiveInfo { mc_seqno: 1 }).await,
        OverlayResponse::Ok(proto::ArchiveInfo::NotFound),
        "archive 1 was removed"
    );
    node.shutdown().await;
    server.shutdown().await;
}
