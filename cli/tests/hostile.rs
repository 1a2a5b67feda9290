//! A dishonest peer can neither crash, stall, corrupt nor eclipse the node (issue #18, point 10). Each attack
//! is served by the project's own service behind a forging layer (`regolith_testbed::forger`) over real
//! QUIC on loopback; the node under attack is a `regolith run` child process, so its peak RSS is its own.
//!
//! With the forger as its only peer, the node stays up, stores nothing forged and no incomplete group, reaches
//! the tip through the honest methods the forger still answers (or stays at the last good block when every
//! answer past it is forged, having dropped the forger), in bounded memory. With an honest peer beside it,
//! it reaches the tip with the honest chain and queue, a forger of data ends dropped, and the honest peer's
//! score is not lowered.

mod common;

use regolith_test_support::fixtures;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use regolith_storage::{Storage, StorageConfig};
use regolith_testbed::forger::Attack;
use regolith_testbed::hostile_sync::{run_victim, ForgingPeer, HostileRun};

const PEAK_RSS_MIB: f64 = 512.0;
const DEADLINE: Duration = Duration::from_secs(300);

fn exe() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_regolith"))
}

/// Every stored block of a storage: its id → (ref-by mc seqno, BLAKE3 of data, proof and diff).
async fn stored_blocks(storage: &Storage) -> BTreeMap<String, (u32, [String; 3])> {
    let ids: Vec<_> = storage
        .handles()
        .iter_block_ids_from(regolith_formats::BlockKey([0; 48]))
        .map(|id| id.unwrap())
        .collect();
    let mut out = BTreeMap::new();
    for id in ids {
        let handle = storage.handles().load_handle(&id).unwrap().unwrap();
        if id.seqno == 0 || !handle.has_data() {
            continue;
        }
        let c = storage.components();
        let hash = |raw: Vec<u8>| blake3::hash(&raw).to_string();
        out.insert(
            id.to_string(),
            (
                handle.ref_by_mc_seqno(),
                [
                    hash(c.load_block_data_raw(&handle).await.unwrap()),
                    hash(c.load_block_proof_raw(&handle).await.unwrap()),
                    hash(c.load_queue_diff_raw(&handle).await.unwrap()),
                ],
            ),
        );
    }
    out
}

/// The node's data dir holds only honest blocks, none of a group beyond its last applied mc block, and, when
/// `complete`, every block of the honest chain.
async fn assert_honest_prefix(run: &HostileRun, honest: &ForgingPeer, complete: bool) {
    let storage = Storage::open_read_only(StorageConfig::new(&run.data)).unwrap();
    let last = storage
        .node_state()
        .load_last_mc_block_id()
        .unwrap()
        .unwrap();
    assert_eq!(last.seqno, run.reached, "{run:?}");
    let ours = stored_blocks(&storage).await;
    let theirs: BTreeMap<_, _> = stored_blocks(&honest.node.storage)
        .await
        .into_iter()
        // The serving side's placeholder that commits its archive is not part of the chain.
        .filter(|(_, (ref_by, _))| *ref_by <= 100)
        .collect();
    for (id, (ref_by, parts)) in &ours {
        assert!(
            *ref_by <= last.seqno,
            "{id} belongs to mc block {ref_by}, beyond the last applied {}: {run:?}",
            last.seqno
        );
        assert_eq!(
            theirs.get(id).map(|t| &t.1),
            Some(parts),
            "{id} is not honest"
        );
    }
    if complete {
        assert_eq!(ours.len(), theirs.len(), "every honest block is stored");
    }
}

async fn attack(attack: Attack, ip: u8) {
    let fixtures = fixtures();
    let forger = ForgingPeer::start(&fixtures, [127, 0, 0, ip], attack)
        .await
        .unwrap();
    let honest = ForgingPeer::start(&fixtures, [127, 0, 0, ip + 1], Attack::None)
        .await
        .unwrap();

    // The forger alone.
    let dir = tempfile::tempdir().unwrap();
    let alone = run_victim(
        &exe(),
        &fixtures,
        dir.path(),
        attack,
        &forger,
        None,
        forger.reachable_alone,
        DEADLINE,
    )
    .await
    .unwrap();
    // It stops at the last good block, or, where the forger still answers honestly by another method once
    // it is taken back, goes on to the tip that way (an incomplete archive, then block by block).
    assert!(
        alone.reached == forger.reachable_alone
            || (attack == Attack::ArchiveWithoutShardBlock && alone.reached == 100),
        "{alone:?}"
    );
    assert!(alone.forged > 0, "the forger forged: {alone:?}");
    assert!(alone.peak_rss_mib < PEAK_RSS_MIB, "{alone:?}");
    assert_honest_prefix(&alone, &honest, alone.reached == 100).await;
    if attack == Attack::ArchiveWithoutShardBlock {
        assert!(
            alone
                .failures
                .iter()
                .any(|(r, n)| r == "invalid_archive" && *n >= 1.0),
            "the incomplete archive was refused: {alone:?}"
        );
    }
    if attack.forges_data() && alone.reached < 100 {
        assert!(
            alone.forger_score.is_none() && alone.forger_banned,
            "a forger of data is dropped and banned: {alone:?}"
        );
    }
    // Shard ids come only from verified mc blocks: every shard block asked for is one the node applied,
    // and no invented id was ever asked for.
    let applied =
        stored_blocks(&Storage::open_read_only(StorageConfig::new(&alone.data)).unwrap()).await;
    for id in &alone.blocks_asked {
        assert!(
            applied.contains_key(&id.to_string()),
            "{id} was asked for but is not applied: {alone:?}"
        );
    }
    let invented = forger.log.invented.lock().clone();
    assert!(!alone.blocks_asked.iter().any(|id| invented.contains(id)));
    if attack == Attack::StaleArchive {
        // At the tip, the stale archive is downloaded again at most once per back-off, not in a loop.
        assert!(
            alone.forger_archive_chunks <= 3,
            "stale archives downloaded {} times: {alone:?}",
            alone.forger_archive_chunks
        );
    }

    // The forger and an honest peer.
    let dir = tempfile::tempdir().unwrap();
    let both = run_victim(
        &exe(),
        &fixtures,
        dir.path(),
        attack,
        &forger,
        Some(&honest),
        100,
        DEADLINE,
    )
    .await
    .unwrap();
    assert_eq!(both.reached, 100, "{both:?}");
    assert!(both.peak_rss_mib < PEAK_RSS_MIB, "{both:?}");
    assert_honest_prefix(&both, &honest, true).await;
    assert!(
        both.honest_score.is_some_and(|s| s >= 64.0),
        "the honest peer's score is not lowered: {both:?}"
    );
    assert!(
        !both.honest_banned,
        "the honest peer is never banned: {both:?}"
    );
    if attack.forges_data() && both.forged > 0 {
        assert!(
            both.forger_score.is_none() && both.forger_banned,
            "a forger of data ends dropped and banned: {both:?}"
        );
    }
    let queue = |data: &Path| common::beyond_gc(&common::queue_view(data));
    assert_eq!(
        queue(&both.data),
        queue(&honest.node.storage.config().root_dir),
        "the queue equals the honest node's"
    );
    forger.node.shutdown().await;
    honest.node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zstd_bomb_as_block_data() {
    attack(Attack::ZstdBomb, 70).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_archive_of_one_tebibyte() {
    attack(Attack::HugeArchive, 72).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunk_size_of_one_byte() {
    attack(Attack::TinyChunks, 74).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_archive() {
    attack(Attack::EmptyArchive, 76).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_archive() {
    attack(Attack::StaleArchive, 78).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_archive_without_one_shard_block() {
    attack(Attack::ArchiveWithoutShardBlock, 80).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mc_block_with_invented_top_shard_ids() {
    attack(Attack::InventedTopShards, 82).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mc_block_with_one_bad_signature() {
    attack(Attack::BadSignature, 84).await;
}
