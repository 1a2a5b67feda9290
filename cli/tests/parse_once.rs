//! The apply path parses each block once (issue #20): an import of the fixture archive, a sync block by
//! block and a sync from the downloaded archive each decode every block BOC they apply exactly once, and
//! serving those blocks decodes none (`regolith_formats::block_parses` counts every decode in the process);
//! a downloaded archive is framed once, as it streams (`regolith_formats::archive::bytes_framed`).
//! This file holds one test so that the process's count is this test's alone.

use regolith_test_support::{archive_1_path, fixtures, zerostate_path};
use std::sync::atomic::Ordering;

use regolith_formats::archive::{bytes_framed, ArchiveEntryType, ArchiveReader};
use regolith_formats::block_parses;
use regolith_testbed::fixture::{sync_fresh_node, ChainServers};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_applied_block_is_parsed_once() {
    let blocks_in_archive =
        ArchiveReader::new_compressed(std::fs::File::open(archive_1_path()).unwrap())
            .unwrap()
            .map(Result::unwrap)
            .filter(|e| e.ty == ArchiveEntryType::Block)
            .count() as u64;
    assert!(blocks_in_archive > 100);
    let archive_len = zstd::decode_all(std::fs::File::open(archive_1_path()).unwrap())
        .unwrap()
        .len() as u64;
    assert_eq!(block_parses(), 0);

    // Import: each server imports archive 1 through the pipeline.
    let open = ChainServers::start(&fixtures(), 1, false).await.unwrap();
    assert_eq!(
        block_parses(),
        blocks_in_archive,
        "the import parsed a block more than once"
    );

    // Near the tip: getNextBlockFull and getBlockFull, each block checked once by the client's node.
    let dir = tempfile::tempdir().unwrap();
    let before = block_parses();
    let synced = sync_fresh_node(dir.path(), &zerostate_path(), &open.nodes, 100)
        .await
        .unwrap();
    let applied = synced.stats.from_blocks.load(Ordering::Relaxed);
    assert!(applied > 100, "{applied} blocks");
    assert_eq!(synced.stats.from_archives.load(Ordering::Relaxed), 0);
    assert_eq!(
        block_parses() - before,
        applied,
        "the block-by-block sync (or serving it) parsed a block more than once"
    );
    open.shutdown().await;

    // Far behind: the archive is downloaded, framed and indexed once as it streams, and applied from that
    // index.
    let archived = ChainServers::start(&fixtures(), 1, true).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let before = block_parses();
    let framed_before = bytes_framed();
    let synced = sync_fresh_node(dir.path(), &zerostate_path(), &archived.nodes, 100)
        .await
        .unwrap();
    assert_eq!(
        bytes_framed() - framed_before,
        archive_len,
        "the downloaded archive was framed more than once"
    );
    let applied = synced.stats.from_archives.load(Ordering::Relaxed);
    assert!(applied > 100, "{applied} blocks");
    assert_eq!(synced.stats.from_blocks.load(Ordering::Relaxed), 0);
    assert_eq!(
        block_parses() - before,
        applied,
        "the archive sync (or serving it) parsed a block more than once"
    );
    archived.shutdown().await;
}
