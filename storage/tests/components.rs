//! storage.md §12 scenarios 17–24: block components.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::*;
use regolith_formats::archive::ArchiveEntryType;
use regolith_formats::block_id::parse_block_id;
use regolith_formats::{BlockKey, ShardIdent};
use regolith_storage::tables::{BlockComponents, BlockHandles, ComponentKey, StoredHash};
use regolith_storage::{BlockFlags, KvError, MaybeExistingHandle, StorageError};
use regolith_test_support::fixture_bytes;

fn block_fixture() -> (regolith_formats::BlockId, Vec<u8>) {
    let text = String::from_utf8(fixture_bytes("block_id.txt")).unwrap();
    (parse_block_id(&text).unwrap(), fixture_bytes("block.bin"))
}

#[tokio::test]
async fn s17_store_and_ranged_reads() {
    let (id, raw) = block_fixture();
    assert_eq!(regolith_storage::parsed::file_hash(&raw), id.file_hash);
    let t = TempStorage::new();
    let c = t.s().components();
    let r = c
        .store_block_data(&id, Bytes::from(raw.clone()), meta(12))
        .await
        .unwrap();
    assert!(r.new && r.updated);
    assert!(r.handle.has_data() && !r.handle.has_all_block_parts());

    let size = c
        .get_compressed_block_data_size(&r.handle)
        .unwrap()
        .unwrap();
    let mut frame = Vec::new();
    let mut offset = 0;
    while offset < size {
        let chunk = c
            .load_block_data_range(&r.handle, offset, 1000)
            .unwrap()
            .unwrap();
        assert!(!chunk.is_empty() && chunk.len() <= 1000);
        frame.extend_from_slice(&chunk);
        offset += chunk.len() as u64;
    }
    assert_eq!(frame.len() as u64, size);
    assert_eq!(zstd::stream::decode_all(&frame[..]).unwrap(), raw);
    assert_eq!(
        zstd::zstd_safe::get_frame_content_size(&frame).unwrap(),
        Some(raw.len() as u64)
    );
    assert_eq!(
        c.load_block_data_range(&r.handle, size, 1000)
            .unwrap()
            .unwrap()
            .len(),
        0
    );
    assert_eq!(c.load_block_data_raw(&r.handle).await.unwrap(), raw);

    let again = c
        .store_block_data(&id, Bytes::from(raw.clone()), meta(12))
        .await
        .unwrap();
    assert!(!again.updated && !again.new);

    // Without data: ranged reads give None and full reads NotFound.
    let (other, _) = t
        .s()
        .handles()
        .create_or_load_handle(&shard_id(1), meta(1))
        .unwrap();
    assert!(c.load_block_data_range(&other, 0, 10).unwrap().is_none());
    assert!(matches!(
        c.load_block_data_raw(&other).await,
        Err(StorageError::NotFound { .. })
    ));
    // Data that does not match the id is rejected before anything is stored.
    let bad = c
        .store_block_data(&shard_id(2), Bytes::from(raw.clone()), meta(1))
        .await;
    assert!(matches!(bad, Err(StorageError::InvalidData { .. })));
    assert!(t.s().handles().load_handle(&shard_id(2)).unwrap().is_none());
}

#[tokio::test]
async fn s18_failed_component_batch() {
    let (id, raw) = block_fixture();
    let mut t = TempStorage::new();
    {
        let s = t.s();
        s.db().fail_points.component_batch.arm();
        let err = s
            .components()
            .store_block_data(&id, Bytes::from(raw.clone()), meta(1))
            .await;
        assert!(matches!(err, Err(StorageError::Kv(KvError::Injected(_)))));
        let h = s.handles().load_handle(&id).unwrap().unwrap();
        assert!(!h.has_data(), "no in-memory flag after a failed batch");
    }
    let s = t.reopen();
    let h = s.handles().load_handle(&id).unwrap().unwrap();
    assert!(!h.has_data());
    assert!(!s
        .db()
        .contains::<BlockComponents>(&ComponentKey(BlockKey::of(&id), ArchiveEntryType::Block))
        .unwrap());
    let stats = s.open_stats().consistency;
    assert_eq!(
        (stats.orphaned_flags_count, stats.restored_flags_count),
        (0, 0)
    );
}

#[tokio::test]
async fn s19_startup_check_repairs_flags() {
    let mut t = TempStorage::new();
    let blocks = ingest_archive_1(t.s()).await;
    t.close();
    let mc: Vec<_> = blocks
        .iter()
        .filter(|b| b.id.is_masterchain())
        .map(|b| b.id)
        .collect();
    {
        let config = t.config.clone();
        let db = regolith_storage::db::open(&config.root_dir.join("core"), &config, false).unwrap();
        let del = |id, ty| {
            db.delete::<BlockComponents>(&ComponentKey(BlockKey::of(id), ty))
                .unwrap();
        };
        for id in &mc[0..25] {
            del(id, ArchiveEntryType::Block);
        }
        for id in &mc[25..35] {
            del(id, ArchiveEntryType::Proof);
        }
        for id in &mc[35..45] {
            del(id, ArchiveEntryType::QueueDiff);
        }
        for id in &mc[45..55] {
            let mut m = db
                .get::<BlockHandles>(&StoredHash(id.root_hash))
                .unwrap()
                .unwrap();
            m.meta.flags = BlockFlags(m.meta.flags.0 & !0b111);
            db.put::<BlockHandles>(&StoredHash(id.root_hash), &m)
                .unwrap();
        }
    }
    let s = t.reopen();
    let stats = s.open_stats().consistency;
    assert_eq!(stats.orphaned_flags_count, 45);
    assert_eq!(stats.restored_flags_count, 10);
    for (i, id) in mc.iter().enumerate() {
        let h = s.handles().load_handle(id).unwrap().unwrap();
        let expect = (i >= 25, !(25..35).contains(&i), !(35..45).contains(&i));
        assert_eq!(
            (h.has_data(), h.has_proof(), h.has_queue_diff()),
            expect,
            "mc block {}",
            id.seqno
        );
    }
    let s = t.reopen();
    let stats = s.open_stats().consistency;
    assert_eq!(
        (stats.orphaned_flags_count, stats.restored_flags_count),
        (0, 0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn s20_racing_component_stores() {
    let t = TempStorage::new();
    let s = t.s().clone();
    let blocks: Vec<_> = archive_1_blocks()
        .into_iter()
        .filter(|b| b.id.is_masterchain())
        .collect();
    for b in blocks {
        let data = {
            let (s, b) = (s.clone(), b.clone());
            tokio::spawn(async move {
                s.components()
                    .store_block_data(&b.id, Bytes::from(b.data.clone()), b.meta())
                    .await
            })
        };
        let others: Vec<_> = (0..2)
            .map(|_| {
                let (s, b) = (s.clone(), b.clone());
                tokio::spawn(async move {
                    let p = s
                        .components()
                        .store_block_proof(
                            &b.id,
                            Bytes::from(b.proof.clone()),
                            MaybeExistingHandle::New(b.meta()),
                        )
                        .await
                        .unwrap();
                    let d = s
                        .components()
                        .store_queue_diff(
                            &b.id,
                            Bytes::from(b.queue_diff.clone()),
                            MaybeExistingHandle::New(b.meta()),
                        )
                        .await
                        .unwrap();
                    (p, d)
                })
            })
            .collect();
        let data = data.await.unwrap().unwrap();
        let mut proofs = 0;
        let mut diffs = 0;
        for o in others {
            let (p, d) = o.await.unwrap();
            assert!(
                p.handle.ptr_eq(&data.handle) && d.handle.ptr_eq(&data.handle),
                "one instance per block"
            );
            proofs += p.updated as usize;
            diffs += d.updated as usize;
        }
        assert!(data.updated);
        assert_eq!((proofs, diffs), (1, 1), "block {}", b.id.seqno);
        assert!(data.handle.has_all_block_parts());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s21_wait_for_block() {
    let t = TempStorage::new();
    let s = t.s().clone();
    let b = archive_1_blocks().into_iter().next().unwrap();
    let waiter = {
        let (s, id) = (s.clone(), b.id);
        tokio::spawn(async move { s.components().wait_for_block(&id, None).await })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    s.components()
        .store_block_data(&b.id, Bytes::from(b.data.clone()), b.meta())
        .await
        .unwrap();
    let (h, block) = waiter.await.unwrap().unwrap();
    assert_eq!(h.id(), &b.id);
    assert_eq!(block.id, b.id);
    // Already stored: immediate.
    assert!(s
        .components()
        .wait_for_block(&b.id, Some(Duration::from_millis(1)))
        .await
        .is_ok());

    let missing = mc_id(7777);
    assert!(matches!(
        s.components()
            .wait_for_block(&missing, Some(Duration::from_millis(50)))
            .await,
        Err(StorageError::Timeout)
    ));
    {
        let fut = s.components().wait_for_block(&missing, None);
        let _ = tokio::time::timeout(Duration::from_millis(10), fut).await;
    }
    assert_eq!(
        s.components().data_waiter_keys(),
        0,
        "dropping the future removes its registration"
    );
}

#[tokio::test]
async fn s22_find_mc_block_data() {
    let t = TempStorage::new();
    ingest_archive_1(t.s()).await;
    let c = t.s().components();
    let b = c.find_mc_block_data(50).unwrap().unwrap();
    assert!(b.id.is_masterchain() && b.id.seqno == 50);
    assert!(c.find_mc_block_data(101).unwrap().is_none());
    assert!(c.find_mc_block_data(u32::MAX).unwrap().is_none());
}

#[tokio::test]
async fn s23_list_blocks() {
    let t = TempStorage::new();
    let blocks = ingest_archive_1(t.s()).await;
    let c = t.s().components();
    let mut all: Vec<_> = blocks.iter().map(|b| b.id).collect();
    all.sort_by_key(BlockKey::of);

    let (ids, cont) = c.list_blocks(None).unwrap();
    assert_eq!(ids, all);
    assert!(cont.is_none());
    assert!(!ids[0].is_masterchain(), "shard blocks first");

    let collect = |page: usize| {
        let mut out = Vec::new();
        let mut cont = None;
        let mut pages = 0;
        loop {
            let (ids, next) = c.list_blocks_paged(cont, page).unwrap();
            pages += 1;
            out.extend(ids);
            match next {
                Some(k) => cont = Some(k),
                None => break,
            }
        }
        (out, pages)
    };
    let (ids, pages) = collect(10);
    assert_eq!(pages, 11);
    assert_eq!(ids, all);

    // A fork: a second shard block with seqno 5.
    let fork = synthetic_id(ShardIdent::BASECHAIN, 5, 42);
    let (h, _) = t
        .s()
        .handles()
        .create_or_load_handle(&fork, meta(63))
        .unwrap();
    c.store_raw_component_for_tests(&h, ArchiveEntryType::Block, b"fork data")
        .unwrap();
    let mut with_fork = all.clone();
    with_fork.push(fork);
    with_fork.sort_by_key(BlockKey::of);
    for page in 1..=10 {
        let (ids, _) = collect(page);
        assert_eq!(ids, with_fork, "page size {page}");
        assert_eq!(
            ids.iter()
                .filter(|id| !id.is_masterchain() && id.seqno == 5)
                .count(),
            2
        );
    }
}

#[tokio::test]
async fn s24_first_queue_diff() {
    let expected = fixture_bytes("first_block_queue_diff.bin");
    let blocks = archive_1_blocks();
    let mc1 = blocks
        .iter()
        .find(|b| b.id.is_masterchain() && b.id.seqno == 1)
        .unwrap();
    assert_eq!(mc1.queue_diff, expected);
    let t = TempStorage::new();
    ingest_archive_1(t.s()).await;
    let h = t.s().handles().load_handle(&mc1.id).unwrap().unwrap();
    assert_eq!(
        t.s().components().load_queue_diff_raw(&h).await.unwrap(),
        expected
    );
    let parsed = t.s().components().load_queue_diff(&h).await.unwrap();
    assert_eq!(parsed.seqno, 1);
}

fn checked(b: &ArchiveBlock) -> regolith_formats::CheckedBlock {
    regolith_formats::CheckedBlock::check(
        &b.id,
        Bytes::from(b.data.clone()),
        Bytes::from(b.proof.clone()),
        Bytes::from(b.queue_diff.clone()),
    )
    .unwrap()
}

/// The apply path's store: every part of a checked block in one batch with its flags, read back as given.
#[tokio::test]
async fn a_checked_block_is_stored_whole_and_once() {
    let mut t = TempStorage::new();
    let blocks = archive_1_blocks();
    let b = blocks.iter().find(|b| b.id.is_masterchain()).unwrap();
    let block = checked(b);
    let c = t.s().components();
    let waiter = {
        let c = t.s().clone();
        let id = b.id;
        tokio::spawn(async move { c.components().wait_for_block(&id, None).await })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    let r = c
        .store_checked_block(&block, b.ref_by_mc_seqno)
        .await
        .unwrap();
    assert!(r.new && r.updated);
    assert!(r.handle.has_all_block_parts());
    assert_eq!(r.handle.ref_by_mc_seqno(), b.ref_by_mc_seqno);
    assert_eq!(r.handle.gen_utime(), b.gen_utime);
    let (waited, parsed) = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(waited.id(), &b.id);
    assert_eq!(parsed.id, b.id);
    assert_eq!(c.load_block_data_raw(&r.handle).await.unwrap(), b.data);
    assert_eq!(c.load_block_proof_raw(&r.handle).await.unwrap(), b.proof);
    assert_eq!(
        c.load_queue_diff_raw(&r.handle).await.unwrap(),
        b.queue_diff
    );

    let again = c
        .store_checked_block(&block, b.ref_by_mc_seqno)
        .await
        .unwrap();
    assert!(!again.new && !again.updated);
    assert!(again.handle.ptr_eq(&r.handle));

    // A block whose data was stored alone gets the other two parts.
    let s = blocks.iter().find(|b| !b.id.is_masterchain()).unwrap();
    let data_only = c
        .store_block_data(&s.id, Bytes::from(s.data.clone()), s.meta())
        .await
        .unwrap();
    assert!(!data_only.handle.has_proof());
    let r = c
        .store_checked_block(&checked(s), s.ref_by_mc_seqno)
        .await
        .unwrap();
    assert!(!r.new && r.updated && r.handle.has_all_block_parts());

    let s = t.reopen();
    for id in [
        b.id,
        blocks.iter().find(|b| !b.id.is_masterchain()).unwrap().id,
    ] {
        let h = s.handles().load_handle(&id).unwrap().unwrap();
        assert!(h.has_all_block_parts(), "{id}");
    }
    let stats = s.open_stats().consistency;
    assert_eq!(
        (stats.orphaned_flags_count, stats.restored_flags_count),
        (0, 0)
    );
}

/// A block frame kept from a peer is stored as served (here level 19, not the storage's level 3); without
/// one the block is compressed by the storage.
#[tokio::test]
async fn a_served_block_frame_is_stored_as_served() {
    let t = TempStorage::new();
    let blocks = archive_1_blocks();
    let c = t.s().components();
    let mut mc = blocks.iter().filter(|b| b.id.is_masterchain());
    let (served, plain) = (mc.next().unwrap(), mc.next().unwrap());
    let frame = zstd::bulk::compress(&served.data, 19).unwrap();
    assert_ne!(frame, zstd::bulk::compress(&served.data, 3).unwrap());
    let block = checked(served).with_data_frame(Bytes::from(frame.clone()));
    let r = c
        .store_checked_block(&block, served.ref_by_mc_seqno)
        .await
        .unwrap();
    assert!(r.handle.has_all_block_parts());
    let size = c
        .get_compressed_block_data_size(&r.handle)
        .unwrap()
        .unwrap();
    let stored = c
        .load_block_data_range(&r.handle, 0, size)
        .unwrap()
        .unwrap();
    assert_eq!(stored, frame);
    assert_eq!(c.load_block_data_raw(&r.handle).await.unwrap(), served.data);
    assert_eq!(
        c.load_block_proof_raw(&r.handle).await.unwrap(),
        served.proof
    );

    let r = c
        .store_checked_block(&checked(plain), plain.ref_by_mc_seqno)
        .await
        .unwrap();
    let size = c
        .get_compressed_block_data_size(&r.handle)
        .unwrap()
        .unwrap();
    let stored = c
        .load_block_data_range(&r.handle, 0, size)
        .unwrap()
        .unwrap();
    assert_eq!(zstd::decode_all(&stored[..]).unwrap(), plain.data);
    assert_eq!(stored, zstd::bulk::compress(&plain.data, 3).unwrap());
}

/// An injected failure of the one batch of a checked block leaves neither a part nor a flag.
#[tokio::test]
async fn a_failed_checked_block_batch_stores_no_part() {
    let mut t = TempStorage::new();
    let b = archive_1_blocks().into_iter().next().unwrap();
    {
        let s = t.s();
        s.db().fail_points.component_batch.arm();
        let err = s
            .components()
            .store_checked_block(&checked(&b), b.ref_by_mc_seqno)
            .await;
        assert!(
            matches!(err, Err(StorageError::Kv(KvError::Injected(_)))),
            "{err:?}"
        );
        let h = s.handles().load_handle(&b.id).unwrap().unwrap();
        assert!(!h.has_data() && !h.has_proof() && !h.has_queue_diff());
    }
    let s = t.reopen();
    for ty in ArchiveEntryType::ALL {
        assert!(!s
            .db()
            .contains::<BlockComponents>(&ComponentKey(BlockKey::of(&b.id), ty))
            .unwrap());
    }
    let h = s.handles().load_handle(&b.id).unwrap().unwrap();
    assert!(!h.has_data() && !h.has_proof() && !h.has_queue_diff());
    let stats = s.open_stats().consistency;
    assert_eq!(
        (stats.orphaned_flags_count, stats.restored_flags_count),
        (0, 0)
    );
}

#[tokio::test]
async fn startup_check_reports_blocks_without_a_handle_and_deletes_nothing() {
    let mut t = TempStorage::new();
    let blocks = ingest_archive_1(t.s()).await;
    t.close();
    let lost: Vec<_> = blocks
        .iter()
        .filter(|b| b.id.is_masterchain())
        .map(|b| b.id)
        .take(3)
        .collect();
    {
        let config = t.config.clone();
        let db = regolith_storage::db::open(&config.root_dir.join("core"), &config, false).unwrap();
        for id in &lost {
            db.delete::<BlockHandles>(&StoredHash(id.root_hash))
                .unwrap();
        }
    }
    for _ in 0..2 {
        let s = t.reopen();
        assert_eq!(s.open_stats().consistency.dangling_ids_count, 3);
        for id in &lost {
            for ty in [
                ArchiveEntryType::Block,
                ArchiveEntryType::Proof,
                ArchiveEntryType::QueueDiff,
            ] {
                assert!(
                    s.db()
                        .contains::<BlockComponents>(&ComponentKey(BlockKey::of(id), ty))
                        .unwrap(),
                    "the {ty:?} of {id} is kept"
                );
            }
            assert!(
                s.handles()
                    .iter_block_ids_from(BlockKey::of(id))
                    .next()
                    .unwrap()
                    .unwrap()
                    == *id,
                "the id row of {id} is kept"
            );
        }
    }
}
