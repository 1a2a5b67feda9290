//! End-to-end tests of the `regolith` binary: init, import, inspect, bad input and SIGKILL during import.

mod common;

use regolith_test_support::{
    archive_1_arg, archive_1_bytes, archive_1_decompressed, fixtures, zerostate_path,
};
use std::time::Duration;

use common::*;
use serde_json::Value;

#[test]
fn init_import_inspect_and_reimport() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    init(&data);
    let global: Value =
        serde_json::from_str(&std::fs::read_to_string(data.join("global.json")).unwrap()).unwrap();
    assert_eq!(global["zerostate"]["seqno"], 0);
    assert_eq!(
        global["zerostate"]["file_hash"],
        "1172c1f335257481cd1fcd0e4778a68cdefc39f0c9c1633ec6e43cca6819eb1a"
    );
    assert!(global["bootstrap_peers"].is_array());
    // init again with the same zerostate is a no-op.
    init(&data);

    let out = ok(&data, &["import", &archive_1_arg()]);
    assert!(out.contains("imported 107 blocks"), "{out}");
    let first = summary(&data);
    assert_full_chain(&first);
    assert_clean(&first);

    let out = ok(&data, &["import", &archive_1_arg()]);
    assert!(out.contains("nothing to do"), "{out}");
    assert_eq!(summary(&data), first, "a second import changes nothing");

    let block: Value =
        serde_json::from_str(&ok(&data, &["inspect", "--json", "block", "16"])).unwrap();
    let flags: Vec<_> = block["flags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    for f in [
        "HAS_DATA",
        "HAS_PROOF",
        "HAS_QUEUE_DIFF",
        "HAS_PREV_1",
        "HAS_NEXT_1",
    ] {
        assert!(flags.contains(&f), "{f} in {flags:?}");
    }
    assert_eq!(block["archive"]["id"], 1);
    assert!(block["connections"]["prev1"]
        .as_str()
        .unwrap()
        .starts_with("-1:8000000000000000:15:"));
    // Shard block 2 is referenced by mc 16 and linked to shard blocks 1 and 3.
    let shard_ids: Vec<_> = regolith_formats::archive::ArchiveReader::new_compressed(
        std::fs::File::open(archive_1_arg()).unwrap(),
    )
    .unwrap()
    .map(|e| e.unwrap().block_id)
    .filter(|id| !id.is_masterchain())
    .collect();
    let s2 = shard_ids.iter().find(|id| id.seqno == 2).unwrap();
    let block: Value =
        serde_json::from_str(&ok(&data, &["inspect", "--json", "block", &s2.to_string()])).unwrap();
    assert_eq!(block["ref_by_mc_seqno"], 16);
    let s1 = shard_ids.iter().find(|id| id.seqno == 1).unwrap();
    let s3 = shard_ids.iter().find(|id| id.seqno == 3).unwrap();
    assert_eq!(block["connections"]["prev1"], s1.to_string());
    assert_eq!(block["connections"]["next1"], s3.to_string());
    let key_blocks: Value =
        serde_json::from_str(&ok(&data, &["inspect", "--json", "key-blocks"])).unwrap();
    assert_eq!(
        key_blocks.as_array().unwrap().len(),
        1,
        "only the zerostate is a key block"
    );
    let archives: Value =
        serde_json::from_str(&ok(&data, &["inspect", "--json", "archives"])).unwrap();
    assert_eq!(archives[0]["id"], 1);
    assert_eq!(archives[0]["state"], "open");
    assert_eq!(archives[0]["blocks"], 107);
    let text = ok(&data, &["inspect", "summary"]);
    assert!(text.contains("blocks_total: 109"), "{text}");
}

#[test]
fn bad_input_is_rejected_and_data_survives() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    init(&data);
    let before = summary(&data);

    // A missing path.
    let err = fails(&data, &["import", "/nonexistent/archive.bin"]);
    assert!(err.contains("/nonexistent/archive.bin"), "{err}");
    // Not a zerostate (into a new dir) and a missing zerostate.
    let other = dir.path().join("other");
    let block = fixtures().join("block.bin");
    let err = fails(&other, &["init", "--zerostate", block.to_str().unwrap()]);
    assert!(err.contains("is not a zerostate"), "{err}");
    assert!(!other.join("global.json").exists());
    let err = fails(
        &other,
        &["init", "--zerostate", "/nonexistent/zerostate.boc"],
    );
    assert!(err.contains("/nonexistent/zerostate.boc"), "{err}");
    // A zerostate that is not this data dir's.
    let err = fails(&data, &["init", "--zerostate", block.to_str().unwrap()]);
    assert!(err.contains("is not a zerostate"), "{err}");
    assert_eq!(summary(&data), before);

    // A truncated archive: what can be imported is, the rest is an error naming file and offset.
    let compressed = archive_1_bytes();
    let truncated = dir.path().join("truncated.bin");
    std::fs::write(&truncated, &compressed[..compressed.len() / 2]).unwrap();
    let err = fails(&data, &["import", truncated.to_str().unwrap()]);
    assert!(
        err.contains("truncated.bin") && err.contains("offset"),
        "{err}"
    );
    assert_clean(&summary(&data));

    // One flipped byte inside a block.
    let mut raw = zstd::stream::decode_all(&compressed[..]).unwrap();
    let entries: Vec<_> = regolith_formats::archive::ArchiveReader::new(&raw[..])
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let victim = &entries[60];
    let at = victim.offset as usize + 92 + victim.data.len() / 2;
    raw[at] ^= 0x40;
    let flipped = dir.path().join("flipped.bin");
    std::fs::write(&flipped, zstd::stream::encode_all(&raw[..], 3).unwrap()).unwrap();
    let err = fails(&data, &["import", flipped.to_str().unwrap()]);
    assert!(err.contains("flipped.bin"), "{err}");
    assert!(err.contains(&victim.block_id.to_string()), "{err}");
    assert!(err.contains(&format!("offset {}", victim.offset)), "{err}");
    let partial = summary(&data);
    assert_clean(&partial);
    let stored = partial["blocks_total"].as_u64().unwrap();
    assert!(
        stored > 2 && stored < 109,
        "blocks before the bad one stay: {stored}"
    );

    // The good archive completes the chain.
    ok(&data, &["import", &archive_1_arg()]);
    let after = summary(&data);
    assert_full_chain(&after);
    assert_clean(&after);
}

/// The groups of an archive are checked by a reader ahead of the apply: a bad mc block stops the import with
/// every group before it applied and nothing of its own, exactly as one group at a time would.
#[test]
fn a_bad_block_stops_the_import_right_before_its_group() {
    let dir = tempfile::tempdir().unwrap();
    let raw = archive_1_decompressed();
    let entries: Vec<_> = regolith_formats::archive::ArchiveReader::new(&raw[..])
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    for seqno in [1u32, 2, 37, 100] {
        let data = dir.path().join(format!("data-{seqno}"));
        init(&data);
        let victim = entries
            .iter()
            .find(|e| {
                e.block_id.is_masterchain()
                    && e.block_id.seqno == seqno
                    && e.ty == regolith_formats::archive::ArchiveEntryType::Block
            })
            .unwrap();
        let mut bad = raw.clone();
        bad[victim.offset as usize + 92 + victim.data.len() / 2] ^= 0x40;
        let file = dir.path().join(format!("bad-{seqno}.bin"));
        std::fs::write(&file, zstd::stream::encode_all(&bad[..], 3).unwrap()).unwrap();
        let err = fails(&data, &["import", file.to_str().unwrap()]);
        assert!(err.contains(&victim.block_id.to_string()), "{err}");
        let after = summary(&data);
        assert_clean(&after);
        assert_eq!(
            after["last_applied_mc_block"]
                .as_str()
                .unwrap()
                .split(':')
                .nth(2),
            Some((seqno - 1).to_string().as_str()),
            "mc block {seqno}: {after}"
        );
    }
}

/// Commits archive 1 (still open after mc 100: nothing after it was applied) in a data dir of this test, and
/// returns the file: what an archive of these blocks holds, byte for byte.
fn committed_archive_1(data: &std::path::Path) -> Vec<u8> {
    let config = regolith_node::config::DataDir::new(data)
        .load_node_config()
        .unwrap();
    let storage = regolith_storage::Storage::open(config.storage).unwrap();
    storage.archives().commit_archive_now(1).unwrap();
    let path = regolith_storage::archive::archive_path(storage.archives().dir(), 1);
    std::fs::read(path).unwrap()
}

/// At least 50 SIGKILLs at random instants of imports (opening the databases, checking, storing, committing),
/// each data dir imported to the end after its kills: every one ends equal to a clean import. Each kill leaves
/// a database whose startup check finds nothing; in the end the chain is complete, the queue has the same
/// content digest (the whole view, in fact) and archive 1 is byte-identical.
#[test]
fn sigkill_loop_during_import_ends_equal_to_a_clean_import() {
    use rand::Rng;
    const KILLS: usize = 50;
    let dir = tempfile::tempdir().unwrap();

    let clean = dir.path().join("clean");
    init(&clean);
    let started = std::time::Instant::now();
    ok(&clean, &["import", "--quiet", &archive_1_arg()]);
    let import_ms = (started.elapsed().as_millis() as u64).max(30);
    let clean_queue = queue_view(&clean);
    let clean_archive = committed_archive_1(&clean);
    assert_eq!(
        zstd::stream::decode_all(&clean_archive[..]).unwrap(),
        archive_1_decompressed(),
        "archive 1 of a clean import holds what the fixture does"
    );

    // Kills within the first third of a whole import's time: several per data dir, at every stage.
    let mut rng = rand::thread_rng();
    let (mut kills, mut dirs) = (0, 0);
    while kills < KILLS {
        dirs += 1;
        let data = dir.path().join(format!("data{dirs}"));
        init(&data);
        while kills < KILLS {
            let mut child = spawn_import(&data);
            std::thread::sleep(Duration::from_millis(rng.gen_range(5..=import_ms / 3 + 5)));
            if child.try_wait().unwrap().is_some() {
                break; // the import got to its end: this data dir is complete
            }
            let _ = child.kill();
            child.wait().unwrap();
            kills += 1;
            assert_clean(&summary(&data));
        }
        ok(&data, &["import", "--quiet", &archive_1_arg()]);
        let s = summary(&data);
        assert_full_chain(&s);
        assert_clean(&s);
        let queue = queue_view(&data);
        assert_eq!(queue["content_digest"], clean_queue["content_digest"]);
        assert_eq!(queue, clean_queue);
        assert!(
            committed_archive_1(&data) == clean_archive,
            "archive 1 of {data:?} differs from a clean import's"
        );
        let _ = std::fs::remove_dir_all(&data);
    }
    eprintln!("{kills} kills over {dirs} data dirs (a clean import takes {import_ms} ms)");
}

fn block_json(data: &std::path::Path, args: &[&str]) -> Value {
    serde_json::from_str(&ok(data, args)).unwrap()
}

fn flags(block: &Value) -> Vec<String> {
    block["flags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn masterchain_ids_are_taken_as_typed() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    init(&data);
    ok(&data, &["import", "--quiet", &archive_1_arg()]);
    let id = block_json(&data, &["inspect", "--json", "block", "42"])["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(id.starts_with("-1:8000000000000000:42:"), "{id}");

    // `inspect block`: the full id and the short id, before and after other flags.
    for args in [
        vec!["inspect", "--json", "block", id.as_str()],
        vec!["inspect", "block", id.as_str(), "--json"],
        vec!["inspect", "--json", "block", "-1:8000000000000000:42"],
    ] {
        assert_eq!(block_json(&data, &args)["id"], id.as_str(), "{args:?}");
    }
    let text = ok(&data, &["inspect", "block", &id]);
    assert!(text.contains(&format!("id: {id}")), "{text}");
    let err = fails(&data, &["inspect", "block", "-1:8000000000000000:420"]);
    assert!(
        err.contains("-1:8000000000000000:420 is not stored"),
        "{err}"
    );
    let err = fails(&data, &["inspect", "block", "-1:zz:1"]);
    assert!(err.contains("bad shard prefix"), "{err}");

    // `import-queue-state --block`, with and without `=`: master.bin is the queue state of mc block 90.
    let block_90 = block_json(&data, &["inspect", "--json", "block", "90"])["id"]
        .as_str()
        .unwrap()
        .to_string();
    let master = fixtures().join("queue_state/master.bin");
    let hash = "5795ca5d1b8d0c1ce96394eef851bde718ff2e14fd2840098ed2bb7640f278c5";
    let with_eq = format!("--block={block_90}");
    for block_args in [vec!["--block", block_90.as_str()], vec![with_eq.as_str()]] {
        let mut args = vec!["import-queue-state"];
        args.extend(block_args);
        args.extend([
            "--file",
            master.to_str().unwrap(),
            "--diff-hash",
            hash,
            "--tail-len",
            "1",
            "--json",
        ]);
        let report: Value = serde_json::from_str(&ok(&data, &args)).unwrap();
        assert_eq!(report["block"], block_90.as_str(), "{args:?}");
    }
    // The imported queue state is recorded and its handle flagged.
    let states: Value = serde_json::from_str(&ok(&data, &["inspect", "--json", "states"])).unwrap();
    let queue_states: Vec<&Value> = states
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["kind"] == "queue")
        .collect();
    assert_eq!(queue_states.len(), 1, "{states}");
    assert_eq!(queue_states[0]["block"], block_90.as_str());
    let b90 = block_json(&data, &["inspect", "--json", "block", &block_90]);
    assert!(
        flags(&b90).contains(&"HAS_PERSISTENT_QUEUE_STATE".to_string()),
        "{b90}"
    );
}

#[test]
fn init_stores_the_zerostate_states_with_their_flags() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    init(&data);
    let states: Value = serde_json::from_str(&ok(&data, &["inspect", "--json", "states"])).unwrap();
    let states = states.as_array().unwrap();
    assert_eq!(states.len(), 2, "mc and shard zerostate: {states:?}");
    for state in states {
        assert_eq!(state["kind"], "shard");
        assert_eq!(state["chunk_size"], 1 << 20);
        let block = block_json(
            &data,
            &[
                "inspect",
                "--json",
                "block",
                state["block"].as_str().unwrap(),
            ],
        );
        let flags = flags(&block);
        for flag in ["IS_ZEROSTATE", "HAS_STATE", "HAS_PERSISTENT_SHARD_STATE"] {
            assert!(flags.contains(&flag.to_string()), "{flag} in {block}");
        }
        assert_eq!(block["persistent_states"][0]["kind"], "shard");
    }
    // The shard zerostate is reached by its short id too.
    let shard = block_json(
        &data,
        &["inspect", "--json", "block", "0:8000000000000000:0"],
    );
    assert!(shard["id"]
        .as_str()
        .unwrap()
        .starts_with("0:8000000000000000:0:"));
}

#[test]
fn a_shard_zerostate_that_does_not_match_refuses_init() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // The mc zerostate is not the zerostate of a listed shard.
    let zerostate = zerostate_path();
    let err = fails(
        &data,
        &[
            "init",
            "--zerostate",
            zerostate.to_str().unwrap(),
            "--shard-zerostate",
            zerostate.to_str().unwrap(),
        ],
    );
    assert!(
        err.contains("-1:8000000000000000 is not listed in the mc zerostate"),
        "{err}"
    );
    assert!(!data.join("global.json").exists());
}

#[test]
fn node_json_rejects_unknown_fields_and_global_json_logs_them() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    init(&data);
    let node_json = data.join("node.json");
    let original = std::fs::read_to_string(&node_json).unwrap();
    let mut config: Value = serde_json::from_str(&original).unwrap();
    config["listen_adress"] = Value::from("127.0.0.1:1");
    std::fs::write(&node_json, config.to_string()).unwrap();
    let err = fails(&data, &["inspect", "summary"]);
    assert!(err.contains("`listen_adress`"), "{err}");
    assert!(err.contains(node_json.to_str().unwrap()), "{err}");
    // nested too
    let mut config: Value = serde_json::from_str(&original).unwrap();
    config["storage"]["archives"]["zstd_levl"] = Value::from(3);
    std::fs::write(&node_json, config.to_string()).unwrap();
    let err = fails(&data, &["inspect", "summary"]);
    assert!(err.contains("storage.archives.zstd_levl"), "{err}");
    std::fs::write(&node_json, &original).unwrap();

    // global.json is a Tycho file: a field regolith does not use is accepted and logged.
    let global_json = data.join("global.json");
    let mut global: Value =
        serde_json::from_str(&std::fs::read_to_string(&global_json).unwrap()).unwrap();
    global["validator_config"] = serde_json::json!({"x": 1});
    std::fs::write(&global_json, global.to_string()).unwrap();
    let zerostate = zerostate_path();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_regolith"))
        .args(["--data", data.to_str().unwrap()])
        .args(["init", "--zerostate", zerostate.to_str().unwrap()])
        .env("RUST_LOG", "info")
        .output()
        .unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("validator_config"), "{stderr}");
    // Logs to a pipe carry no colour codes.
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");
}

#[test]
fn a_data_dir_from_before_the_genesis_data_gets_it_at_its_next_start() {
    use regolith_storage::node_state::ZEROSTATE_PROOF;
    use regolith_storage::persistent_state::PersistentStateKey;
    use regolith_storage::tables::{PersistentStates, State};
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    init(&data);
    let before = summary(&data);
    assert!(
        before["zerostate_proof_size"].as_u64().unwrap() > 0,
        "{before}"
    );
    // What an older build left: no proof, no state index, no state files (only zerostate.boc).
    {
        let storage =
            regolith_storage::Storage::open(regolith_storage::StorageConfig::new(&data)).unwrap();
        let db = storage.db();
        db.delete::<State>(&ZEROSTATE_PROOF).unwrap();
        for record in storage.persistent_states().list().unwrap() {
            std::fs::remove_file(storage.persistent_states().dir().join(&record.file)).unwrap();
            let key =
                PersistentStateKey(regolith_formats::BlockKey::of(&record.block), record.kind);
            db.delete::<PersistentStates>(&key).unwrap();
        }
        assert!(storage.persistent_states().list().unwrap().is_empty());
    }
    let old = summary(&data);
    assert_eq!(old["zerostate_proof_size"], Value::Null, "{old}");
    assert_eq!(old["persistent_states"]["recorded"], 0, "{old}");

    // The next writer (here `import`) completes it.
    ok(&data, &["import", "--quiet", &archive_1_arg()]);
    let after = summary(&data);
    assert_eq!(
        after["zerostate_proof_size"],
        before["zerostate_proof_size"]
    );
    assert_eq!(after["persistent_states"]["recorded"], 2, "{after}");
}

#[test]
fn a_zerostate_proof_stored_in_the_old_wrapped_format_is_built_again_at_the_next_start() {
    use regolith_formats::zerostate::check_zerostate_proof;
    use tycho_types::boc::Boc;
    use tycho_types::cell::CellBuilder;
    use tycho_types::merkle::MerkleProof;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    init(&data);
    let open =
        || regolith_storage::Storage::open(regolith_storage::StorageConfig::new(&data)).unwrap();
    let (current, root_hash) = {
        let storage = open();
        let proof = storage
            .node_state()
            .load_zerostate_proof()
            .unwrap()
            .unwrap();
        let root_hash = storage
            .node_state()
            .load_zerostate_id()
            .unwrap()
            .unwrap()
            .root_hash;
        check_zerostate_proof(&proof, &root_hash).unwrap();
        // What an older build stored: the same tree inside a Merkle-proof cell.
        let tree = Boc::decode(&proof).unwrap();
        let wrapped = Boc::encode(
            CellBuilder::build_from(&MerkleProof {
                hash: *tree.hash(0),
                depth: tree.depth(0),
                cell: tree,
            })
            .unwrap(),
        );
        assert!(check_zerostate_proof(&wrapped, &root_hash).is_err());
        storage
            .node_state()
            .store_zerostate_proof(&wrapped)
            .unwrap();
        (proof, root_hash)
    };
    ok(&data, &["import", "--quiet", &archive_1_arg()]);
    let storage = open();
    let after = storage
        .node_state()
        .load_zerostate_proof()
        .unwrap()
        .unwrap();
    assert_eq!(
        after, current,
        "the proof is built again in the served format"
    );
    check_zerostate_proof(&after, &root_hash).unwrap();
}

#[test]
fn an_archive_missing_a_shard_block_stops_before_the_mc_block_that_needs_it_and_heals() {
    use regolith_formats::archive::{ArchiveEntryType, ArchiveReader, ArchiveWriter};
    let dir = tempfile::tempdir().unwrap();
    let raw = archive_1_decompressed();
    let entries: Vec<_> = ArchiveReader::new(&raw[..])
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    // The last shard block: the mc blocks before the one that needs it are applied first.
    let dropped = entries
        .iter()
        .rfind(|e| !e.block_id.is_masterchain() && e.ty == ArchiveEntryType::Block)
        .unwrap()
        .block_id;
    // The first mc block that needs it: its top shard blocks reach it by prev ids.
    let parsed: std::collections::HashMap<_, _> = entries
        .iter()
        .filter(|e| e.ty == ArchiveEntryType::Block)
        .map(|e| {
            (
                e.block_id,
                regolith_formats::ParsedBlock::parse(&e.block_id, &e.data).unwrap(),
            )
        })
        .collect();
    let mut mc: Vec<_> = parsed.keys().filter(|id| id.is_masterchain()).collect();
    mc.sort_by_key(|id| id.seqno);
    let needing = mc
        .into_iter()
        .find(|id| {
            let mut pending = parsed[id].top_shard_blocks().unwrap();
            let mut seen = std::collections::HashSet::new();
            while let Some(next) = pending.pop() {
                if next == dropped {
                    return true;
                }
                if seen.insert(next) {
                    if let Some(b) = parsed.get(&next) {
                        pending.extend(b.prev_ids().unwrap());
                    }
                }
            }
            false
        })
        .unwrap()
        .seqno;
    let mut writer = ArchiveWriter::new(Vec::new()).unwrap();
    for e in &entries {
        if !(e.block_id == dropped && e.ty == ArchiveEntryType::Block) {
            writer.write_entry(&e.block_id, e.ty, &e.data).unwrap();
        }
    }
    let holed = dir.path().join("holed.bin");
    std::fs::write(&holed, zstd::encode_all(&writer.finish()[..], 3).unwrap()).unwrap();

    let data = dir.path().join("data");
    init(&data);
    let err = fails(&data, &["import", holed.to_str().unwrap()]);
    assert!(err.contains(&dropped.to_string()), "{err}");
    assert!(err.contains(&format!("mc block {needing}")), "{err}");
    // What came before stays; nothing of the mc block that needs the missing one is stored.
    let after = summary(&data);
    assert!(
        after["last_applied_mc_block"]
            .as_str()
            .unwrap()
            .starts_with(&format!("-1:8000000000000000:{}:", needing - 1)),
        "{after}"
    );
    let block = regolith(&data, &["inspect", "--json", "block", &needing.to_string()]);
    assert!(!block.status.success(), "mc block {needing} is not stored");
    assert_clean(&after);

    // The intact archive then gives exactly the state of a clean import.
    ok(&data, &["import", "--quiet", &archive_1_arg()]);
    let clean = dir.path().join("clean");
    init(&clean);
    ok(&clean, &["import", "--quiet", &archive_1_arg()]);
    let digest = |d: &std::path::Path| {
        serde_json::from_str::<Value>(&ok(d, &["inspect", "--json", "summary", "--digest"]))
            .unwrap()["chain_digest"]
            .clone()
    };
    assert_eq!(digest(&data), digest(&clean));
    assert!(!digest(&data).is_null());
    assert_eq!(queue_view(&data), queue_view(&clean));
}

/// `regolith devnet --help` tells both ways node1 gets its chain: the imported fixture archives, and `--live`
/// (a new chain made as it runs), which `make run` uses.
#[test]
fn devnet_help_describes_the_live_chain() {
    let dir = tempfile::tempdir().unwrap();
    let help = ok(dir.path(), &["devnet", "--help"]);
    assert!(
        help.contains("or with `--live` makes a new chain as it runs"),
        "{help}"
    );
    assert!(help.contains("--live"), "{help}");
    assert!(help.contains("--block-interval"), "{help}");
    assert!(
        !help.contains("node1 serves the imported fixture chain"),
        "{help}"
    );
}
