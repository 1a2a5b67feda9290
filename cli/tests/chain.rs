//! A generated chain (`regolith chain generate`) is imported by a stock data dir: `init --zerostate` with the
//! generated zerostate, `import` of every archive in order, and `inspect key-blocks` lists its key blocks.

mod common;

use common::*;
use regolith_test_support::zerostate_path;
use serde_json::Value;
use std::sync::atomic::Ordering;

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
    // The node wrote the persistent states of key blocks 20, 40 and 60 (mc and 2 shards each) itself, so
    // the generator's files are already present.
    assert!(
        out.contains("stored 0 shard states and 0 queue states (18 already present)"),
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

/// A fresh node syncs a generated chain from two serving nodes across six key blocks and three validator
/// rotations (archives up to the last key block, block by block after it), and ends with the servers'
/// chain and key-block index.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_node_syncs_a_generated_chain_across_rotations() {
    use regolith_cli::commands::inspect::{chain_digest, key_blocks};
    use regolith_testbed::fixture::{sync_fresh_node, ChainServers};

    let dir = tempfile::tempdir().unwrap();
    let (chain, summary, manifest) = rotating_chain(dir.path());
    assert_eq!(chain.archives.len(), 7, "split at every key block");
    let servers = ChainServers::start_chain(&chain, 2).await.unwrap();
    let synced = sync_fresh_node(
        &dir.path().join("fresh"),
        &chain.zerostate,
        &servers.nodes,
        65,
    )
    .await
    .unwrap();
    let stats = &synced.stats;
    let from_archives = stats.from_archives.load(Ordering::Relaxed);
    let from_blocks = stats.from_blocks.load(Ordering::Relaxed);
    assert_eq!(
        from_archives + from_blocks,
        summary.blocks,
        "every block once"
    );
    assert!(
        from_archives > 0 && from_blocks > 0,
        "{from_archives} {from_blocks}"
    );

    let server = &servers.nodes[0].storage;
    let listed = key_blocks(&synced.storage).unwrap();
    let seqnos: Vec<u64> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["seqno"].as_u64().unwrap())
        .collect();
    assert_eq!(seqnos, vec![0, 10, 20, 30, 40, 50, 60]);
    assert_eq!(listed, key_blocks(server).unwrap());
    assert_eq!(
        chain_digest(&synced.storage).await.unwrap(),
        chain_digest(server).await.unwrap()
    );
    // The archives it committed are byte for byte the servers' (the downloads, adopted or built).
    synced.storage.archives().wait_for_archive_commit().await;
    let committed = synced.storage.archives().committed_archive_ids();
    assert!(committed.len() >= 5, "{committed:?}");
    for id in committed {
        let file = |s: &regolith_storage::Storage| {
            std::fs::read(regolith_storage::archive::archive_path(
                s.archives().dir(),
                id,
            ))
            .unwrap()
        };
        assert!(file(&synced.storage) == file(server), "archive {id}");
    }

    // The validator set in force is the one key block 60 installed (the broadcast targets' source).
    let (set, from) = regolith_node::trust::key_blocks::current_validator_set(&synced.storage)
        .await
        .unwrap();
    assert_eq!(from.map(|id| id.seqno), Some(60));
    assert_eq!(public_keys(&set), last_set_keys(&manifest));
    servers.shutdown().await;
}

/// A client walks the key blocks of a generated chain from its zerostate, each proof verified through the
/// one before it, and learns the set of the newest; a proof with one flipped byte is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_key_block_walk_verifies_every_rotation_from_the_zerostate() {
    use regolith_node::trust::key_blocks::KeyBlockChain;
    use regolith_testbed::fixture::{ChainServers, FreshNode};

    let dir = tempfile::tempdir().unwrap();
    let (chain, _, manifest) = rotating_chain(dir.path());
    let servers = ChainServers::start_chain(&chain, 2).await.unwrap();
    let fresh = FreshNode::start(&dir.path().join("fresh"), &chain.zerostate, &servers.nodes)
        .await
        .unwrap();
    let checker = regolith_node::trust::proofs::load_checker(&fresh.storage).unwrap();
    let zerostate = fresh
        .storage
        .node_state()
        .load_zerostate_id()
        .unwrap()
        .unwrap();
    let mut walk = KeyBlockChain::new(checker, zerostate);
    assert_eq!(walk.walk(&fresh.client, None).await.unwrap(), 6);
    let ids: Vec<String> = walk.blocks().iter().map(|k| k.id().to_string()).collect();
    let expected: Vec<String> = manifest["key_blocks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids, expected);
    let newest = walk.newest().unwrap();
    assert_eq!(
        public_keys(&newest.proof.key_block_validators().unwrap()),
        last_set_keys(&manifest)
    );
    // Nothing newer: a second walk adds nothing.
    assert_eq!(walk.walk(&fresh.client, None).await.unwrap(), 0);

    // Key block 10's proof with one byte flipped, as the next link after the zerostate, is refused.
    let checker = regolith_node::trust::proofs::load_checker(&fresh.storage).unwrap();
    let mut other = KeyBlockChain::new(checker, zerostate);
    let first = walk.blocks()[0].clone();
    let mut raw = first.raw.to_vec();
    let at = raw.len() - 40;
    raw[at] ^= 1;
    assert!(other.push(first.id(), raw.into()).is_err());
    assert!(other.blocks().is_empty());
    // Key block 20 cannot follow the zerostate: it is signed through key block 10.
    let second = walk.blocks()[1].clone();
    assert!(other.push(second.id(), second.raw.clone()).is_err());
    other.push(first.id(), first.raw.clone()).unwrap();
    other.push(second.id(), second.raw.clone()).unwrap();
    fresh.node.shutdown().await;
    servers.shutdown().await;
}

/// A 65-block chain with 2 shards and a key block every 10 mc blocks, a new validator set at every second
/// key block (20, 40, 60).
fn rotating_chain(
    dir: &std::path::Path,
) -> (
    regolith_testbed::fixture::ChainFiles,
    regolith_chain::ChainSummary,
    Value,
) {
    use regolith_cli::commands::chain::{generate, ChainShapeArgs, GenerateArgs};
    let out = dir.join("chain");
    let summary = generate(&GenerateArgs {
        out: out.clone(),
        base_zerostate: zerostate_path(),
        mc_blocks: 65,
        shape: ChainShapeArgs {
            shards: 2,
            messages: 4,
            message_bytes: 256,
            key_block_every: 10,
            validators: 5,
            rotate_every: 2,
            persistent_every: 2,
            accounts: 16,
            seed: 5,
        },
        mc_blocks_per_archive: 100,
        json: false,
    })
    .unwrap();
    assert_eq!((summary.key_blocks, summary.validator_sets), (6, 4));
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(out.join("chain.json")).unwrap()).unwrap();
    (
        regolith_testbed::fixture::ChainFiles::generated(&out).unwrap(),
        summary,
        manifest,
    )
}

fn public_keys(set: &tycho_types::models::ValidatorSet) -> Vec<String> {
    set.list
        .iter()
        .map(|v| hex::encode(v.public_key.0))
        .collect()
}

fn last_set_keys(manifest: &Value) -> Vec<String> {
    manifest["validator_sets"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()["public_keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap().to_string())
        .collect()
}

/// Cold boot on a chain with three persistent key blocks (20, 40, 60) and three rotations: a peer whose
/// state of the boot block has one flipped byte is refused and punished and nothing is stored; with an honest
/// peer beside it that ran block and archive GC (no genesis sync possible) the node boots from key block 60,
/// follows the tip to 65, and ends with the servers' states of the boot block and their queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_node_cold_boots_from_the_latest_persistent_state() {
    use regolith_formats::persistent_state::StatePart;
    use regolith_node::boot::cold_boot::cold_boot;
    use regolith_storage::StateKind;
    use regolith_testbed::fixture::{ChainServers, FreshNode};

    let dir = tempfile::tempdir().unwrap();
    let (chain, _, manifest) = rotating_chain(dir.path());
    // The liar starts in a network of its own, so that the node that meets only the liar cannot find the
    // honest server through the overlay; the fresh node later meets both.
    let mut liars = ChainServers::start_chain(&chain, 1).await.unwrap();
    let boot_id = regolith_formats::block_id::parse_block_id(
        manifest["key_blocks"][5]["id"].as_str().unwrap(),
    )
    .unwrap();
    assert_eq!(boot_id.seqno, 60);

    // The liar serves the shard state of key block 60 with one byte flipped (a valid zstd stream).
    let liar = &liars.nodes[0];
    let states = liar.storage.persistent_states();
    let record = states.get(&boot_id, StateKind::Shard).unwrap().unwrap();
    let path = states.file_path(&record, StatePart::Unsplit).unwrap();
    let mut raw = zstd::decode_all(std::fs::File::open(&path).unwrap()).unwrap();
    let at = raw.len() / 2;
    raw[at] ^= 0x01;
    let forged = zstd::bulk::compress(&raw, 3).unwrap();
    states.store(&boot_id, StateKind::Shard, &forged).unwrap();
    boot_from_the_liar_alone(dir.path(), &chain, liar, "failed its check").await;

    // The liar, and an honest server that ran block and archive GC up to the boot block: nobody can sync
    // from genesis any more.
    let mut servers = ChainServers::start_chain(&chain, 1).await.unwrap();
    servers.nodes.insert(0, liars.nodes.remove(0));
    let honest = &servers.nodes[1].storage;
    assert!(!honest
        .archives()
        .remove_outdated_archives(60)
        .unwrap()
        .is_empty());
    honest.remove_outdated_blocks(60).await.unwrap();
    let mc = |seqno| regolith_cli::block_ref::BlockRef::McSeqno(seqno);
    assert!(regolith_cli::commands::inspect::block(honest, &mc(35))
        .await
        .is_err());

    let fresh = FreshNode::start(&dir.path().join("fresh"), &chain.zerostate, &servers.nodes)
        .await
        .unwrap();
    let root = fresh.data.root.clone();
    let report = cold_boot(&fresh.storage, &fresh.queue, &fresh.client, &root)
        .await
        .unwrap()
        .expect("a persistent state is served");
    assert_eq!(report.block, boot_id);
    assert_eq!((report.key_blocks, report.states), (6, 6));
    let boot: Value =
        serde_json::from_slice(&std::fs::read(root.join("boot.json")).unwrap()).unwrap();
    assert_eq!(boot["complete"], true, "{boot}");
    let synced = fresh.sync_until(65).await.unwrap();
    let blocks = synced.stats.from_archives.load(Ordering::Relaxed)
        + synced.stats.from_blocks.load(Ordering::Relaxed);
    assert_eq!(
        blocks, 15,
        "mc 61..=65 with their shard blocks, nothing before the boot block"
    );

    let booted = &synced.storage;
    assert_eq!(
        booted
            .node_state()
            .load_last_mc_block_id()
            .unwrap()
            .map(|id| id.to_string()),
        manifest["last_mc_block"].as_str().map(String::from)
    );
    let served = |storage: &regolith_storage::Storage| -> Vec<(String, String)> {
        let mut list: Vec<(String, String)> = storage
            .persistent_states()
            .list()
            .unwrap()
            .into_iter()
            .filter(|r| r.block.seqno > 0)
            .map(|r| (r.block.to_string(), format!("{:?}", r.kind)))
            .collect();
        list.sort();
        list
    };
    let boot_states = served(booted);
    assert_eq!(boot_states.len(), 6, "{boot_states:?}");
    let honest_states = served(honest);
    for state in &boot_states {
        assert!(
            honest_states.contains(state),
            "{state:?} is not served by the servers"
        );
    }
    // Every key block from the zerostate on (proofs only before the boot block), as the server lists them.
    let listed = regolith_cli::commands::inspect::key_blocks(booted).unwrap();
    let seqnos: Vec<u64> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["seqno"].as_u64().unwrap())
        .collect();
    assert_eq!(seqnos, vec![0, 10, 20, 30, 40, 50, 60]);
    assert_eq!(
        listed,
        regolith_cli::commands::inspect::key_blocks(honest).unwrap()
    );
    for seqno in [10, 20, 30, 40, 50] {
        let handle = booted
            .handles()
            .load_key_block_handle(seqno)
            .unwrap()
            .unwrap();
        assert!(
            handle.has_proof() && !handle.has_data(),
            "key block {seqno}"
        );
    }
    // Archives from the boot block on: the same as the server's (the one after key block 60, still open).
    let after_boot = |storage| -> Vec<Value> {
        regolith_cli::commands::inspect::archives(storage)
            .unwrap()
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| a["id"].as_u64().unwrap() > 60)
            .cloned()
            .collect()
    };
    let archives = after_boot(booted);
    assert_eq!(archives.len(), 1, "{archives:?}");
    assert_eq!(archives, after_boot(honest));
    for seqno in 60..=65u32 {
        let of = |storage| async move {
            regolith_cli::commands::inspect::block(storage, &mc(seqno))
                .await
                .unwrap()["id"]
                .clone()
        };
        assert_eq!(of(booted).await, of(honest).await, "mc {seqno}");
    }
    drop(synced);

    // The queue: the same last commit and pointers as a node that imported the whole chain, and the same
    // diffs from the boot block's tail on.
    // `servers` holds the honest server's data dir only (the liar's stays with `liars`).
    let theirs = regolith_cli::commands::inspect::queue(servers.roots()[0], false).unwrap();
    servers.shutdown().await;
    let ours = regolith_cli::commands::inspect::queue(&root, false).unwrap();
    assert_eq!(
        ours["last_committed_mc_block"],
        theirs["last_committed_mc_block"]
    );
    assert_eq!(ours["commit_pointers"], theirs["commit_pointers"]);
    for shard in ours["shards"].as_array().unwrap() {
        let name = &shard["shard"];
        let their_diffs = theirs["shards"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| &s["shard"] == name)
            .unwrap()["diffs"]
            .as_array()
            .unwrap()
            .clone();
        for diff in shard["diffs"].as_array().unwrap() {
            let same = their_diffs.iter().find(|d| d["seqno"] == diff["seqno"]);
            assert_eq!(
                same.map(|d| &d["hash"]),
                Some(&diff["hash"]),
                "{name} {diff}"
            );
        }
    }
}

/// Cold boot from shard states split into parts (rpc.md §7.7): a peer whose part has one flipped byte is
/// refused, named and punished, nothing stored; from an honest peer the root and every part are checked
/// against the block (the root's hash is the block's new state, each part fills one absent cell) and stored
/// as a split state, the node serving the same parts onward.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cold_boot_verifies_and_keeps_split_shard_states() {
    use regolith_formats::persistent_state::StatePart;
    use regolith_formats::split_state::{
        check_split_state, encode_part, encode_root, split_accounts,
    };
    use regolith_node::boot::cold_boot::cold_boot;
    use regolith_storage::StateKind;
    use regolith_testbed::fixture::{ChainServers, FreshNode};

    let dir = tempfile::tempdir().unwrap();
    let (chain, _, manifest) = rotating_chain(dir.path());
    // Two separate networks, so that the node that meets only the liar cannot find the honest server.
    let liars = ChainServers::start_chain(&chain, 1).await.unwrap();
    let servers = ChainServers::start_chain(&chain, 1).await.unwrap();
    let boot_seqno = manifest["key_blocks"][5]["seqno"].as_u64().unwrap() as u32;
    assert_eq!(boot_seqno, 60);

    // Both serve the shard states of the boot block's shard blocks split 2 bits below the shard; the liar
    // with one byte flipped in the last part of each.
    let mut split_blocks = Vec::new();
    for (i, server) in [&liars.nodes[0], &servers.nodes[0]].into_iter().enumerate() {
        let states = server.storage.persistent_states();
        for record in states.list().unwrap() {
            let handle = server
                .storage
                .handles()
                .load_handle(&record.block)
                .unwrap()
                .unwrap();
            if record.kind != StateKind::Shard
                || record.block.is_masterchain()
                || handle.ref_by_mc_seqno() != boot_seqno
            {
                continue;
            }
            let path = states.file_path(&record, StatePart::Unsplit).unwrap();
            let raw = zstd::decode_all(std::fs::File::open(&path).unwrap()).unwrap();
            let state = tycho_types::boc::Boc::decode(&raw).unwrap();
            let parts = split_accounts(&state, &record.block.shard, 2).unwrap();
            assert!(
                !parts.is_empty(),
                "the shard state of {} has accounts",
                record.block
            );
            let root = zstd::bulk::compress(&encode_root(&state, &parts).unwrap(), 3).unwrap();
            let mut files: Vec<(u64, Vec<u8>)> =
                parts.iter().map(|p| (p.prefix, encode_part(p))).collect();
            if i == 0 {
                let last = files.last_mut().unwrap();
                let at = last.1.len() - 3;
                last.1[at] ^= 0x01;
            }
            let files: Vec<(u64, Vec<u8>)> = files
                .into_iter()
                .map(|(p, b)| (p, zstd::bulk::compress(&b, 3).unwrap()))
                .collect();
            let refs: Vec<(u64, &[u8])> = files.iter().map(|(p, b)| (*p, b.as_slice())).collect();
            states.store_split(&record.block, 2, &root, &refs).unwrap();
            if i == 1 {
                split_blocks.push((
                    record.block,
                    parts.iter().map(|p| p.prefix).collect::<Vec<_>>(),
                ));
            }
        }
    }
    assert_eq!(split_blocks.len(), 2, "two shards");

    boot_from_the_liar_alone(dir.path(), &chain, &liars.nodes[0], "split shard state").await;
    liars.shutdown().await;

    let fresh = FreshNode::start(&dir.path().join("fresh"), &chain.zerostate, &servers.nodes)
        .await
        .unwrap();
    let report = cold_boot(
        &fresh.storage,
        &fresh.queue,
        &fresh.client,
        &fresh.data.root,
    )
    .await
    .unwrap()
    .expect("the split states are served");
    assert_eq!(report.block.seqno, boot_seqno);
    let states = fresh.storage.persistent_states();
    for (block, prefixes) in &split_blocks {
        let record = states
            .get(block, StateKind::Shard)
            .unwrap()
            .expect("stored");
        assert_eq!(record.split_depth, 2);
        assert_eq!(
            &record.parts.iter().map(|p| p.prefix).collect::<Vec<_>>(),
            prefixes
        );
        // What it serves onward is the state of its block.
        let read = |part| {
            zstd::decode_all(std::fs::File::open(states.file_path(&record, part).unwrap()).unwrap())
                .unwrap()
        };
        let root = read(StatePart::SplitRoot);
        let parts: Vec<(u64, Vec<u8>)> = prefixes
            .iter()
            .map(|&p| (p, read(StatePart::SplitPart(p))))
            .collect();
        let parts: Vec<(u64, &[u8])> = parts.iter().map(|(p, b)| (*p, b.as_slice())).collect();
        let handle = fresh.storage.handles().load_handle(block).unwrap().unwrap();
        let parsed = fresh
            .storage
            .components()
            .load_block_data(&handle)
            .await
            .unwrap();
        let new_state = parsed.block.load_state_update().unwrap().new_hash;
        check_split_state(&root, &parts, &new_state).unwrap();
    }
    fresh.node.shutdown().await;
    servers.shutdown().await;
}

/// `regolith run` cold-boots a fresh data dir from a serving node; killed (abort, like a power cut) once all
/// is verified and before anything is stored, then after a block, after a state and after the last applied mc
/// block are stored, each next start boots from the same block again, and the last one reaches the tip with
/// the boot complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cold_boot_killed_at_every_step_resumes_the_same_boot() {
    use regolith_test_support::wait_for;
    use regolith_testbed::fixture::ChainServers;
    use std::process::{Command, Stdio};
    use std::time::Duration;

    let dir = tempfile::tempdir().unwrap();
    let (chain, _, manifest) = rotating_chain(dir.path());
    let servers = ChainServers::start_chain(&chain, 1).await.unwrap();
    let data = dir.path().join("node");
    init_following(&data, &chain.zerostate, &servers.nodes[0]);
    let boot_block = manifest["key_blocks"][5]["id"].clone();

    for (point, storing) in [
        ("cold-boot-verified:1", false),
        ("cold-boot-block-stored:2", true),
        ("cold-boot-state-stored:3", true),
        ("cold-boot-last-mc-stored:1", true),
    ] {
        let dir = data.clone();
        let at = point.to_string();
        let out = tokio::task::spawn_blocking(move || {
            Command::new(env!("CARGO_BIN_EXE_regolith"))
                .arg("--data")
                .arg(&dir)
                .arg("run")
                .env("RUST_LOG", "error")
                .env("REGOLITH_CRASH_AT", &at)
                .stdout(Stdio::null())
                .output()
                .unwrap()
        })
        .await
        .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains("crash point"),
            "{stderr}"
        );
        let boot = summary(&data)["boot"].clone();
        assert_eq!(boot["block"], boot_block, "{boot}");
        assert_eq!(boot["complete"], false, "{boot}");
        assert_eq!(boot["storing"], storing, "{point}: {boot}");
    }

    let child = run_process(&data, Stdio::null());
    let data_for_wait = data.clone();
    let reached = tokio::task::spawn_blocking(move || {
        wait_for(Duration::from_secs(240), Duration::from_millis(200), || {
            let summary = summary(&data_for_wait);
            if summary["last_applied_mc_block"] == manifest["last_mc_block"] {
                Ok(summary)
            } else {
                Err(format!("{}", summary["last_applied_mc_block"]))
            }
        })
    })
    .await
    .unwrap();
    assert_eq!(reached["boot"]["complete"], true, "{reached}");
    assert_eq!(reached["boot"]["block"], boot_block, "{reached}");
    assert_eq!(reached["boot"]["queue_states"], 3, "{reached}");
    stop_within(child, Duration::from_secs(60));
    servers.shutdown().await;
}

/// The broadcast targets follow the validator set of the newest applied key block, and a message posted to
/// the node's HTTP API reaches exactly those validators, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn posted_messages_reach_the_validators_of_the_newest_key_block() {
    use regolith_node::boot::cold_boot::cold_boot;
    use regolith_node::external_messages::ExternalRelay;
    use regolith_test_support::wait_for_async;
    use regolith_testbed::fixture::{ChainServers, FreshNode};
    use std::time::Duration;

    let dir = tempfile::tempdir().unwrap();
    let (_, _, manifest) = rotating_chain(dir.path());
    let chain_dir = dir.path().join("chain");
    let chain = regolith_testbed::fixture::ChainFiles::generated(&chain_dir).unwrap();
    let key = |set: usize, i: usize| validator_key(&chain_dir, set, i);
    let sets = manifest["validator_sets"].as_array().unwrap().len();
    // Two validators of the set key block 60 installed, and one of the set before it.
    let (servers, received) = ChainServers::start_as(
        &chain,
        &[key(sets - 1, 0), key(sets - 1, 1), key(sets - 2, 0)],
    )
    .await
    .unwrap();
    let peer = |i: usize| servers.nodes[i].network.peer_id();
    let fresh = FreshNode::start(&dir.path().join("fresh"), &chain.zerostate, &servers.nodes)
        .await
        .unwrap();
    let overlay = fresh.client.overlay_client().clone();
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(regolith_node::trust::key_blocks::track_validator_set(
        fresh.storage.clone(),
        overlay.clone(),
        stop_rx,
    ));
    let report = cold_boot(
        &fresh.storage,
        &fresh.queue,
        &fresh.client,
        &fresh.data.root,
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(report.block.seqno, 60);
    wait_for_async(
        Duration::from_secs(120),
        Duration::from_millis(200),
        async || {
            let targets = overlay.broadcast_targets();
            if targets.contains(&peer(0)) && targets.contains(&peer(1)) {
                Ok(targets)
            } else {
                Err(format!("targets {targets:?}"))
            }
        },
    )
    .await;
    assert!(
        !overlay.broadcast_targets().contains(&peer(2)),
        "a validator of the previous set is no target"
    );

    // The node's HTTP API as `regolith run` starts it: the account API with `POST /v1/messages` beside it.
    let relay = ExternalRelay::new();
    relay.connect(fresh.client.clone());
    let backend = regolith_node::account_api::NodeApi::new(
        fresh.storage.clone(),
        regolith_state::NewestStates::default(),
        std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)),
        relay.clone(),
        None,
    );
    let server = regolith_api::serve(
        regolith_api::ApiConfig {
            listen_addr: "127.0.0.1:0".parse().unwrap(),
            ..Default::default()
        },
        backend,
        regolith_node::account_api::messages_route(relay),
    )
    .await
    .unwrap();
    let address = server.local_addr();
    let message = regolith_test_support::external_message(7);
    let answer = post(address, &message).await;
    assert_eq!(answer["targets"], 2, "{answer}");
    assert_eq!(answer["duplicate"], false, "{answer}");
    for (i, got) in received.iter().enumerate().take(2) {
        wait_for_async(
            Duration::from_secs(60),
            Duration::from_millis(100),
            async || {
                if got.0.lock().iter().any(|m| m[..] == message[..]) {
                    Ok(())
                } else {
                    Err(format!("validator {i} has not received it"))
                }
            },
        )
        .await;
    }
    let again = post(address, &message).await;
    assert_eq!(
        (again["duplicate"].clone(), again["targets"].clone()),
        (Value::Bool(true), 0.into())
    );
    assert_eq!(again["hash"], answer["hash"]);
    assert!(
        received[2].0.lock().is_empty(),
        "the previous set's validator got nothing"
    );
    let bad = post(address, b"not a message").await;
    assert!(bad["error"].is_string(), "{bad}");

    // The account API's sendMessage goes the same way: to the validators of the newest key block.
    let other = regolith_test_support::external_message(8);
    let sent = send_message_jrpc(address, &other).await;
    assert_eq!(sent["result"], Value::Null, "{sent}");
    assert!(sent.get("error").is_none(), "{sent}");
    for (i, got) in received.iter().enumerate().take(2) {
        wait_for_async(
            Duration::from_secs(60),
            Duration::from_millis(100),
            async || {
                if got.0.lock().iter().any(|m| m[..] == other[..]) {
                    Ok(())
                } else {
                    Err(format!(
                        "validator {i} has not received the sendMessage one"
                    ))
                }
            },
        )
        .await;
    }
    server.shutdown().await;

    let _ = stop.send(true);
    fresh.node.shutdown().await;
    servers.shutdown().await;
}

/// POSTs `body` (in base64, the text form the API takes) to `/v1/messages` and returns the JSON answer.
async fn post(address: std::net::SocketAddr, body: &[u8]) -> Value {
    use base64::Engine;
    let text = base64::engine::general_purpose::STANDARD.encode(body);
    let request = format!(
        "POST /v1/messages HTTP/1.1\r\nHost: {address}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
        text.len()
    );
    let answer = tokio::task::spawn_blocking(move || {
        regolith_test_support::http_request(address.port(), &request)
    })
    .await
    .unwrap()
    .expect("the API answers");
    let (_, json) = answer.split_once("\r\n\r\n").unwrap();
    serde_json::from_str(json).unwrap()
}

/// Calls the account API's JSON-RPC `sendMessage` with `message` over HTTP/1.1 and returns the answer.
async fn send_message_jrpc(address: std::net::SocketAddr, message: &[u8]) -> Value {
    use base64::Engine;
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": 1,
        "method": "sendMessage",
        "params": {"message": base64::engine::general_purpose::STANDARD.encode(message)},
    })
    .to_string();
    let request = format!(
        "POST / HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let answer = tokio::task::spawn_blocking(move || {
        regolith_test_support::http_request(address.port(), &request)
    })
    .await
    .unwrap()
    .expect("the API answers");
    let (_, json) = answer.split_once("\r\n\r\n").unwrap();
    serde_json::from_str(json).unwrap()
}

/// `regolith p2p send-message` learns the newest key block through the verified chain of key-block proofs
/// and sends to its validator set: a validator of that set gets the message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p2p_send_message_targets_the_newest_key_blocks_validators() {
    use regolith_test_support::wait_for_async;
    use regolith_testbed::fixture::ChainServers;
    use std::time::Duration;

    let dir = tempfile::tempdir().unwrap();
    let (chain, _, manifest) = rotating_chain(dir.path());
    let last = manifest["validator_sets"].as_array().unwrap().len() - 1;
    let key = validator_key(&dir.path().join("chain"), last, 0);
    let (servers, received) = ChainServers::start_as(&chain, &[key]).await.unwrap();
    let data = dir.path().join("client");
    init_following(&data, &chain.zerostate, &servers.nodes[0]);
    let message = regolith_test_support::external_message(11);
    let file = dir.path().join("message.boc");
    std::fs::write(&file, &message).unwrap();

    let args_data = data.clone();
    let out = tokio::task::spawn_blocking(move || {
        ok(
            &args_data,
            &[
                "p2p",
                "--json",
                "--timeout",
                "60s",
                "send-message",
                file.to_str().unwrap(),
            ],
        )
    })
    .await
    .unwrap();
    let answer: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        answer["validator_set_from"], manifest["key_blocks"][5]["id"],
        "{answer}"
    );
    assert_eq!(answer["validators"], 5, "{answer}");
    assert_eq!(answer["delivered"], 1, "{answer}");
    wait_for_async(
        Duration::from_secs(60),
        Duration::from_millis(100),
        async || {
            if received[0].0.lock().iter().any(|m| m[..] == message[..]) {
                Ok(())
            } else {
                Err("the validator has not received it".to_string())
            }
        },
    )
    .await;
    servers.shutdown().await;
}

/// The secret key of validator `i` of set `set` of the chain in `chain_dir` (its `validators.json`).
fn validator_key(chain_dir: &std::path::Path, set: usize, i: usize) -> [u8; 32] {
    let secrets: Value =
        serde_json::from_slice(&std::fs::read(chain_dir.join("validators.json")).unwrap()).unwrap();
    hex::decode(
        secrets["validator_sets"][set]["secret_keys"][i]
            .as_str()
            .unwrap(),
    )
    .unwrap()
    .try_into()
    .unwrap()
}

/// `init` of `data` from `zerostate`, with any free port, no metrics, quick discovery and `server` as its only
/// bootstrap peer.
fn init_following(
    data: &std::path::Path,
    zerostate: &std::path::Path,
    server: &regolith_node::run::Node,
) {
    ok(data, &["init", "--zerostate", zerostate.to_str().unwrap()]);
    let (overlay, dht) = regolith_rpc::network::quick_discovery();
    edit_node_config(data, |config| {
        config["listen_address"] = "127.0.0.1:0".into();
        config["metrics_address"] = Value::Null;
        config["overlay"] = serde_json::to_value(&overlay).unwrap();
        config["dht"] = serde_json::to_value(&dht).unwrap();
    });
    let path = data.join("global.json");
    let mut global: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    global["bootstrap_peers"] = serde_json::json!([server
        .network
        .signed_peer_info(std::time::Duration::from_secs(3600))]);
    std::fs::write(&path, serde_json::to_string_pretty(&global).unwrap()).unwrap();
}

/// A fresh node whose only neighbour is `liar` fails its cold boot with an error naming `what` and the liar,
/// punishes it, and stores nothing beyond the zerostate.
async fn boot_from_the_liar_alone(
    dir: &std::path::Path,
    chain: &regolith_testbed::fixture::ChainFiles,
    liar: &regolith_node::run::Node,
    what: &str,
) {
    let alone = regolith_testbed::fixture::FreshNode::start(
        &dir.join("alone"),
        &chain.zerostate,
        std::slice::from_ref(liar),
    )
    .await
    .unwrap();
    let error = regolith_node::boot::cold_boot::cold_boot(
        &alone.storage,
        &alone.queue,
        &alone.client,
        &alone.data.root,
    )
    .await
    .expect_err("the forged state is refused");
    let liar_id = liar.network.peer_id();
    let text = format!("{error:#}");
    assert!(
        text.contains(what) && text.contains(&liar_id.to_string()),
        "{text}"
    );
    assert!(
        alone
            .client
            .overlay_client()
            .neighbours()
            .find(&liar_id)
            .is_none_or(|n| n.was_malicious()),
        "the liar is punished"
    );
    let last = alone.storage.node_state().load_last_mc_block_id().unwrap();
    assert_eq!(last.unwrap().seqno, 0);
    let stored = alone.storage.persistent_states().list().unwrap();
    assert!(stored.iter().all(|r| r.block.seqno == 0), "{stored:?}");
    alone.node.shutdown().await;
}
