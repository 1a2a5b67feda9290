//! storage.md §12 scenarios 25–33: archives.

mod common;

use common::*;
use rand::RngCore;
use regolith_formats::archive::{ArchiveEntryType, ArchiveReader};
use regolith_formats::BlockId;
use regolith_storage::archive::{archive_path, EVENT_COMMITTED, EVENT_STARTED, EVENT_TO_COMMIT};
use regolith_storage::tables::{ArchiveBlockIds, ArchiveEventKey, ArchiveEvents, SeqnoKey};
use regolith_storage::{
    ArchiveId, ArchiveInfo, NewBlockMeta, Storage, StorageError, ARCHIVE_CHUNK_SIZE,
};
use regolith_test_support::{archive_1_decompressed, fixture_bytes};

fn has_event(s: &Storage, archive_id: u32, event: u32) -> bool {
    s.db()
        .contains::<ArchiveEvents>(&ArchiveEventKey { archive_id, event })
        .unwrap()
}

fn mc_handle(s: &Storage, seqno: u32, key: bool) -> regolith_storage::BlockHandle {
    s.handles()
        .create_or_load_handle(
            &mc_id(seqno),
            NewBlockMeta {
                is_key_block: key,
                gen_utime: seqno,
                ref_by_mc_seqno: seqno,
            },
        )
        .unwrap()
        .0
}

fn decompressed_file(s: &Storage, id: u32) -> Vec<u8> {
    zstd::stream::decode_all(std::fs::File::open(archive_path(s.archives().dir(), id)).unwrap())
        .unwrap()
}

fn no_tmp_files(s: &Storage) -> bool {
    std::fs::read_dir(s.archives().dir())
        .unwrap()
        .all(|e| !e.unwrap().file_name().to_string_lossy().ends_with(".tmp"))
}

async fn ingest_and_commit(s: &Storage) {
    ingest_archive_1(s).await;
    let h = mc_handle(s, 101, false);
    s.archives().move_into_archive(&h, false).unwrap();
    s.archives().wait_for_archive_commit().await;
}

#[tokio::test]
async fn s25_commit_matches_reference_bytes() {
    let t = TempStorage::new();
    let s = t.s();
    ingest_and_commit(s).await;
    let bytes = decompressed_file(s, 1);
    assert_eq!(bytes.len(), 698_296);
    assert!(
        bytes == archive_1_decompressed(),
        "decompressed archive equals the reference"
    );
    assert_eq!(ArchiveReader::new(&bytes[..]).count(), 321);
    assert!(s
        .db()
        .get::<ArchiveBlockIds>(&SeqnoKey(1))
        .unwrap()
        .is_none());
    assert!(has_event(s, 1, EVENT_COMMITTED));
    assert!(has_event(s, 101, EVENT_STARTED));
    assert!(!has_event(s, 101, EVENT_COMMITTED));
    assert!(no_tmp_files(s));
}

#[tokio::test]
async fn s26_archive_ids_and_info() {
    let t = TempStorage::new();
    let s = t.s();
    ingest_and_commit(s).await;
    let a = s.archives();
    assert_eq!(a.get_archive_id(1), ArchiveId::Found(1));
    assert_eq!(a.get_archive_id(100), ArchiveId::Found(1));
    assert_eq!(a.get_archive_id(0), ArchiveId::NotFound);
    assert_eq!(a.get_archive_id(101), ArchiveId::TooNew);
    let size = a.get_archive_size(1).unwrap().unwrap();
    assert_eq!(
        a.archive_info(50, 100).unwrap(),
        ArchiveInfo::Found {
            id: 1,
            size,
            chunk_size: 1 << 20
        }
    );
    assert_eq!(a.archive_info(101, 100).unwrap(), ArchiveInfo::TooNew);
    assert_eq!(a.archive_info(0, 100).unwrap(), ArchiveInfo::NotFound);
}

#[tokio::test]
async fn s27_chunks() {
    let t = TempStorage::new();
    let s = t.s();
    ingest_and_commit(s).await;
    let a = s.archives();
    let file = std::fs::read(archive_path(a.dir(), 1)).unwrap();
    assert!(file.len() < 1 << 20);
    assert_eq!(a.get_archive_chunk(1, 0).unwrap(), file);
    assert!(a
        .get_archive_chunk(1, ARCHIVE_CHUNK_SIZE)
        .unwrap()
        .is_empty());
    assert!(matches!(
        a.get_archive_chunk(1, 1),
        Err(StorageError::InvalidOffset(1))
    ));
    assert!(matches!(
        a.get_archive_chunk(2, 0),
        Err(StorageError::ArchiveNotFound(2))
    ));
    assert!(matches!(
        a.get_archive_chunk(101, 0),
        Err(StorageError::ArchiveNotFound(101))
    ));

    // A synthetic archive over 3 MiB of incompressible data.
    let t = TempStorage::new();
    let s = t.s();
    let mut rng = rand::thread_rng();
    for seqno in 1..=4 {
        let h = mc_handle(s, seqno, false);
        for ty in ArchiveEntryType::ALL {
            let mut data = vec![0u8; 900 << 10];
            rng.fill_bytes(&mut data);
            s.components()
                .store_raw_component_for_tests(&h, ty, &data)
                .unwrap();
        }
        s.archives().move_into_archive(&h, false).unwrap();
    }
    s.archives()
        .move_into_archive(&mc_handle(s, 101, false), false)
        .unwrap();
    s.archives().wait_for_archive_commit().await;
    let file = std::fs::read(archive_path(s.archives().dir(), 1)).unwrap();
    assert!(file.len() > 3 << 20);
    let mut joined = Vec::new();
    let mut offset = 0;
    loop {
        let chunk = s.archives().get_archive_chunk(1, offset).unwrap();
        offset += chunk.len() as u64;
        joined.extend_from_slice(&chunk);
        if (chunk.len() as u64) < ARCHIVE_CHUNK_SIZE {
            break;
        }
    }
    assert_eq!(
        joined.len() as u64 / ARCHIVE_CHUNK_SIZE,
        file.len() as u64 / ARCHIVE_CHUNK_SIZE
    );
    assert!(joined == file);
}

#[tokio::test]
async fn s29_out_of_order_moves() {
    let t = TempStorage::new();
    let s = t.s();
    let blocks: Vec<_> = archive_1_blocks()
        .into_iter()
        .filter(|b| b.id.is_masterchain() && b.id.seqno <= 12)
        .collect();
    let mut handles = std::collections::HashMap::new();
    for b in &blocks {
        handles.insert(b.id.seqno, store_parts(s, b).await);
    }
    let mut order = vec![1u32];
    order.extend((2..=9).rev());
    for seqno in &order {
        s.archives()
            .move_into_archive(&handles[seqno], false)
            .unwrap();
    }
    s.archives().move_into_archive(&handles[&11], true).unwrap();
    s.archives()
        .move_into_archive(&handles[&12], false)
        .unwrap();
    s.archives().wait_for_archive_commit().await;

    let bytes = decompressed_file(s, 1);
    let entries: Vec<_> = ArchiveReader::new(&bytes[..])
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(entries.len(), 30);
    let block_order: Vec<u32> = entries
        .iter()
        .filter(|e| e.ty == ArchiveEntryType::Block)
        .map(|e| e.block_id.seqno)
        .collect();
    order.push(11);
    assert_eq!(block_order, order);
    assert_eq!(s.archives().list_archive_ids(), vec![1, 12]);
    assert_eq!(s.archives().pending_block_ids(12).unwrap().len(), 1);
}

fn pending_seqnos(s: &Storage, id: u32) -> Vec<u32> {
    s.archives()
        .pending_block_ids(id)
        .unwrap()
        .iter()
        .map(|b| b.seqno)
        .collect()
}

#[tokio::test]
async fn s30_key_blocks_end_archives() {
    let mut t = TempStorage::new();
    for seqno in 1..=50 {
        let h = mc_handle(t.s(), seqno, seqno == 50);
        t.s().archives().move_into_archive(&h, false).unwrap();
    }
    let s = t.reopen();
    s.archives()
        .move_into_archive(&mc_handle(s, 51, false), false)
        .unwrap();
    assert_eq!(s.archives().list_archive_ids(), vec![1, 51]);
    for seqno in 52..=151 {
        s.archives()
            .move_into_archive(&mc_handle(s, seqno, false), false)
            .unwrap();
    }
    assert_eq!(s.archives().list_archive_ids(), vec![1, 51, 151]);
    assert_eq!(pending_seqnos(s, 1), (1..=50).collect::<Vec<_>>());

    let t = TempStorage::new();
    let s = t.s();
    for seqno in 1..=62 {
        let h = mc_handle(s, seqno, seqno == 60 || seqno == 61);
        s.archives().move_into_archive(&h, false).unwrap();
    }
    s.archives().wait_for_archive_commit().await;
    assert_eq!(s.archives().list_archive_ids(), vec![1, 61, 62]);
    assert_eq!(pending_seqnos(s, 1), (1..=60).collect::<Vec<_>>());
    assert_eq!(pending_seqnos(s, 61), vec![61]);
    assert_eq!(pending_seqnos(s, 62), vec![62]);
}

#[tokio::test]
async fn s31_interrupted_commit_is_redone_at_start() {
    let mut t = TempStorage::new();
    {
        let s = t.s();
        ingest_archive_1(s).await;
        s.db().fail_points.archive_commit_after_tmp.arm();
        s.archives()
            .move_into_archive(&mc_handle(s, 101, false), false)
            .unwrap();
        s.archives().wait_for_archive_commit().await;
        assert!(!archive_path(s.archives().dir(), 1).exists());
        assert!(!no_tmp_files(s), "the temp file was left behind");
    }
    let s = t.reopen();
    let stats = s.open_stats().archives;
    assert_eq!(stats.archives_recommitted, 1);
    assert_eq!(stats.tmp_files_removed, 1);
    assert!(no_tmp_files(s));
    assert!(decompressed_file(s, 1) == archive_1_decompressed());
    assert!(has_event(s, 1, EVENT_COMMITTED));
}

#[tokio::test]
async fn s32_missing_part_fails_commit() {
    let t = TempStorage::new();
    let s = t.s();
    let blocks: Vec<_> = archive_1_blocks()
        .into_iter()
        .filter(|b| b.id.is_masterchain() && b.id.seqno <= 3)
        .collect();
    let mut missing: Option<BlockId> = None;
    for b in &blocks {
        let h = if b.id.seqno == 2 {
            missing = Some(b.id);
            let h = s
                .components()
                .store_block_data(&b.id, bytes::Bytes::from(b.data.clone()), b.meta())
                .await
                .unwrap()
                .handle;
            s.components()
                .store_queue_diff(&b.id, bytes::Bytes::from(b.queue_diff.clone()), h.clone())
                .await
                .unwrap();
            h
        } else {
            store_parts(s, b).await
        };
        s.archives().move_into_archive(&h, false).unwrap();
    }
    s.archives()
        .move_into_archive(&mc_handle(s, 101, false), false)
        .unwrap();
    s.archives().wait_for_archive_commit().await;
    assert!(!archive_path(s.archives().dir(), 1).exists());
    assert!(has_event(s, 1, EVENT_TO_COMMIT));
    let err = s.archives().commit_archive_now(1).unwrap_err().to_string();
    assert!(err.contains(&missing.unwrap().to_string()), "{err}");
    assert!(err.contains("has_proof=false"), "{err}");
    assert!(!archive_path(s.archives().dir(), 1).exists());
    assert!(no_tmp_files(s));
}

#[tokio::test]
async fn s33_archive_gc() {
    let t = TempStorage::new();
    let s = t.s();
    ingest_and_commit(s).await;
    s.archives()
        .move_into_archive(&mc_handle(s, 201, false), false)
        .unwrap();
    s.archives().wait_for_archive_commit().await;
    assert_eq!(s.archives().list_archive_ids(), vec![1, 101, 201]);
    assert!(s.archives().remove_outdated_archives(1).unwrap().is_empty());
    assert_eq!(s.archives().remove_outdated_archives(150).unwrap(), vec![1]);
    assert_eq!(s.archives().list_archive_ids(), vec![101, 201]);
    assert!(!archive_path(s.archives().dir(), 1).exists());
    for event in [EVENT_STARTED, EVENT_TO_COMMIT, EVENT_COMMITTED] {
        assert!(!has_event(s, 1, event));
    }
    assert!(s
        .db()
        .get::<ArchiveBlockIds>(&SeqnoKey(1))
        .unwrap()
        .is_none());
    assert!(has_event(s, 101, EVENT_STARTED));
    assert!(s
        .db()
        .get::<ArchiveBlockIds>(&SeqnoKey(101))
        .unwrap()
        .is_some());
}

#[tokio::test]
async fn pitfall_11_override_persisted_when_the_key_block_opens_an_archive() {
    let mut t = TempStorage::new();
    for seqno in 1..=101 {
        let h = mc_handle(t.s(), seqno, seqno == 101);
        t.s().archives().move_into_archive(&h, false).unwrap();
    }
    assert_eq!(t.s().archives().list_archive_ids(), vec![1, 101]);
    let s = t.reopen();
    s.archives()
        .move_into_archive(&mc_handle(s, 102, false), false)
        .unwrap();
    assert_eq!(s.archives().list_archive_ids(), vec![1, 101, 102]);
    assert_eq!(pending_seqnos(s, 101), vec![101]);
}

#[tokio::test]
async fn removed_handles_cannot_store_components() {
    let t = TempStorage::new();
    let s = t.s();
    let h = mc_handle(s, 5, false);
    s.handles().cache().gc_handles_cache(100, &[]);
    assert!(h.is_removed());
    let b = archive_1_blocks()
        .into_iter()
        .find(|b| b.id.is_masterchain())
        .unwrap();
    let err = s
        .components()
        .store_queue_diff(&mc_id(5), bytes::Bytes::from(b.queue_diff), h.clone())
        .await;
    // The diff belongs to another block, so it is rejected either way; with a matching diff the removed
    // handle is refused.
    assert!(err.is_err());
    let diff = regolith_formats::queue_diff::QueueDiff {
        shard: regolith_formats::ShardIdent::MASTERCHAIN,
        seqno: 5,
        ..regolith_formats::queue_diff::QueueDiff::parse(&fixture_bytes(
            "first_block_queue_diff.bin",
        ))
        .unwrap()
    };
    let err = s
        .components()
        .store_queue_diff(&mc_id(5), bytes::Bytes::from(diff.to_bytes()), h.clone())
        .await;
    assert!(matches!(err, Err(StorageError::HandleRemoved(_))));
    assert!(matches!(
        s.connections()
            .store_connection(&h, regolith_storage::Direction::Next1, &mc_id(6)),
        Err(StorageError::HandleRemoved(_))
    ));
}

#[tokio::test]
async fn an_archive_file_no_commit_accounts_for_is_quarantined_not_deleted() {
    let mut t = TempStorage::new();
    ingest_and_commit(t.s()).await;
    let archives = t.s().archives().list_archive_ids();
    let dir = t.s().archives().dir().to_path_buf();
    let stray = archive_path(&dir, 7);
    std::fs::write(&stray, b"not accounted for").unwrap();
    // A file of that name is already in quarantine: the new one gets a suffix, the old one stays.
    std::fs::create_dir_all(dir.join("quarantine")).unwrap();
    let name = stray.file_name().unwrap().to_string_lossy().into_owned();
    std::fs::write(dir.join("quarantine").join(&name), b"older").unwrap();

    let s = t.reopen();
    let stats = s.open_stats().archives;
    assert_eq!(stats.archive_files_quarantined, 1);
    assert_eq!(stats.quarantined_files, 2);
    assert!(!stray.exists(), "moved out of the archives");
    assert_eq!(
        std::fs::read(dir.join("quarantine").join(format!("{name}.1"))).unwrap(),
        b"not accounted for"
    );
    assert_eq!(
        std::fs::read(dir.join("quarantine").join(&name)).unwrap(),
        b"older"
    );
    // The committed archive is untouched, and a second open finds nothing new.
    assert!(decompressed_file(s, 1) == archive_1_decompressed());
    let s = t.reopen();
    let stats = s.open_stats().archives;
    assert_eq!(
        (stats.archive_files_quarantined, stats.quarantined_files),
        (0, 2)
    );
    assert_eq!(s.archives().list_archive_ids(), archives);
}

/// Ingests the fixture chain, offers `offered` (a compressed archive file written into the temp dir) as the
/// file of archive 1 and commits it. Returns the committed file's bytes and the offered path.
async fn commit_with_offer(
    t: &TempStorage,
    offered: &[u8],
    owned: bool,
) -> (Vec<u8>, std::path::PathBuf) {
    let s = t.s();
    let path = t.dir.path().join("offered.archive");
    std::fs::write(&path, offered).unwrap();
    ingest_archive_1(s).await;
    s.archives().offer_archive_file(1, path.clone(), owned);
    let h = mc_handle(s, 101, false);
    s.archives().move_into_archive(&h, false).unwrap();
    s.archives().wait_for_archive_commit().await;
    assert!(has_event(s, 1, EVENT_COMMITTED));
    assert!(no_tmp_files(s));
    assert!(
        decompressed_file(s, 1) == archive_1_decompressed(),
        "whatever was offered, the archive holds the reference bytes"
    );
    let committed = std::fs::read(archive_path(s.archives().dir(), 1)).unwrap();
    (committed, path)
}

/// What a commit writes with nothing offered.
async fn built_archive_1() -> Vec<u8> {
    let t = TempStorage::new();
    ingest_and_commit(t.s()).await;
    std::fs::read(archive_path(t.s().archives().dir(), 1)).unwrap()
}

fn compress(raw: &[u8], level: i32) -> Vec<u8> {
    zstd::stream::encode_all(raw, level).unwrap()
}

#[tokio::test]
async fn an_offered_file_with_the_archives_exact_bytes_becomes_its_file() {
    let built = built_archive_1().await;
    // The reference node's own file, and the reference bytes compressed at another level: neither is what a
    // build writes, and both are adopted as they are.
    let recompressed = compress(&archive_1_decompressed(), 19);
    for offered in [fixture_bytes("archive_1.bin"), recompressed] {
        assert!(offered != built, "the offer differs from a build");
        let t = TempStorage::new();
        let (committed, path) = commit_with_offer(&t, &offered, false).await;
        assert!(committed == offered, "the offered file is the archive file");
        assert!(path.exists(), "a file the storage does not own stays");
    }
    // An owned file is removed once the commit used it.
    let t = TempStorage::new();
    let offered = compress(&archive_1_decompressed(), 19);
    let (committed, path) = commit_with_offer(&t, &offered, true).await;
    assert!(committed == offered);
    assert!(!path.exists(), "an owned offer is removed after the commit");
}

#[tokio::test]
async fn an_offered_file_that_differs_in_any_way_is_ignored_and_the_archive_built() {
    let built = built_archive_1().await;
    let reference = archive_1_decompressed();
    let flipped = {
        let mut raw = reference.clone();
        let at = raw.len() / 2;
        raw[at] ^= 1;
        compress(&raw, 19)
    };
    let extra_entry = {
        // The last entry (header and data) once more at the end.
        let entries: Vec<_> = ArchiveReader::new(&reference[..])
            .map(Result::unwrap)
            .collect();
        let last = entries.last().unwrap();
        let tail = 92 + last.data.len();
        let mut raw = reference.clone();
        raw.extend_from_slice(&reference[reference.len() - tail..]);
        compress(&raw, 19)
    };
    let truncated = compress(&reference[..reference.len() - 10], 19);
    let trailing_garbage = {
        let mut c = compress(&reference, 19);
        c.extend_from_slice(b"not zstd");
        c
    };
    let padded = {
        // Valid zstd for any decoder (a skippable frame), but more compressed bytes than decompressed ones.
        let mut c = compress(&reference, 19);
        let pad = reference.len() as u32;
        c.extend_from_slice(&0x184D_2A50u32.to_le_bytes());
        c.extend_from_slice(&pad.to_le_bytes());
        c.resize(c.len() + pad as usize, 0);
        c
    };
    let not_zstd = reference.clone();
    let cases = [
        ("a flipped byte", flipped),
        ("an extra entry", extra_entry),
        ("a truncated stream", truncated),
        ("bytes after the zstd stream", trailing_garbage),
        ("padding past the decompressed size", padded),
        ("an uncompressed archive", not_zstd),
    ];
    for (what, offered) in cases {
        let t = TempStorage::new();
        let (committed, path) = commit_with_offer(&t, &offered, true).await;
        assert!(committed == built, "{what}: the archive is built");
        assert!(!path.exists(), "{what}: the owned offer is removed");
    }
    // An offer for another archive id is not used for this one, and a vanished file is no error.
    let t = TempStorage::new();
    let s = t.s();
    ingest_archive_1(s).await;
    let offered = t.dir.path().join("offered.archive");
    std::fs::write(&offered, compress(&reference, 19)).unwrap();
    s.archives().offer_archive_file(2, offered.clone(), false);
    s.archives()
        .offer_archive_file(1, t.dir.path().join("vanished.archive"), false);
    let h = mc_handle(s, 101, false);
    s.archives().move_into_archive(&h, false).unwrap();
    s.archives().wait_for_archive_commit().await;
    let committed = std::fs::read(archive_path(s.archives().dir(), 1)).unwrap();
    assert!(committed == built);
}
