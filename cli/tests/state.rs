//! The node keeps the chain's shard states: every block's state update is applied and checked on import, the
//! states are stored at checkpoints with exact reference counts (`inspect state --check`), they equal the
//! generator's states, and a crash at a checkpoint or between checkpoints is repaired by the next start.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use regolith_formats::persistent_state::{parse_state_object_name, StateObject, StatePart};
use regolith_storage::StateKind;
use regolith_test_support::zerostate_path;
use serde_json::Value;

/// A chain of 100 mc blocks (key blocks every 10, persistent every 2nd, rotations) with 40 accounts a chain.
fn generate(dir: &Path) -> (PathBuf, Value) {
    let chain = dir.join("chain");
    let base = zerostate_path();
    ok(
        &dir.join("unused"),
        &[
            "chain",
            "generate",
            "--out",
            chain.to_str().unwrap(),
            "--base-zerostate",
            base.to_str().unwrap(),
            "--mc-blocks",
            "100",
            "--key-block-every",
            "10",
            "--rotate-every",
            "2",
            "--shards",
            "2",
            "--messages",
            "4",
            "--validators",
            "5",
            "--accounts",
            "40",
            "--seed",
            "11",
        ],
    );
    let manifest =
        serde_json::from_slice(&std::fs::read(chain.join("chain.json")).unwrap()).unwrap();
    (chain, manifest)
}

fn archives(chain: &Path) -> Vec<String> {
    let mut archives: Vec<String> = std::fs::read_dir(chain.join("archives"))
        .unwrap()
        .map(|e| e.unwrap().path().to_str().unwrap().to_string())
        .collect();
    archives.sort();
    archives
}

fn import_args(chain: &Path) -> Vec<String> {
    let mut args = vec!["import".to_string(), "--quiet".to_string()];
    args.extend(archives(chain));
    args
}

/// The persistent states a node serves: (block, kind, size) of each.
fn served_states(data: &Path) -> Vec<(String, String, u64)> {
    let served: Value = serde_json::from_str(&ok(data, &["inspect", "--json", "states"])).unwrap();
    served
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["block"].as_str().unwrap().to_string(),
                r["kind"].as_str().unwrap().to_string(),
                r["size"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// Compares every persistent state `data` serves (but the zerostates) with the generator's file of the same
/// name in `chain`: a shard state must have its root, a queue state its bytes (the same diffs and messages in
/// the same order). Returns the mc blocks whose states are served, in order, and the files compared.
fn served_states_equal_to_the_generators(data: &Path, chain: &Path) -> (Vec<u32>, usize) {
    let served: Value = serde_json::from_str(&ok(data, &["inspect", "--json", "states"])).unwrap();
    let mut mc_blocks = Vec::new();
    let mut compared = 0;
    for record in served.as_array().unwrap() {
        let file = Path::new(record["file"].as_str().unwrap());
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let Some(StateObject::State(id, kind, StatePart::Unsplit)) = parse_state_object_name(&name)
        else {
            panic!("an unexpected state file {name}");
        };
        if id.seqno == 0 {
            continue;
        }
        if id.is_masterchain() && kind == StateKind::Shard {
            mc_blocks.push(id.seqno);
        }
        let ours = zstd::decode_all(std::fs::File::open(file).unwrap()).unwrap();
        let theirs =
            zstd::decode_all(std::fs::File::open(chain.join("states").join(&name)).unwrap())
                .unwrap();
        match kind {
            StateKind::Shard => assert_eq!(
                tycho_types::boc::Boc::decode(&ours).unwrap().repr_hash(),
                tycho_types::boc::Boc::decode(&theirs).unwrap().repr_hash(),
                "{name}"
            ),
            StateKind::Queue => assert!(ours == theirs, "{name}: the queue states differ"),
        }
        compared += 1;
    }
    mc_blocks.sort_unstable();
    (mc_blocks, compared)
}

/// `inspect state --check`, which must be clean.
fn checked_states(data: &Path) -> Value {
    let out = ok(data, &["inspect", "--json", "state", "--check"]);
    let value: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(value["check"]["ok"], true, "{value}");
    value
}

#[test]
fn imported_states_are_exact_equal_to_the_generators_and_survive_crashes_at_and_between_checkpoints(
) {
    let dir = tempfile::tempdir().unwrap();
    let (chain, manifest) = generate(dir.path());
    let zerostate = chain.join("zerostate.boc");

    // An uninterrupted import.
    let data = dir.path().join("data");
    ok(&data, &["init", "--zerostate", zerostate.to_str().unwrap()]);
    let args = import_args(&chain);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = ok(&data, &args);
    assert!(out.contains("last applied mc block 100"), "{out}");
    let states = checked_states(&data);
    assert_eq!(states["checkpoint"], manifest["last_mc_block"], "{states}");
    assert!(states["cells"].as_u64().unwrap() > 1000, "{states}");

    // The node's states of the persistent key block 100 (mc and both shards) have the roots of the
    // generator's state files for the same blocks.
    let stored: Vec<(String, String)> = states["states"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["block"].as_str().unwrap().to_string(),
                s["root"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let mut compared = 0;
    for entry in std::fs::read_dir(chain.join("states")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        let Some(StateObject::State(id, StateKind::Shard, StatePart::Unsplit)) =
            parse_state_object_name(&name)
        else {
            continue;
        };
        let Some((_, root)) = stored.iter().find(|(block, _)| *block == id.to_string()) else {
            continue;
        };
        let compressed = std::fs::read(chain.join("states").join(&name)).unwrap();
        let raw = zstd::decode_all(compressed.as_slice()).unwrap();
        let generated = tycho_types::boc::Boc::decode(&raw).unwrap();
        assert_eq!(*root, generated.repr_hash().to_string(), "{name}");
        compared += 1;
    }
    assert_eq!(
        compared, 3,
        "mc block 100 and its two top shard blocks: {stored:?}"
    );

    // The node wrote the persistent states of its persistent key blocks (20, 40, 60, 80, 100) itself and
    // rotated them as stock does (2^17 s apart: the three newest stay): it serves those of 60, 80 and 100
    // (mc and 2 shards, shard and queue state each) and the zerostates. Each of its shard-state files has
    // the root of the generator's file for the same block, and each queue state is the generator's, byte
    // for byte.
    let (mc_blocks, made) = served_states_equal_to_the_generators(&data, &chain);
    assert_eq!(mc_blocks, vec![60, 80, 100]);
    assert_eq!(
        made, 18,
        "3 persistent key blocks × (mc + 2 shards) × (shard + queue)"
    );
    // The rotated states' files are gone.
    let files: Vec<String> = std::fs::read_dir(data.join("states"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        files
            .iter()
            .filter(|f| parse_state_object_name(f).is_some())
            .count(),
        3 + 18,
        "{files:?}"
    );
    let block: Value =
        serde_json::from_str(&ok(&data, &["inspect", "--json", "block", "80"])).unwrap();
    let flags = block["flags"].to_string();
    for flag in [
        "IS_PERSISTENT",
        "HAS_PERSISTENT_SHARD_STATE",
        "HAS_PERSISTENT_QUEUE_STATE",
        "SKIP_STATES_GC_FINISHED",
    ] {
        assert!(flags.contains(flag), "{flag} in {flags}");
    }

    // Killed at a checkpoint batch (the 1st and the 3rd) and between checkpoints (after mc block 15 and 57
    // were made the last applied): the next import restores the states from the last checkpoint by
    // applying the stored blocks again, and ends with the same stored states, exactly counted, and the same
    // persistent states served.
    for (n, point) in [
        "state-checkpoint-written:1",
        "mc-block-applied:15",
        "state-checkpoint-written:3",
        "mc-block-applied:57",
        // In the persistent save of key block 20 (after its 2nd file) and of 40 (after its 3rd), and in the
        // rotation at key block 80 (after its 1st removal): the save resumes at the next start, the rotation
        // is redone by the next one.
        "persistent-state-file-written:2",
        "persistent-state-file-written:9",
        "persistent-state-rotated:1",
        // Between two states-GC batches (after the 3rd state removed).
        "states-gc-removed:3",
        // In the import of the zerostates (50 cell rows a batch here): right after its journal was opened,
        // and after its 4th batch. The next start resumes it from the journal's cursor.
        "state-import-batch-written:1",
        "state-import-batch-written:5",
    ]
    .iter()
    .enumerate()
    {
        let crashed = dir.path().join(format!("crashed-{n}"));
        ok(
            &crashed,
            &["init", "--zerostate", zerostate.to_str().unwrap()],
        );
        let importing = point.starts_with("state-import");
        if importing {
            let path = crashed.join("node.json");
            let mut config: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            config["states"]["import_batch_cells"] = 50.into();
            std::fs::write(&path, serde_json::to_vec_pretty(&config).unwrap()).unwrap();
        }
        let out = Command::new(env!("CARGO_BIN_EXE_regolith"))
            .arg("--data")
            .arg(&crashed)
            .args(&args)
            .env("RUST_LOG", "error")
            .env("REGOLITH_CRASH_AT", point)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains("crash point"),
            "{point}: {stderr}"
        );
        if importing {
            // The rows hold a part of the import: the checker says so, and that it is not damage.
            let out = Command::new(env!("CARGO_BIN_EXE_regolith"))
                .arg("--data")
                .arg(&crashed)
                .args(["inspect", "--json", "state", "--check"])
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{point}");
            assert!(
                stderr.contains("not final") && stderr.contains("a state import is open"),
                "{point}: {stderr}"
            );
            assert!(crashed.join("state_import/state-import.delta").exists());
        } else {
            let partial = checked_states(&crashed);
            assert_ne!(partial["checkpoint"], manifest["last_mc_block"], "{point}");
        }
        let out = ok(&crashed, &args);
        assert!(out.contains("last applied mc block 100"), "{point}: {out}");
        let resumed = checked_states(&crashed);
        assert_eq!(resumed["states"], states["states"], "{point}");
        assert_eq!(resumed["cells"], states["cells"], "{point}");
        assert_eq!(served_states(&crashed), served_states(&data), "{point}");
        assert!(!crashed.join("state_import/state-import.delta").exists());
    }
}

/// A chain whose mc block 7 carries the state update of mc block 6, re-signed by its validators so that its
/// proof verifies: the import stops at that block with an error naming it, and nothing of its group (the mc
/// block and the shard blocks it brings) is stored; what came before stays, exactly counted.
#[test]
fn a_signed_block_whose_state_update_does_not_follow_is_refused_with_its_group() {
    let dir = tempfile::tempdir().unwrap();
    let (chain, _) = generate(dir.path());
    let forged_dir = dir.path().join("forged");
    let forged = regolith_chain::forge::forge_state_update(&chain, 7, &forged_dir).unwrap();

    let data = dir.path().join("data");
    let zerostate = forged_dir.join("zerostate.boc");
    ok(&data, &["init", "--zerostate", zerostate.to_str().unwrap()]);
    let mut args = vec!["import".to_string(), "--quiet".to_string()];
    args.extend(
        forged
            .archives
            .iter()
            .map(|p| p.to_str().unwrap().to_string()),
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let err = fails(&data, &args);
    assert!(err.contains(&forged.forged.to_string()), "{err}");
    assert!(err.contains("state update"), "{err}");
    assert!(err.contains("starts from state"), "{err}");

    let summary = summary(&data);
    assert!(
        summary["last_applied_mc_block"]
            .as_str()
            .unwrap()
            .starts_with("-1:8000000000000000:6:"),
        "{summary}"
    );
    // Nothing of the refused group is stored: the forged mc block, nor the shard blocks it brings (the blocks
    // of its archive after mc block 6).
    let last = regolith_chain::archive::read_archive(forged.archives.last().unwrap()).unwrap();
    let after_6 = last
        .iter()
        .position(|b| b.id.is_masterchain() && b.id.seqno == 6)
        .unwrap();
    let group: Vec<_> = last[after_6 + 1..].iter().map(|b| b.id).collect();
    assert!(group.len() >= 2, "{group:?}");
    assert_eq!(group.last(), Some(&forged.forged));
    for id in group {
        let out = regolith(&data, &["inspect", "--json", "block", &id.to_string()]);
        assert!(
            !out.status.success(),
            "block {id} of the refused group is stored"
        );
    }
    let states = checked_states(&data);
    assert_ne!(states["checkpoint"], Value::Null, "{states}");
}

/// The state issue's acceptance, with processes as a user runs them: a node syncs a generated chain of 10,000
/// accounts a chain from genesis (key block every 100 mc blocks, persistent every 2nd, so persistent key blocks
/// 200, 400, 600 and 800 and a rotation) from a server that imported it, and makes the persistent states of
/// every persistent key block itself, each with the root of the generator's state file for the same block;
/// then, with that server gone, a fresh node cold-boots from the newest of them, served by that node only, and
/// follows the chain to its tip.
#[test]
fn a_node_synced_from_genesis_makes_the_persistent_states_a_fresh_node_cold_boots_from() {
    use regolith_test_support::wait_until;
    use std::time::Duration;

    const TIP: u32 = 900;
    let dir = tempfile::tempdir().unwrap();
    let chain = dir.path().join("chain");
    let base = zerostate_path();
    ok(
        &dir.path().join("unused"),
        &[
            "chain",
            "generate",
            "--out",
            chain.to_str().unwrap(),
            "--base-zerostate",
            base.to_str().unwrap(),
            "--mc-blocks",
            &TIP.to_string(),
            "--key-block-every",
            "100",
            "--rotate-every",
            "2",
            "--shards",
            "2",
            "--messages",
            "4",
            "--accounts",
            "10000",
            "--seed",
            "23",
        ],
    );
    let zerostate = chain.join("zerostate.boc");
    // A node with its own addresses, quick discovery, and the given bootstrap peers.
    let make_node = |name: &str, peers: &[&Path], boot: Option<Value>| -> (PathBuf, u16) {
        let data = dir.path().join(name);
        let metrics = init_loopback_node(&data, &zerostate, None, peers, boot);
        (data, metrics)
    };
    let height = |port: u16| metric(port, "regolith_sync_last_applied_mc_seqno").map(|v| v as u32);

    // The server imports the chain's blocks (its states are its own business).
    let (server, _) = make_node("server", &[], None);
    let args = import_args(&chain);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    ok(&server, &args);
    let server_run = spawn_run(&server);
    // A failure half-way kills the nodes this test started.
    let mut reaper = Reaper::default();
    reaper.watch(&server_run.child);

    // The node syncs from genesis, applying every state update, and writes its persistent states.
    let (synced, synced_metrics) = make_node(
        "synced",
        &[&server],
        Some(serde_json::json!({"type": "genesis"})),
    );
    let synced_run = spawn_run(&synced);
    reaper.watch(&synced_run.child);
    wait_until(
        "the node did not sync to the tip from genesis",
        Duration::from_secs(900),
        Duration::from_millis(500),
        || height(synced_metrics) == Some(TIP),
    );
    wait_until(
        "the node did not write the persistent states of its 4 persistent key blocks",
        Duration::from_secs(300),
        Duration::from_millis(500),
        || metric(synced_metrics, "regolith_states_persistent_seconds_count") == Some(4.0),
    );
    stop_within(server_run.child, Duration::from_secs(60));

    // A fresh node that knows only the synced node cold-boots from its newest persistent state.
    let (fresh, fresh_metrics) = make_node("fresh", &[&synced], None);
    let fresh_run = spawn_run(&fresh);
    reaper.watch(&fresh_run.child);
    wait_until(
        "the fresh node did not follow the chain to its tip",
        Duration::from_secs(600),
        Duration::from_millis(500),
        || height(fresh_metrics) == Some(TIP),
    );
    stop_within(fresh_run.child, Duration::from_secs(60));
    stop_within(synced_run.child, Duration::from_secs(60));

    // What the synced node serves: the zerostates and, rotated as stock rotates them, the states of the
    // persistent key blocks 400, 600 and 800 (mc and both shards; shard and queue state each), each made
    // by the node: the roots of the generator's files, and the generator's queue states byte for byte.
    let (mc_blocks, compared) = served_states_equal_to_the_generators(&synced, &chain);
    assert_eq!(mc_blocks, vec![400, 600, 800]);
    assert_eq!(
        compared, 18,
        "3 key blocks × (mc + 2 shards) × (shard + queue)"
    );
    // 10,000 accounts a chain: the mc state alone has tens of thousands of cells.
    let synced_states = checked_states(&synced);
    assert!(
        synced_states["cells"].as_u64().unwrap() > 100_000,
        "{synced_states}"
    );

    // The fresh node booted from key block 800 (the states it downloaded are the ones it serves) and holds
    // the same states at the tip as the node that synced from genesis.
    let fresh_served: Value =
        serde_json::from_str(&ok(&fresh, &["inspect", "--json", "states"])).unwrap();
    let fresh_mc: Vec<u64> = fresh_served
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["kind"] == "shard" && r["block"].as_str().unwrap().starts_with("-1:"))
        .map(|r| {
            r["block"]
                .as_str()
                .unwrap()
                .split(':')
                .nth(2)
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    assert!(fresh_mc.contains(&800), "{fresh_served}");
    let fresh_states = checked_states(&fresh);
    assert_eq!(fresh_states["checkpoint"], synced_states["checkpoint"]);
    let roots_at_tip = |states: &Value| -> Vec<Value> {
        let checkpoint = states["checkpoint"].as_str().unwrap().to_string();
        states["states"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["block"] == checkpoint.as_str())
            .cloned()
            .collect()
    };
    assert_eq!(roots_at_tip(&fresh_states), roots_at_tip(&synced_states));
    assert!(!roots_at_tip(&fresh_states).is_empty());
    // Every state both nodes store has the same root in each.
    let synced_roots = synced_states["states"].as_array().unwrap();
    let mut common = 0;
    for state in fresh_states["states"].as_array().unwrap() {
        if let Some(theirs) = synced_roots.iter().find(|s| s["block"] == state["block"]) {
            assert_eq!(theirs["root"], state["root"], "{}", state["block"]);
            common += 1;
        }
    }
    assert!(
        common >= 3,
        "the tip's mc state and its two top shard states"
    );
}

/// The fixture chain (`archive_1`, mc blocks 1..100 and their shard blocks) applied from the fixture zerostate:
/// every stored state has the root its block's state update names, and every count is exact.
#[test]
fn archive_1_applies_from_the_fixture_zerostate_with_exact_states() {
    use regolith_formats::archive::{ArchiveEntryType, ArchiveReader};
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    init(&data);
    let archive = regolith_test_support::archive_1_arg();
    let out = ok(&data, &["import", "--quiet", &archive]);
    assert!(out.contains("last applied mc block 100"), "{out}");
    let states = checked_states(&data);
    assert!(
        states["checkpoint"]
            .as_str()
            .unwrap()
            .starts_with("-1:8000000000000000:100:"),
        "{states}"
    );
    // The new state hash of every block in the archive.
    let mut new_hashes = std::collections::HashMap::new();
    for entry in ArchiveReader::new_compressed(std::fs::File::open(&archive).unwrap()).unwrap() {
        let entry = entry.unwrap();
        if entry.ty != ArchiveEntryType::Block {
            continue;
        }
        let block = regolith_formats::ParsedBlock::parse(&entry.block_id, &entry.data).unwrap();
        let update = block.block.load_state_update().unwrap();
        new_hashes.insert(entry.block_id.to_string(), update.new_hash.to_string());
    }
    let mut compared = 0;
    for state in states["states"].as_array().unwrap() {
        let block = state["block"].as_str().unwrap();
        if let Some(hash) = new_hashes.get(block) {
            assert_eq!(state["root"].as_str().unwrap(), hash, "{block}");
            compared += 1;
        }
    }
    // mc block 100 and the top shard block it lists.
    assert!(compared >= 2, "{states}");
}
