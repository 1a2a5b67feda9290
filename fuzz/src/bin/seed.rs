//! `fuzz-seed CORPUS_DIR`: writes a seed corpus per fuzz target into `CORPUS_DIR/<target>/`, sliced from
//! `../shared/fixtures` (or `$REGOLITH_FIXTURES`): small archives cut from archive_1, its queue diffs, the
//! queue states (and a small valid one rebuilt from shard.bin), every RPC request with the fixture chain's
//! ids and the node's answers to them, block ids in both forms, the external messages, the configs `init`
//! writes and ledger event lines. Files are named by the BLAKE3 of their content, so rerunning adds nothing.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use regolith_formats::archive::{ArchiveEntryType, ArchiveReader, ArchiveWriter};
use regolith_formats::queue_diff::QueueDiff;
use regolith_formats::queue_state::{write_queue_state, QueueState, QueueStateHeader};
use regolith_formats::{encode_block_id, BlockId, ShardIdent};
use regolith_fuzz::{fixture_node, fixtures_dir, runtime};
use regolith_rpc::proto::{self, ids, rpc, OverlayResponse};
use tycho_types::boc::Boc;
use tycho_types::cell::{Cell, CellFamily};

struct Corpus {
    root: PathBuf,
    written: usize,
}

impl Corpus {
    fn add(&mut self, target: &str, data: impl AsRef<[u8]>) {
        let data = data.as_ref();
        let dir = self.root.join(target);
        std::fs::create_dir_all(&dir).expect("corpus dir");
        let path = dir.join(format!("seed-{}", &blake3::hash(data).to_hex()[..16]));
        if !path.exists() {
            std::fs::write(&path, data).expect("writing a seed");
            self.written += 1;
        }
    }
}

fn main() {
    let root = PathBuf::from(
        std::env::args()
            .nth(1)
            .expect("usage: fuzz-seed CORPUS_DIR"),
    );
    let fixtures = fixtures_dir();
    let mut corpus = Corpus { root, written: 0 };

    let entries = read_archive(&fixtures.join("archive_1.bin"));
    archives(&mut corpus, &entries);
    queue(&mut corpus, &fixtures, &entries);
    let ids: Vec<BlockId> = entries
        .iter()
        .filter(|e| e.ty == ArchiveEntryType::Block)
        .map(|e| e.block_id)
        .collect();
    block_ids(&mut corpus, &fixtures, &ids);
    rpc_requests_and_answers(&mut corpus, &ids);
    externals(&mut corpus, &fixtures);
    configs(&mut corpus, &fixtures);
    ledger_lines(&mut corpus);
    checks(&mut corpus, &entries);
    downloads(&mut corpus);
    println!(
        "fuzz-seed: {} new seed files in {}",
        corpus.written,
        corpus.root.display()
    );
}

fn read_archive(path: &Path) -> Vec<regolith_formats::archive::ArchiveEntry> {
    let file = std::fs::File::open(path).expect("archive_1.bin");
    ArchiveReader::new_compressed(std::io::BufReader::new(file))
        .expect("zstd")
        .map(|e| e.expect("archive_1 reads"))
        .collect()
}

/// Small archives: the block, proof and queue diff of a few blocks (mc and shard), empty and one-entry ones,
/// plain (reader mode byte 0) and zstd (mode byte 1); the verifier gets the plain ones behind 8 seed bytes.
fn archives(corpus: &mut Corpus, entries: &[regolith_formats::archive::ArchiveEntry]) {
    let pick = |seqnos: &[u32], shard: ShardIdent| -> Vec<u8> {
        let mut w = ArchiveWriter::new(Vec::new()).unwrap();
        for e in entries {
            if e.block_id.shard == shard && seqnos.contains(&e.block_id.seqno) {
                w.write_entry(&e.block_id, e.ty, &e.data).unwrap();
            }
        }
        w.finish()
    };
    let mut plain = vec![
        ArchiveWriter::new(Vec::new()).unwrap().finish(),
        pick(&[1], ShardIdent::MASTERCHAIN),
        pick(&[2], ShardIdent::BASECHAIN),
        pick(&[1, 2], ShardIdent::BASECHAIN),
    ];
    let diff_only = {
        let mut w = ArchiveWriter::new(Vec::new()).unwrap();
        for e in entries
            .iter()
            .filter(|e| e.ty == ArchiveEntryType::QueueDiff)
            .take(3)
        {
            w.write_entry(&e.block_id, e.ty, &e.data).unwrap();
        }
        w.finish()
    };
    plain.push(diff_only);
    for (i, archive) in plain.iter().enumerate() {
        let mut reader_input = vec![0u8];
        reader_input.extend_from_slice(archive);
        corpus.add("archive_reader", &reader_input);
        let mut compressed = vec![1u8];
        compressed.extend(zstd::encode_all(&archive[..], 3).unwrap());
        corpus.add("archive_reader", &compressed);
        for split in [1u64, 7, 92, 4096] {
            let mut verifier_input = (split * 31 + i as u64).to_le_bytes().to_vec();
            verifier_input.extend_from_slice(archive);
            corpus.add("archive_verifier", &verifier_input);
            corpus.add("archive_spill", &verifier_input);
        }
    }
    // a truncated archive for both
    let cut = &plain[1][..plain[1].len() - 5];
    corpus.add("archive_reader", [&[0u8][..], cut].concat());
    corpus.add("archive_verifier", [&[9u8; 8][..], cut].concat());
}

fn queue(
    corpus: &mut Corpus,
    fixtures: &Path,
    entries: &[regolith_formats::archive::ArchiveEntry],
) {
    corpus.add(
        "queue_diff",
        std::fs::read(fixtures.join("first_block_queue_diff.bin")).unwrap(),
    );
    for e in entries
        .iter()
        .filter(|e| e.ty == ArchiveEntryType::QueueDiff)
    {
        if e.block_id.seqno % 25 == 1 || !e.block_id.is_masterchain() {
            corpus.add("queue_diff", &e.data);
        }
    }
    let master = std::fs::read(fixtures.join("queue_state/master.bin")).unwrap();
    corpus.add("queue_state", &master);
    // The shard state (538 kB, 4 300 messages) is too big a seed; a valid state with the newest diff and its
    // first 4 messages (one BOC chunk each) keeps every kind of field.
    let shard = std::fs::read(fixtures.join("queue_state/shard.bin")).unwrap();
    let state = QueueState::parse(&shard).expect("shard.bin parses");
    let mut roots = std::collections::HashMap::new();
    for chunk in &state.chunks {
        let header = tycho_types::boc::de::BocHeader::decode(
            chunk,
            &tycho_types::boc::de::Options {
                min_roots: None,
                max_roots: Some(regolith_formats::queue_state::MAX_CHUNK_ROOTS),
            },
        )
        .unwrap();
        let cells = header.finalize(Cell::empty_context()).unwrap();
        for i in header.roots() {
            let cell = cells.get(*i).unwrap();
            roots.insert(*cell.repr_hash(), cell);
        }
    }
    let header = &state.header;
    for (diff_index, keep) in [(0usize, 4usize), (2, 1), (1, 0)] {
        let mut diff: QueueDiff = header.diffs()[diff_index].clone();
        diff.messages.truncate(keep);
        let chunks: Vec<Vec<u8>> = diff
            .messages
            .iter()
            .map(|h| Boc::encode(&roots[h]))
            .collect();
        let small = QueueStateHeader::new(header.shard, diff.seqno, vec![diff]).unwrap();
        let mut out = Vec::new();
        write_queue_state(&small, &chunks, &mut out);
        corpus.add("queue_state", &out);
    }
}

fn block_ids(corpus: &mut Corpus, fixtures: &Path, ids: &[BlockId]) {
    let text = std::fs::read_to_string(fixtures.join("block_id.txt")).unwrap();
    corpus.add("block_id", text.trim());
    for id in ids.iter().step_by(20).chain(ids.last()) {
        corpus.add("block_id", encode_block_id(id));
        corpus.add("block_id", id.to_string());
        corpus.add("block_id", format!("{}:{}", id.shard, id.seqno));
        corpus.add(
            "block_id",
            regolith_formats::persistent_state::state_object_name(
                id,
                regolith_formats::persistent_state::StateKind::Shard,
                regolith_formats::persistent_state::StatePart::SplitPart(0x4000_0000_0000_0000),
            )
            .unwrap(),
        );
    }
    corpus.add("block_id", "42");
    corpus.add("block_id", format!("{}.meta.json", ids[0]));
    corpus.add("block_id", format!("{}.queue", ids[0]));
}

/// Every constructor with real ids and edge values, and the fixture node's answers to them.
fn rpc_requests_and_answers(corpus: &mut Corpus, ids: &[BlockId]) {
    let node = fixture_node();
    let zerostate = node.storage.node_state().load_zerostate_id().ok().flatten();
    let mc: Vec<BlockId> = ids.iter().filter(|i| i.is_masterchain()).copied().collect();
    let shard = ids.iter().find(|i| !i.is_masterchain()).copied().unwrap();
    let mut blocks = vec![mc[0], mc[mc.len() - 1], shard];
    blocks.extend(zerostate);
    let mut requests: Vec<Vec<u8>> = vec![
        tl_proto::serialize(proto::Ping),
        tl_proto::serialize(rpc::GetZerostateProof),
    ];
    for mc_seqno in [0, 1, 50, 100, 101, u32::MAX] {
        requests.push(tl_proto::serialize(rpc::GetArchiveInfo { mc_seqno }));
    }
    for (archive_id, offset) in [(1, 0), (1, 1 << 20), (1, 1), (2, 0), (1 << 32 | 1, 0)] {
        requests.push(tl_proto::serialize(rpc::GetArchiveChunk {
            archive_id,
            offset,
        }));
    }
    for block_id in blocks {
        requests.push(tl_proto::serialize(rpc::GetBlockFull { block_id }));
        requests.push(tl_proto::serialize(rpc::GetNextBlockFull {
            prev_block_id: block_id,
        }));
        requests.push(tl_proto::serialize(rpc::GetKeyBlockProof { block_id }));
        requests.push(tl_proto::serialize(rpc::GetNextKeyBlockIds {
            block_id,
            max_size: 8,
        }));
        for offset in [0, 100, 1 << 20] {
            requests.push(tl_proto::serialize(rpc::GetBlockDataChunk {
                block_id,
                offset,
            }));
        }
        requests.push(tl_proto::serialize(rpc::GetPersistentShardStateInfo {
            block_id,
        }));
        requests.push(tl_proto::serialize(rpc::GetPersistentQueueStateInfo {
            block_id,
        }));
        for offset in [0, 1 << 20, 3] {
            requests.push(tl_proto::serialize(rpc::GetPersistentShardStateChunk {
                block_id,
                offset,
            }));
            requests.push(tl_proto::serialize(rpc::GetPersistentShardStateRootChunk {
                block_id,
                offset,
            }));
            requests.push(tl_proto::serialize(rpc::GetPersistentQueueStateChunk {
                block_id,
                offset,
            }));
            requests.push(tl_proto::serialize(rpc::GetPersistentShardStatePartChunk {
                block_id,
                prefix: 0x4000_0000_0000_0000,
                offset,
            }));
        }
    }
    for request in &requests {
        corpus.add("rpc_request", request);
        if request.len() > 8 {
            corpus.add("rpc_request", &request[..request.len() - 3]);
        }
        if let Some(answer) = runtime().block_on(node.service.handle_query(request)) {
            // Block answers carry a few kB; archive chunks are cut to keep the seeds small.
            corpus.add("rpc_response", &answer[..answer.len().min(8 << 10)]);
        }
    }
    corpus.add("rpc_request", ids::BLOCK_FULL_FOUND.to_le_bytes());

    let found_with_parts = proto::PersistentStateInfo::FoundWithParts {
        size: 5000,
        chunk_size: 1 << 20,
        split_depth: 1,
        parts: vec![
            proto::PersistentStatePartInfo {
                prefix: 0x4000_0000_0000_0000,
                size: 77,
            },
            proto::PersistentStatePartInfo {
                prefix: 0xc000_0000_0000_0000,
                size: 78,
            },
        ],
    };
    let hand_made = [
        tl_proto::serialize(OverlayResponse::Ok(found_with_parts)),
        tl_proto::serialize(OverlayResponse::<proto::Data>::Err(3)),
        tl_proto::serialize(OverlayResponse::Ok(proto::ArchiveInfo::TooNew)),
        tl_proto::serialize(OverlayResponse::Ok(proto::KeyBlockIds {
            block_ids: mc[..3].to_vec(),
            incomplete: true,
        })),
        tl_proto::serialize(OverlayResponse::Ok(proto::Data {
            data: Bytes::from(vec![0xaa; 254]),
        })),
        tl_proto::serialize(proto::Pong),
    ];
    for answer in hand_made {
        corpus.add("rpc_response", answer);
    }
}

fn externals(corpus: &mut Corpus, fixtures: &Path) {
    use base64::Engine;
    for entry in std::fs::read_dir(fixtures.join("externals")).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        let boc = base64::engine::general_purpose::STANDARD
            .decode(text.trim())
            .expect("base64 BOC");
        corpus.add("external_message", proto::broadcast_body(&boc));
        corpus.add("external_message", &boc);
    }
}

fn configs(corpus: &mut Corpus, fixtures: &Path) {
    let dir = tempfile::tempdir().unwrap();
    let data = regolith_node::config::DataDir::new(dir.path());
    regolith_node::init::init(&data, &fixtures.join("zerostate.boc"), &Default::default())
        .expect("init");
    let node_json = std::fs::read_to_string(data.node_config()).unwrap();
    corpus.add("node_config", &node_json);
    let mut full: serde_json::Value = serde_json::from_str(&node_json).unwrap();
    full["blockchain_rpc_service"]["rate_limits"] = serde_json::json!({
        "limiter": {"rejects_before_cooldown": 3, "cooldown": "2s", "prune_interval": "1m", "state_ttl": "1h"},
        "whitelist": ["127.0.0.2", "::1"],
        "traffic": {
            "light_queries": {"rate_per_sec": 1, "burst": 2},
            "heavy_queries": {"rate_per_sec": 3, "burst": 4},
            "broadcasts": {"rate_per_sec": 5, "burst": 6}
        }
    });
    full["blockchain_rpc_service"]["s3_proxy"] =
        serde_json::json!({"rate_limit": 100, "bandwidth_limit": "100 MiB"});
    full["s3_client"] = serde_json::json!({
        "region": "us-east-1", "endpoint": "http://127.0.0.1:9000", "bucket": "b",
        "credentials": {"access_key": "a", "secret_key": "s"}, "chunk_size": "1 MiB"
    });
    corpus.add("node_config", serde_json::to_string(&full).unwrap());
    corpus.add("node_config", r#"{"node_secret_key":"00"}"#);
    let global_json = std::fs::read_to_string(data.global_config()).unwrap();
    corpus.add("global_config", &global_json);
    let mut extra: serde_json::Value = serde_json::from_str(&global_json).unwrap();
    extra["validator"] = serde_json::json!({"some": "tycho field"});
    corpus.add("global_config", serde_json::to_string(&extra).unwrap());
}

fn ledger_lines(corpus: &mut Corpus) {
    let digest = "07".repeat(32);
    let line = |extra: &str| {
        format!(
            r#"{{"context":{{"source_network":"eth","sending_instance":"0xp","target_instance":"m","transport":"ccip"}},"message_id":"m-1","course":"C17","edition":10,"digest":"{digest}"{extra}}}"#
        )
    };
    corpus.add("ledger_event", line(""));
    corpus.add("ledger_event", line(r#","sequence":7,"schema":1"#));
    corpus.add("ledger_event", line(r#","schema":2"#));
    corpus.add("ledger_event", line("").replace("\"m-1\"", "\"\""));
}

/// The block checks: data, proof and diff of fixture blocks (`checked_block`, as two u16 lengths and the
/// parts), their proofs (`block_proof`, behind 8 head bytes), and the zerostate proof the node builds.
fn checks(corpus: &mut Corpus, entries: &[regolith_formats::archive::ArchiveEntry]) {
    let part = |id: &BlockId, ty: ArchiveEntryType| {
        entries
            .iter()
            .find(|e| e.block_id == *id && e.ty == ty)
            .map(|e| e.data.clone())
    };
    let mut taken = 0;
    for e in entries.iter().filter(|e| e.ty == ArchiveEntryType::Block) {
        let (Some(proof), Some(diff)) = (
            part(&e.block_id, ArchiveEntryType::Proof),
            part(&e.block_id, ArchiveEntryType::QueueDiff),
        ) else {
            continue;
        };
        let (Ok(a), Ok(b)) = (u16::try_from(e.data.len()), u16::try_from(proof.len())) else {
            continue;
        };
        let mut input = a.to_le_bytes().to_vec();
        input.extend_from_slice(&b.to_le_bytes());
        input.extend_from_slice(&e.data);
        input.extend_from_slice(&proof);
        input.extend_from_slice(&diff);
        corpus.add("checked_block", &input);
        let mut head = e.block_id.seqno.to_le_bytes().to_vec();
        head.extend_from_slice(&[u8::from(!e.block_id.is_masterchain()), 0, 0, 0]);
        head.extend_from_slice(&proof);
        corpus.add("block_proof", &head);
        taken += 1;
        if taken >= 6 {
            break;
        }
    }
    let proof = regolith_fuzz::fixture_zerostate()
        .build_proof()
        .expect("the zerostate proof");
    corpus.add("zerostate_proof", &proof);
    corpus.add("zerostate_proof", &proof[..proof.len() / 2]);
}

/// Scripts of the fake peer of `chunked_download`: 8 seed bytes, the object's length (3 bytes), its kind,
/// the size and chunk-size modes, then one twist per answer.
fn downloads(corpus: &mut Corpus) {
    for (len, kind, size_mode, chunk_mode, twists) in [
        (1000u32, 0u8, 0u8, 3u8, &[0u8; 4][..]),
        (200_000, 0, 0, 0, &[0, 0, 0, 0]),
        (200_000, 0, 0, 1, &[0, 3 | 8, 0, 6, 0]),
        (150_000, 0, 1, 0, &[0, 4 | 16, 5, 7, 0]),
        (100_000, 1, 0, 3, &[0, 0]),
        (300_000, 0, 3, 2, &[0, 0, 0]),
    ] {
        let mut input = 0x1234_5678_9abc_def0u64.to_le_bytes().to_vec();
        input.extend_from_slice(&len.to_le_bytes()[..3]);
        input.extend_from_slice(&[kind, size_mode, 9, chunk_mode]);
        input.extend_from_slice(twists);
        input.resize(input.len().max(16), 0);
        corpus.add("chunked_download", &input);
    }
}
