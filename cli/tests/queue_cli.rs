//! End-to-end tests of the internal queue inside the node: import applies and commits it, every start runs
//! queue.md §5.4, SIGKILL during import, `import-queue-state` and its bad input.

mod common;

use regolith_test_support::{archive_1_arg, archive_1_bytes, fixtures};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::*;
use serde_json::Value;

const SHARD: &str = "0:8000000000000000";
const MC: &str = "-1:8000000000000000";

fn pointer_seqno(view: &Value, shard: &str) -> Option<u64> {
    view["commit_pointers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["shard"] == shard)
        .map(|p| p["seqno"].as_u64().unwrap())
}

fn diffs_of<'a>(view: &'a Value, shard: &str) -> Vec<&'a Value> {
    view["shards"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["shard"] == shard)
        .map(|s| s["diffs"].as_array().unwrap().iter().collect())
        .unwrap_or_default()
}

fn imported(dir: &Path) -> std::path::PathBuf {
    let data = dir.join("data");
    init(&data);
    ok(&data, &["import", "--quiet", &archive_1_arg()]);
    data
}

#[test]
fn import_applies_and_commits_the_queue() {
    let dir = tempfile::tempdir().unwrap();
    let data = imported(dir.path());
    let view = queue_view(&data);
    let last_applied = summary(&data)["last_applied_mc_block"].clone();
    assert_eq!(view["last_committed_mc_block"], last_applied);
    assert!(last_applied
        .as_str()
        .unwrap()
        .starts_with("-1:8000000000000000:100:"));
    // The pointers stand at the diffs of the last mc block and of its top shard block.
    assert_eq!(pointer_seqno(&view, MC), Some(100));
    assert_eq!(pointer_seqno(&view, SHARD), Some(7));
    assert_eq!(view["committed_diffs"], 107, "{view}");
    assert_eq!(view["uncommitted_diffs"], 0, "{view}");
    let shard_diffs = diffs_of(&view, SHARD);
    assert_eq!(shard_diffs.len(), 7);
    assert!(shard_diffs.iter().all(|d| d["zone"] == "committed"));
    assert!(view["content_digest"].as_str().unwrap().len() == 64);

    // Importing the same archive again, and starting the node, change no byte of the queue.
    let out = ok(&data, &["import", &archive_1_arg()]);
    assert!(out.contains("nothing to do"), "{out}");
    assert_eq!(queue_view(&data), view);
    // A running node collects below the GC bounds; above them the start changes nothing.
    start_and_stop(&data);
    assert_eq!(beyond_gc(&queue_view(&data)), beyond_gc(&view));
}

#[test]
fn start_rebuilds_the_queue_from_the_applied_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let data = imported(dir.path());
    let view = queue_view(&data);
    // A data dir whose queue is gone (or was never built) gets every applied diff back at the next start.
    std::fs::remove_dir_all(data.join("int_queue")).unwrap();
    let out = ok(&data, &["import", &archive_1_arg()]);
    assert!(out.contains("nothing to do"), "{out}");
    assert_eq!(queue_view(&data), view);
}

#[test]
fn a_queue_ahead_of_the_applied_state_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let full = imported(&dir.path().join("full"));
    // A second node that applied only part of the chain.
    let partial = dir.path().join("partial");
    init(&partial);
    let compressed = archive_1_bytes();
    let truncated = dir.path().join("truncated.bin");
    std::fs::write(&truncated, &compressed[..compressed.len() / 2]).unwrap();
    fails(&partial, &["import", truncated.to_str().unwrap()]);
    let applied = summary(&partial)["last_applied_mc_block"].clone();
    assert!(!applied
        .as_str()
        .unwrap()
        .starts_with("-1:8000000000000000:100:"));

    // Give it the full node's queue, committed at mc 100: every start refuses it and changes nothing.
    std::fs::remove_dir_all(partial.join("int_queue")).unwrap();
    copy_dir(&full.join("int_queue"), &partial.join("int_queue"));
    let before = queue_view(&partial);
    let err = fails(&partial, &["import", &archive_1_arg()]);
    assert!(err.contains("ahead"), "{err}");
    let err = fails(&partial, &["run"]);
    assert!(err.contains("ahead"), "{err}");
    assert_eq!(queue_view(&partial), before);
    assert_eq!(summary(&partial)["last_applied_mc_block"], applied);
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name() != "LOCK" {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

#[test]
fn sigkill_during_import_then_start_matches_a_clean_import() {
    use rand::Rng;
    let dir = tempfile::tempdir().unwrap();
    let clean_dir = dir.path().join("clean");
    init(&clean_dir);
    let started = std::time::Instant::now();
    ok(&clean_dir, &["import", "--quiet", &archive_1_arg()]);
    // Kill at moments spread over a whole import.
    let import_ms = (started.elapsed().as_millis() as u64).max(50);
    let clean = queue_view(&clean_dir);

    let data = dir.path().join("data");
    init(&data);
    let mut rng = rand::thread_rng();
    let mut saw_uncommitted = 0;
    for _ in 0..20 {
        let mut child = spawn_import(&data);
        std::thread::sleep(Duration::from_millis(rng.gen_range(5..import_ms)));
        let _ = child.kill();
        child.wait().unwrap();
        if queue_dir_exists(&data) && queue_view(&data)["uncommitted_diffs"] != 0 {
            saw_uncommitted += 1;
        }
        // After a start the uncommitted zone is empty and the queue is committed up to the applied chain.
        start_and_stop(&data);
        let view = queue_view(&data);
        assert_eq!(view["uncommitted_diffs"], 0, "{view}");
        let applied = summary(&data)["last_applied_mc_block"].clone();
        if !applied.as_str().unwrap().contains(":0:") {
            assert_eq!(view["last_committed_mc_block"], applied);
        }
    }
    ok(&data, &["import", "--quiet", &archive_1_arg()]);
    assert_eq!(beyond_gc(&queue_view(&data)), beyond_gc(&clean));
    eprintln!("kills that left uncommitted diffs behind: {saw_uncommitted} of 20");
}

/// Runs an import that aborts at a crash point (like a power cut).
fn import_crashing_at(data: &Path, point: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_regolith"))
        .arg("--data")
        .arg(data)
        .args(["import", "--quiet", &archive_1_arg()])
        .env("RUST_LOG", "error")
        .env("REGOLITH_CRASH_AT", point)
        .output()
        .unwrap();
    assert!(!out.status.success(), "the import should abort at {point}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("crash point"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn crashes_between_apply_and_commit_are_repaired_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let clean = queue_view(&imported(&dir.path().join("clean")));
    let data = dir.path().join("data");
    init(&data);

    // A crash right after a shard block's diff went in, before the mc block that commits it: the next
    // start finds an uncommitted diff and clears it.
    for n in ["1", "3"] {
        import_crashing_at(&data, &format!("shard-diff-applied:{n}"));
        let view = queue_view(&data);
        assert!(view["uncommitted_diffs"].as_u64().unwrap() >= 1, "{view}");
        start_and_stop(&data);
        let view = queue_view(&data);
        assert_eq!(view["uncommitted_diffs"], 0, "{view}");
        let applied = summary(&data)["last_applied_mc_block"].clone();
        if applied
            .as_str()
            .unwrap()
            .starts_with("-1:8000000000000000:0:")
        {
            assert!(view["last_committed_mc_block"].is_null(), "{view}");
        } else {
            assert_eq!(view["last_committed_mc_block"], applied);
        }
    }

    // A crash after an mc block was applied but before the queue committed on it: the queue is behind; the
    // next start re-applies the diffs applied after the last commit and commits the applied mc block.
    import_crashing_at(&data, "mc-block-applied:40");
    let applied = summary(&data)["last_applied_mc_block"].clone();
    let view = queue_view(&data);
    assert_ne!(view["last_committed_mc_block"], applied, "{view}");
    start_and_stop(&data);
    let view = queue_view(&data);
    assert_eq!(view["last_committed_mc_block"], applied, "{view}");
    assert_eq!(view["uncommitted_diffs"], 0, "{view}");

    ok(&data, &["import", "--quiet", &archive_1_arg()]);
    assert_eq!(beyond_gc(&queue_view(&data)), beyond_gc(&clean));
}

fn queue_dir_exists(data: &Path) -> bool {
    data.join("int_queue").join("CURRENT").exists()
}

fn shard_state() -> String {
    fixtures()
        .join("queue_state/shard.bin")
        .to_str()
        .unwrap()
        .to_string()
}

const SHARD_STATE_BLOCK: &str = "0:8000000000000000:160:0000000000000000000000000000000000000000000000000000000000000000:0000000000000000000000000000000000000000000000000000000000000000";
const SHARD_STATE_HASH: &str = "794fe9ce31b7919d2b6ca9ae0f97501f4017382a273b8f3ee512dcfcb5b14482";

fn import_state(data: &Path, file: &str, hash: &str, tail_len: &str) -> std::process::Output {
    regolith(
        data,
        &[
            "import-queue-state",
            "--block",
            SHARD_STATE_BLOCK,
            "--file",
            file,
            "--diff-hash",
            hash,
            "--tail-len",
            tail_len,
        ],
    )
}

#[test]
fn queue_state_import_and_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let data = imported(dir.path());
    let before = queue_view(&data);
    let original = std::fs::read(shard_state()).unwrap();

    let write = |name: &str, bytes: &[u8]| {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        path.to_str().unwrap().to_string()
    };
    let failed = |out: std::process::Output, what: &str| {
        assert!(!out.status.success(), "{what}: the import should fail");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.contains("queue state"), "{what}: {err}");
        assert_eq!(queue_view(&data), before, "{what}: nothing may be written");
        err
    };

    // A corrupted file: one flipped byte in the message cells, and a truncated file.
    let mut flipped = original.clone();
    let at = flipped.len() - 200;
    flipped[at] ^= 0x10;
    failed(
        import_state(
            &data,
            &write("flipped.bin", &flipped),
            SHARD_STATE_HASH,
            "3",
        ),
        "flipped byte",
    );
    failed(
        import_state(
            &data,
            &write("truncated.bin", &original[..original.len() / 3]),
            SHARD_STATE_HASH,
            "3",
        ),
        "truncated",
    );
    // A corrupted zstd stream.
    let mut compressed = zstd::stream::encode_all(&original[..], 3).unwrap();
    let mid = compressed.len() / 2;
    compressed[mid] ^= 0xff;
    failed(
        import_state(&data, &write("bad.zst", &compressed), SHARD_STATE_HASH, "3"),
        "corrupted zstd",
    );
    // A wrong expected hash or tail_len.
    let err = failed(
        import_state(&data, &shard_state(), &"ab".repeat(32), "3"),
        "wrong hash",
    );
    assert!(err.contains("hash"), "{err}");
    let err = failed(
        import_state(&data, &shard_state(), SHARD_STATE_HASH, "2"),
        "wrong tail_len",
    );
    assert!(err.contains("2") && err.contains("3"), "{err}");
    // A block that is not stored needs the expected values on the command line.
    let out = regolith(
        &data,
        &[
            "import-queue-state",
            "--block",
            SHARD_STATE_BLOCK,
            "--file",
            &shard_state(),
        ],
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--diff-hash"));

    // Expected values from a stored block: mc block 90 declares another diff hash than master.bin's.
    let master = fixtures().join("queue_state/master.bin");
    let out = regolith(
        &data,
        &[
            "import-queue-state",
            "--block",
            "90",
            "--file",
            master.to_str().unwrap(),
        ],
    );
    let err = failed(out, "hash from the stored block");
    assert!(
        err.contains("5795ca5d1b8d0c1ce96394eef851bde718ff2e14fd2840098ed2bb7640f278c5"),
        "{err}"
    );
    let text = ok(&data, &["inspect", "queue"]);
    assert!(
        text.contains("diffs: 107 committed, 0 uncommitted"),
        "{text}"
    );

    // The good file, zstd-compressed: 3 committed diffs, 4 300 messages, the shard pointer at 160.
    let good = zstd::stream::encode_all(&original[..], 3).unwrap();
    let out = import_state(&data, &write("good.zst", &good), SHARD_STATE_HASH, "3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("3 diffs, 4300 messages"), "{text}");
    let view = queue_view(&data);
    assert_eq!(pointer_seqno(&view, SHARD), Some(160));
    let diffs = diffs_of(&view, SHARD);
    let imported: Vec<_> = diffs
        .iter()
        .filter(|d| d["seqno"].as_u64().unwrap() >= 158)
        .collect();
    assert_eq!(imported.len(), 3);
    assert!(imported.iter().all(|d| d["zone"] == "committed"));
    let messages: u64 = imported
        .iter()
        .flat_map(|d| d["messages_per_partition"].as_object().unwrap().values())
        .map(|n| n.as_u64().unwrap())
        .sum();
    assert_eq!(messages, 4300);
    // A shard import moves only its own pointer.
    assert_eq!(
        view["last_committed_mc_block"],
        before["last_committed_mc_block"]
    );
    // Importing it again (plain) gives identical content.
    let out = import_state(&data, &shard_state(), SHARD_STATE_HASH, "3");
    assert!(out.status.success());
    assert_eq!(queue_view(&data), view);
}

#[test]
fn a_block_whose_queue_diff_hash_differs_is_not_imported() {
    use regolith_formats::archive::{ArchiveEntryType, ArchiveReader};
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    init(&data);
    let compressed = archive_1_bytes();
    let mut raw = zstd::stream::decode_all(&compressed[..]).unwrap();
    let entries: Vec<_> = ArchiveReader::new(&raw[..])
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    // Flip a byte of the prev_hash of one diff: it still parses, but its hash is no longer the block's.
    let victim = entries
        .iter()
        .filter(|e| e.ty == ArchiveEntryType::QueueDiff)
        .nth(30)
        .unwrap();
    let start = victim.offset as usize;
    let data_at = start
        + raw[start..]
            .windows(victim.data.len())
            .position(|w| w == victim.data.as_slice())
            .unwrap();
    // Bytes 4..36 of a boxed diff are its prev_hash.
    raw[data_at + 4] ^= 0x01;
    let bad = dir.path().join("bad_diff.bin");
    std::fs::write(&bad, zstd::stream::encode_all(&raw[..], 3).unwrap()).unwrap();

    let err = fails(&data, &["import", bad.to_str().unwrap()]);
    assert!(err.contains("queue diff hash"), "{err}");
    assert!(err.contains(&victim.block_id.to_string()), "{err}");
    let view = queue_view(&data);
    let shard = victim.block_id.shard.to_string();
    assert!(
        !diffs_of(&view, &shard)
            .iter()
            .any(|d| d["seqno"] == victim.block_id.seqno),
        "the victim's diff is not in the queue"
    );
    // The good archive completes the queue as a clean import does.
    ok(&data, &["import", "--quiet", &archive_1_arg()]);
    let view = queue_view(&data);
    assert_eq!(view["committed_diffs"], 107);
    assert_eq!(view["uncommitted_diffs"], 0);
}
