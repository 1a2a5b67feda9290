//! A generated chain (`regolith chain generate`) is imported by a stock data dir: `init --zerostate` with the
//! generated zerostate, `import` of every archive in order, and `inspect key-blocks` lists its key blocks.

mod common;

use common::*;
use regolith_test_support::zerostate_path;
use serde_json::Value;

#[test]
fn a_generated_chain_is_imported_across_key_blocks_and_two_rotations() {
    let dir = tempfile::tempdir().unwrap();
    let chain = dir.path().join("chain");
    let data = dir.path().join("data");
    let base = zerostate_path();
    let out = ok(
        &data,
        &[
            "chain",
            "generate",
            "--out",
            chain.to_str().unwrap(),
            "--base-zerostate",
            base.to_str().unwrap(),
            "--mc-blocks",
            "60",
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
            "--seed",
            "3",
        ],
    );
    assert!(
        out.contains("generated 60 mc blocks (180 blocks, 6 key blocks"),
        "{out}"
    );
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(chain.join("chain.json")).unwrap()).unwrap();
    let rotations = manifest["key_blocks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| k["rotates"] == true)
        .count();
    assert_eq!(rotations, 3, "key blocks 20, 40 and 60 install new sets");

    let zerostate = chain.join("zerostate.boc");
    let out = ok(&data, &["init", "--zerostate", zerostate.to_str().unwrap()]);
    assert!(
        out.contains(&format!(
            "zerostate id: {}",
            manifest["zerostate"].as_str().unwrap()
        )),
        "{out}"
    );

    let mut archives: Vec<_> = std::fs::read_dir(chain.join("archives"))
        .unwrap()
        .map(|e| e.unwrap().path().to_str().unwrap().to_string())
        .collect();
    archives.sort();
    assert_eq!(archives.len(), 6);
    let states = chain.join("states");
    let mut args = vec!["import", "--quiet", "--states", states.to_str().unwrap()];
    args.extend(archives.iter().map(String::as_str));
    let out = ok(&data, &args);
    assert!(out.contains("last applied mc block 60"), "{out}");

    let key_blocks: Value =
        serde_json::from_str(&ok(&data, &["inspect", "--json", "key-blocks"])).unwrap();
    let listed: Vec<u64> = key_blocks
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["seqno"].as_u64().unwrap())
        .collect();
    assert_eq!(listed, vec![0, 10, 20, 30, 40, 50, 60]);
    for (entry, generated) in key_blocks.as_array().unwrap()[1..]
        .iter()
        .zip(manifest["key_blocks"].as_array().unwrap())
    {
        assert_eq!(entry["id"], generated["id"]);
    }
    assert!(
        out.contains("stored 9 shard states and 9 queue states"),
        "persistent key blocks 20, 40, 60 with 2 shards: {out}"
    );
    let served: Value = serde_json::from_str(&ok(&data, &["inspect", "--json", "states"])).unwrap();
    assert_eq!(
        served.as_array().unwrap().len(),
        3 + 18,
        "zerostates and 18 generated: {served}"
    );
    let block: Value =
        serde_json::from_str(&ok(&data, &["inspect", "--json", "block", "40"])).unwrap();
    let flags = block["flags"].to_string();
    for flag in [
        "IS_KEY_BLOCK",
        "IS_PERSISTENT",
        "HAS_PERSISTENT_SHARD_STATE",
        "HAS_PERSISTENT_QUEUE_STATE",
    ] {
        assert!(flags.contains(flag), "{flag} in {flags}");
    }
    let summary = summary(&data);
    assert_eq!(
        summary["last_applied_mc_block"].as_str(),
        manifest["last_mc_block"].as_str(),
        "{summary}"
    );
}
