//! End-to-end tests of the `regolith` binary: init, import, inspect, bad input and SIGKILL during import.

mod common;

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

    let out = ok(&data, &["import", &archive_1()]);
    assert!(out.contains("imported 107 blocks"), "{out}");
    let first = summary(&data);
    assert_full_chain(&first);
    assert_clean(&first);

    let out = ok(&data, &["import", &archive_1()]);
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
        std::fs::File::open(archive_1()).unwrap(),
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
    let compressed = std::fs::read(archive_1()).unwrap();
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
    ok(&data, &["import", &archive_1()]);
    let after = summary(&data);
    assert_full_chain(&after);
    assert_clean(&after);
}

#[test]
fn sigkill_during_import_leaves_a_consistent_database() {
    use rand::Rng;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    init(&data);
    let mut rng = rand::thread_rng();
    for _ in 0..24 {
        let mut child = spawn_import(&data);
        std::thread::sleep(Duration::from_millis(rng.gen_range(5..400)));
        let _ = child.kill();
        child.wait().unwrap();
        let s = summary(&data);
        assert_clean(&s);
    }
    ok(&data, &["import", &archive_1()]);
    let s = summary(&data);
    assert_full_chain(&s);
    assert_clean(&s);
}
