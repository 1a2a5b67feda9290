//! storage.md §12 scenarios 1–10: meta, merge operator, handles, cache.

mod common;

use common::*;
use regolith_formats::{BlockId, HashBytes, ShardIdent};
use regolith_storage::tables::{BlockHandles, KeyRange, StoredHash};
use regolith_storage::{
    BlockFlags, BlockMeta, HandleStatus, KvError, MetaSnapshot, NewBlockMeta, StorageError,
};

#[test]
fn s01_meta_round_trip_and_bad_lengths() {
    let meta = BlockMeta::new(NewBlockMeta {
        is_key_block: true,
        gen_utime: 123456789,
        ref_by_mc_seqno: 4311231,
    });
    let bytes = meta.load().encode();
    assert_eq!(
        bytes,
        [0xBF, 0xC8, 0x41, 0x00, 0x00, 0x08, 0x00, 0x00, 0x15, 0xCD, 0x5B, 0x07]
    );
    assert_eq!(MetaSnapshot::decode(&bytes).unwrap(), meta.load());
    assert!(matches!(
        MetaSnapshot::decode(&bytes[..11]),
        Err(StorageError::Corruption { .. })
    ));
    assert!(matches!(
        MetaSnapshot::decode(&[0; 13]),
        Err(StorageError::Corruption { .. })
    ));
}

fn snap(ref_by_mc_seqno: u32, flags: BlockFlags, gen_utime: u32) -> Vec<u8> {
    MetaSnapshot {
        flags,
        ref_by_mc_seqno,
        gen_utime,
    }
    .encode()
    .to_vec()
}

/// Meta bytes as a writer that forgot to clear bit 15 would store them (the operator must clear it).
fn snap_unmasked(ref_by_mc_seqno: u32, flags: BlockFlags, gen_utime: u32) -> Vec<u8> {
    [
        ref_by_mc_seqno.to_le_bytes(),
        flags.0.to_le_bytes(),
        gen_utime.to_le_bytes(),
    ]
    .concat()
}

#[test]
fn s02_merge_operator() {
    let t = TempStorage::new();
    let db = t.s().db();
    let key = StoredHash(HashBytes([7u8; 32]));
    db.put_raw_value::<BlockHandles>(&key, &snap(5, BlockFlags::HAS_DATA, 7))
        .unwrap();
    db.merge_raw_value::<BlockHandles>(&key, &snap(9, BlockFlags::HAS_PROOF, 9))
        .unwrap();
    db.merge_raw_value::<BlockHandles>(&key, &snap_unmasked(9, BlockFlags::IS_REMOVED, 9))
        .unwrap();
    let full = db.get_raw_value::<BlockHandles>(&key).unwrap().unwrap();
    let expected = snap(5, BlockFlags::HAS_DATA | BlockFlags::HAS_PROOF, 7);
    assert_eq!(full, expected);

    // Partial merge first (operands only, flushed as a merge stack), then a full merge: same bytes.
    let key2 = StoredHash(HashBytes([8u8; 32]));
    db.merge_raw_value::<BlockHandles>(&key2, &snap(9, BlockFlags::HAS_PROOF, 9))
        .unwrap();
    db.merge_raw_value::<BlockHandles>(&key2, &snap_unmasked(9, BlockFlags::IS_REMOVED, 9))
        .unwrap();
    db.flush_all().unwrap();
    db.compact_range::<BlockHandles>(&KeyRange::all());
    db.merge_raw_value::<BlockHandles>(&key2, &snap(1, BlockFlags::HAS_DATA, 1))
        .unwrap();
    assert_eq!(
        db.get_raw_value::<BlockHandles>(&key2).unwrap().unwrap(),
        snap(9, BlockFlags::HAS_DATA | BlockFlags::HAS_PROOF, 9)
    );

    // A row with the rest of the id (layout 0.2) keeps it through merges, full and partial alike.
    let key4 = StoredHash(HashBytes([10u8; 32]));
    let file_hash = [0xabu8; 32];
    let short_id = [0x5au8; 16];
    let row = [&snap(5, BlockFlags::HAS_DATA, 7)[..], &short_id, &file_hash].concat();
    db.put_raw_value::<BlockHandles>(&key4, &row).unwrap();
    db.merge_raw_value::<BlockHandles>(&key4, &snap(9, BlockFlags::HAS_PROOF, 9))
        .unwrap();
    db.flush_all().unwrap();
    db.merge_raw_value::<BlockHandles>(&key4, &snap_unmasked(9, BlockFlags::IS_REMOVED, 9))
        .unwrap();
    db.merge_raw_value::<BlockHandles>(&key4, &snap(9, BlockFlags::HAS_QUEUE_DIFF, 9))
        .unwrap();
    let merged = [
        &snap(
            5,
            BlockFlags::HAS_DATA | BlockFlags::HAS_PROOF | BlockFlags::HAS_QUEUE_DIFF,
            7,
        )[..],
        &short_id,
        &file_hash,
    ]
    .concat();
    assert_eq!(
        db.get_raw_value::<BlockHandles>(&key4).unwrap().unwrap(),
        merged
    );
    db.compact_range::<BlockHandles>(&KeyRange::all());
    assert_eq!(
        db.get_raw_value::<BlockHandles>(&key4).unwrap().unwrap(),
        merged
    );
    let decoded = db.get::<BlockHandles>(&key4).unwrap().unwrap();
    let stored = decoded.id.unwrap();
    assert_eq!(
        (stored.short_id, stored.file_hash),
        (short_id, HashBytes(file_hash))
    );
    // An operand with an id, or a row of another length, is corruption.
    let key5 = StoredHash(HashBytes([11u8; 32]));
    db.put_raw_value::<BlockHandles>(&key5, &row).unwrap();
    db.merge_raw_value::<BlockHandles>(&key5, &row).unwrap();
    assert!(db.get::<BlockHandles>(&key5).is_err());
    let key6 = StoredHash(HashBytes([12u8; 32]));
    db.put_raw_value::<BlockHandles>(&key6, &row[..20]).unwrap();
    db.merge_raw_value::<BlockHandles>(&key6, &snap(9, BlockFlags::HAS_PROOF, 9))
        .unwrap();
    assert!(db.get_raw_value::<BlockHandles>(&key6).is_err());

    // A bad operand is corruption, never a panic.
    let key3 = StoredHash(HashBytes([9u8; 32]));
    db.put_raw_value::<BlockHandles>(&key3, &snap(1, BlockFlags::HAS_DATA, 1))
        .unwrap();
    db.merge_raw_value::<BlockHandles>(&key3, &[1u8; 11])
        .unwrap();
    assert!(db.get_raw_value::<BlockHandles>(&key3).is_err());
    assert!(db.get::<BlockHandles>(&key3).is_err());
}

#[test]
fn s03_add_flags() {
    let meta = BlockMeta::new(NewBlockMeta::default());
    assert!(meta.add_flags(BlockFlags::HAS_ALL_BLOCK_PARTS));
    assert!(!meta.add_flags(BlockFlags::HAS_ALL_BLOCK_PARTS));
    let meta = BlockMeta::new(NewBlockMeta::default());
    meta.add_flags(BlockFlags::HAS_DATA);
    assert!(meta.add_flags(BlockFlags::HAS_DATA | BlockFlags::HAS_STATE));
}

#[test]
fn s04_zero_seqno_predicates() {
    let t = TempStorage::new();
    let handles = t.s().handles();
    let (mc0, _) = handles
        .create_or_load_handle(&mc_id(0), NewBlockMeta::default())
        .unwrap();
    assert!(mc0.is_key_block() && mc0.is_persistent() && mc0.is_zerostate());
    assert!(!mc0.has_persistent_shard_state() && !mc0.has_next1());
    let (sh0, _) = handles
        .create_or_load_handle(&shard_id(0), NewBlockMeta::default())
        .unwrap();
    assert!(!sh0.is_key_block());
    assert!(sh0.is_persistent() && sh0.is_zerostate());
    let (mc42, _) = handles.create_or_load_handle(&mc_id(42), meta(7)).unwrap();
    assert_eq!(mc42.ref_by_mc_seqno(), 42);
    assert_eq!(mc42.meta().load().ref_by_mc_seqno, 7);
}

#[test]
fn s05_removed_hides_parts() {
    let t = TempStorage::new();
    let (h, _) = t
        .s()
        .handles()
        .create_or_load_handle(&shard_id(5), meta(1))
        .unwrap();
    h.meta().add_flags(
        BlockFlags::HAS_ALL_BLOCK_PARTS | BlockFlags::IS_COMMITTED | BlockFlags::IS_REMOVED,
    );
    assert!(!h.has_data() && !h.has_proof() && !h.has_queue_diff() && !h.has_all_block_parts());
    assert!(h.is_committed());
}

#[test]
fn s06_create_fetch_commit_reload() {
    let t = TempStorage::new();
    let handles = t.s().handles();
    let id = shard_id(10);
    let (a, status) = handles.create_or_load_handle(&id, meta(3)).unwrap();
    assert_eq!(status, HandleStatus::Created);
    let (b, status) = handles.create_or_load_handle(&id, meta(99)).unwrap();
    assert_eq!(status, HandleStatus::Fetched);
    assert!(a.ptr_eq(&b));
    assert!(handles.set_block_committed(&a).unwrap());
    assert!(!handles.set_block_committed(&b).unwrap());
    drop(a);
    drop(b);
    assert!(handles.cache().get(&id).is_none());
    assert_eq!(handles.cache().len(), 0, "slot removed on last drop");
    let c = handles.load_handle(&id).unwrap().unwrap();
    assert!(c.is_committed());
    assert_eq!(c.meta().load().ref_by_mc_seqno, 3);
    assert_eq!(c.gen_utime(), 1003);
}

#[test]
fn s07_created_exactly_once_under_races() {
    let t = TempStorage::new();
    let storage = t.s().clone();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .build()
        .unwrap();
    rt.block_on(async move {
        for round in 0..1000u32 {
            let id = synthetic_id(ShardIdent::BASECHAIN, 1_000_000 + round, 1);
            let tasks: Vec<_> = (0..64)
                .map(|_| {
                    let storage = storage.clone();
                    tokio::spawn(async move {
                        let (h, status) = storage
                            .handles()
                            .create_or_load_handle(&id, meta(1))
                            .unwrap();
                        drop(h);
                        status
                    })
                })
                .collect();
            let mut created = 0;
            for t in tasks {
                if t.await.unwrap() == HandleStatus::Created {
                    created += 1;
                }
            }
            assert_eq!(created, 1, "round {round}");
        }
    });
}

#[test]
fn s08_slot_reuse_after_eviction() {
    let t = TempStorage::new();
    let handles = t.s().handles();
    let id = shard_id(10);
    let (a, _) = handles.create_or_load_handle(&id, meta(1)).unwrap();
    // Evict A by cache GC (shard block below the top).
    assert_eq!(
        handles
            .cache()
            .gc_handles_cache(1000, &[(ShardIdent::BASECHAIN, 200)]),
        1
    );
    assert!(a.is_removed());
    let b = handles.load_handle(&id).unwrap().unwrap();
    assert!(!b.ptr_eq(&a));
    drop(a);
    assert!(handles.cache().slot_is(&id, &b), "the slot still holds B");
    assert!(handles.cache().get(&id).unwrap().ptr_eq(&b));
}

#[test]
fn s09_cache_gc_protection() {
    let t = TempStorage::new();
    let handles = t.s().handles();
    let (h100, _) = handles
        .create_or_load_handle(&shard_id(100), meta(1))
        .unwrap();
    let (h101, _) = handles
        .create_or_load_handle(&shard_id(101), meta(1))
        .unwrap();
    let (h102, _) = handles
        .create_or_load_handle(&shard_id(102), meta(1))
        .unwrap();
    handles.set_block_persistent(&h100).unwrap();
    handles.set_skip_blocks_gc(&h101).unwrap();
    handles.set_skip_blocks_gc(&h102).unwrap();
    handles.set_skip_blocks_gc_finished(&h102).unwrap();
    let before = t
        .s()
        .db()
        .get::<BlockHandles>(&StoredHash(h102.id().root_hash))
        .unwrap()
        .unwrap();

    assert_eq!(
        handles
            .cache()
            .gc_handles_cache(1000, &[(ShardIdent::BASECHAIN, 200)]),
        1
    );
    assert!(!h100.is_removed() && !h101.is_removed());
    assert!(h102.is_removed());
    assert!(!handles.set_block_committed(&h102).unwrap());
    assert!(!handles.set_has_shard_state(&h102).unwrap());
    let after = t
        .s()
        .db()
        .get::<BlockHandles>(&StoredHash(h102.id().root_hash))
        .unwrap()
        .unwrap();
    assert_eq!(before, after, "an inert handle writes nothing");
    assert_eq!(after.meta.encode()[4..8], before.meta.encode()[4..8]);

    let fresh = handles.load_handle(h102.id()).unwrap().unwrap();
    assert!(!fresh.ptr_eq(&h102));
    assert!(!fresh.is_removed());
    assert!(!fresh.skip_blocks_gc() && fresh.flags().contains(BlockFlags::SKIP_BLOCKS_GC_FINISHED));
}

#[test]
fn s10_wrong_file_hash_or_seqno() {
    let t = TempStorage::new();
    let handles = t.s().handles();
    let id = shard_id(10);
    let (h, _) = handles.create_or_load_handle(&id, meta(1)).unwrap();
    let wrong_file = BlockId {
        file_hash: mc_id(1).file_hash,
        ..id
    };
    let wrong_seqno = BlockId { seqno: 11, ..id };
    assert!(handles.load_handle(&wrong_file).unwrap().is_none());
    assert!(handles.load_handle(&wrong_seqno).unwrap().is_none());
    drop(h);
    assert!(handles.load_handle(&wrong_file).unwrap().is_none());
    assert!(matches!(
        handles.create_or_load_handle(&wrong_file, meta(1)),
        Err(StorageError::BlockIdMismatch { .. })
    ));
    // Another seqno or shard under the stored root hash is refused too, and leaves the stored handle as it
    // was (a creation would have overwritten its meta).
    let (h, _) = handles.create_or_load_handle(&id, meta(1)).unwrap();
    handles.set_block_committed(&h).unwrap();
    drop(h);
    let wrong_shard = BlockId {
        shard: ShardIdent::new(0, 0x4000_0000_0000_0000).unwrap(),
        ..id
    };
    for wrong in [wrong_seqno, wrong_shard] {
        assert!(handles.load_handle(&wrong).unwrap().is_none(), "{wrong}");
        assert!(
            matches!(
                handles.create_or_load_handle(&wrong, meta(7)),
                Err(StorageError::BlockIdMismatch { .. })
            ),
            "{wrong}"
        );
    }
    let h = handles.load_handle(&id).unwrap().unwrap();
    assert!(h.is_committed());
    assert_eq!(h.meta().load().ref_by_mc_seqno, 1);
}

#[test]
fn corrupted_meta_is_an_error_not_a_panic() {
    let mut t = TempStorage::new();
    let id = shard_id(10);
    drop(t.s().handles().create_or_load_handle(&id, meta(1)).unwrap());
    let db = t.s().db();
    db.put_raw_value::<BlockHandles>(&StoredHash(id.root_hash), &[0u8; 11])
        .unwrap();
    assert!(matches!(
        t.s().handles().load_handle(&id),
        Err(StorageError::Kv(KvError::Corruption { .. }))
    ));
    assert!(matches!(
        t.s().handles().create_or_load_handle(&id, meta(1)),
        Err(StorageError::Kv(KvError::Corruption { .. }))
    ));
    // The startup check reports it instead of panicking.
    t.close();
    let err = regolith_storage::Storage::open(t.config.clone())
        .err()
        .expect("open must fail");
    assert!(err.to_string().contains("corrupted block meta"), "{err}");
}

#[test]
fn a_second_open_of_a_held_data_dir_is_locked() {
    let mut t = TempStorage::new();
    let err = regolith_storage::Storage::open(t.config.clone())
        .err()
        .expect("a second open while the first is held must fail");
    assert!(err.is_locked(), "{err:?}");
    assert!(!StorageError::Timeout.is_locked());
    t.reopen();
}
