//! Data-dir layout 0.1 → 0.2 (block handles carry their whole id): a data dir written in layout 0.1 is read
//! as it is by a read-only open, migrated by the first writable open, resumed after a crash in the middle.

mod common;

use common::*;
use regolith_formats::{BlockId, BlockKey, HashBytes};
use regolith_storage::tables::{
    BlockHandles, BlockIds, NameKey, RawBytes, State, StoredBlockKey, StoredHash,
};
use regolith_storage::{BlockFlags, MetaSnapshot, MigrationStats, Storage, StorageError};

const DB_VERSION: NameKey = NameKey("db_version");

/// Every stored block id with its handle row's raw bytes.
fn handle_rows(s: &Storage) -> Vec<(BlockId, Vec<u8>)> {
    let db = s.db();
    s.handles()
        .iter_block_ids_from(BlockKey([0; 48]))
        .map(|id| {
            let id = id.unwrap();
            let raw = db
                .get_raw_value::<BlockHandles>(&StoredHash(id.root_hash))
                .unwrap()
                .unwrap();
            (id, raw)
        })
        .collect()
}

/// Rewrites `ids`' handle rows as layout 0.1 wrote them (the 12-byte meta alone) and marks the data dir 0.1.0.
fn write_layout_0_1(s: &Storage, ids: &[BlockId]) {
    let db = s.db();
    for id in ids {
        let raw = db
            .get_raw_value::<BlockHandles>(&StoredHash(id.root_hash))
            .unwrap()
            .unwrap();
        assert_eq!(
            raw.len(),
            60,
            "the current layout writes meta ‖ short id ‖ file hash"
        );
        assert_eq!(&raw[12..28], &BlockKey::of(id).0[..16]);
        assert_eq!(&raw[28..], &id.file_hash.0[..]);
        db.put_raw_value::<BlockHandles>(&StoredHash(id.root_hash), &raw[..12])
            .unwrap();
    }
    db.put::<State>(&DB_VERSION, &RawBytes(vec![0, 1, 0]))
        .unwrap();
}

fn db_version(s: &Storage) -> Vec<u8> {
    s.db().get::<State>(&DB_VERSION).unwrap().unwrap().0
}

fn meta_of(raw: &[u8]) -> MetaSnapshot {
    MetaSnapshot::decode(&raw[..12]).unwrap()
}

#[tokio::test]
async fn a_layout_0_1_data_dir_is_migrated_at_open_and_loads_the_same_handles() {
    let mut t = TempStorage::new();
    let blocks = ingest_archive_1(t.s()).await;
    assert_eq!(db_version(t.s()), vec![0, 2, 0]);
    let ids: Vec<BlockId> = handle_rows(t.s()).into_iter().map(|(id, _)| id).collect();
    assert_eq!(ids.len(), blocks.len());
    write_layout_0_1(t.s(), &ids);
    // A merge operand waiting on a 0.1 row (a flag set just before the node stopped) is kept by the migration.
    let flagged = ids[3];
    t.s()
        .db()
        .merge_raw_value::<BlockHandles>(
            &StoredHash(flagged.root_hash),
            &MetaSnapshot {
                flags: BlockFlags::SKIP_STATES_GC,
                ref_by_mc_seqno: 0,
                gen_utime: 0,
            }
            .encode(),
        )
        .unwrap();
    let before: Vec<MetaSnapshot> = handle_rows(t.s()).iter().map(|(_, r)| meta_of(r)).collect();
    assert!(before[3].flags.contains(BlockFlags::SKIP_STATES_GC));
    t.close();

    // Read-only (inspect beside a node that has not migrated yet): 0.1 rows load through block_ids, nothing is
    // written.
    {
        let ro = Storage::open_read_only(t.config.clone()).unwrap();
        assert_eq!(ro.open_stats().migration, None);
        assert_eq!(db_version(&ro), vec![0, 1, 0]);
        for (id, meta) in ids.iter().zip(&before) {
            let h = ro
                .handles()
                .load_handle(id)
                .unwrap()
                .expect("a 0.1 row loads");
            assert_eq!(h.meta().load(), *meta);
        }
        assert!(handle_rows(&ro).iter().all(|(_, raw)| raw.len() == 12));
    }

    let s = t.reopen();
    assert_eq!(
        s.open_stats().migration,
        Some(MigrationStats {
            blocks: ids.len() as u64,
            migrated: ids.len() as u64,
        })
    );
    assert_eq!(db_version(s), vec![0, 2, 0]);
    let after = handle_rows(s);
    for ((id, raw), meta) in after.iter().zip(&before) {
        assert_eq!(raw.len(), 60);
        assert_eq!(&raw[12..28], &BlockKey::of(id).0[..16]);
        assert_eq!(&raw[28..], &id.file_hash.0[..]);
        assert_eq!(meta_of(raw), *meta, "{id}: the meta is kept as it was");
        let h = s.handles().load_handle(id).unwrap().unwrap();
        assert_eq!(h.meta().load(), *meta);
        assert!(h.has_all_block_parts());
        let mut wrong = *id;
        wrong.file_hash = HashBytes([0xee; 32]);
        assert!(s.handles().load_handle(&wrong).unwrap().is_none());
        let wrong = BlockId {
            seqno: id.seqno + 1,
            ..*id
        };
        assert!(s.handles().load_handle(&wrong).unwrap().is_none());
    }
    // The blocks read as before the migration.
    let b = &blocks[5];
    let h = s.handles().load_handle(&b.id).unwrap().unwrap();
    assert_eq!(
        s.components().load_block_data_raw(&h).await.unwrap(),
        b.data
    );
    assert_eq!(s.open_stats().consistency.dangling_ids_count, 0);

    // A migrated row alone loads its handle: block_ids is no longer read for it.
    s.db()
        .delete::<BlockIds>(&StoredBlockKey(BlockKey::of(&ids[7])))
        .unwrap();
    assert!(s.handles().load_handle(&ids[7]).unwrap().is_some());

    let s = t.reopen();
    assert_eq!(s.open_stats().migration, None, "migrated once");
}

#[tokio::test]
async fn a_migration_cut_by_a_crash_goes_on_at_the_next_open() {
    let mut t = TempStorage::new();
    ingest_archive_1(t.s()).await;
    let ids: Vec<BlockId> = handle_rows(t.s()).into_iter().map(|(id, _)| id).collect();
    // As a crash leaves it: the batches of the first half written, the version still 0.1.
    let (_, second_half) = ids.split_at(ids.len() / 2);
    write_layout_0_1(t.s(), second_half);
    t.close();
    let s = t.reopen();
    assert_eq!(
        s.open_stats().migration,
        Some(MigrationStats {
            blocks: ids.len() as u64,
            migrated: second_half.len() as u64,
        })
    );
    assert!(handle_rows(s).iter().all(|(_, raw)| raw.len() == 60));
    for id in &ids {
        assert!(s.handles().load_handle(id).unwrap().is_some());
    }
}

#[test]
fn a_legacy_row_without_its_block_id_is_no_handle() {
    // 0.1 semantics kept for a row without the rest of the id: both rows, or no handle.
    let t = TempStorage::new();
    let id = shard_id(5);
    t.s().handles().create_or_load_handle(&id, meta(1)).unwrap();
    let raw = t
        .s()
        .db()
        .get_raw_value::<BlockHandles>(&StoredHash(id.root_hash))
        .unwrap()
        .unwrap();
    t.s()
        .db()
        .put_raw_value::<BlockHandles>(&StoredHash(id.root_hash), &raw[..12])
        .unwrap();
    t.s()
        .db()
        .delete::<BlockIds>(&StoredBlockKey(BlockKey::of(&id)))
        .unwrap();
    assert!(t.s().handles().load_handle(&id).unwrap().is_none());
}

#[test]
fn a_data_dir_of_an_unknown_layout_is_refused() {
    for version in [[0u8, 3, 0], [1, 0, 0], [0, 0, 9]] {
        let mut t = TempStorage::new();
        t.s()
            .db()
            .put::<State>(&DB_VERSION, &RawBytes(version.to_vec()))
            .unwrap();
        t.close();
        for opened in [
            Storage::open_read_only(t.config.clone()),
            Storage::open(t.config.clone()),
        ] {
            assert!(
                matches!(&opened, Err(StorageError::UnsupportedVersion { found, .. }) if *found == version),
                "{version:?}: {:?}",
                opened.err()
            );
        }
    }
}
