//! storage.md §12 scenarios 34–38: block GC.

mod common;

use common::*;
use regolith_formats::archive::ArchiveEntryType;
use regolith_formats::{BlockId, BlockKey, ShardIdent};
use regolith_storage::tables::{
    BlockComponents, BlockConnections, BlockHandles, BlockIds, ComponentKey, ConnectionKey,
    KeyBlocks, SeqnoKey, StoredBlockId, StoredBlockKey, StoredHash,
};
use regolith_storage::{BlockGcStats, Direction, KvError, NewBlockMeta, Storage, StorageError};
use regolith_test_support::archive_1_decompressed;

/// Creates a block with three component rows and Prev1/Next1 rows.
fn full_block(s: &Storage, id: &BlockId) -> regolith_storage::BlockHandle {
    let ref_mc = if id.is_masterchain() { id.seqno } else { 1 };
    let (h, _) = s.handles().create_or_load_handle(id, meta(ref_mc)).unwrap();
    for ty in ArchiveEntryType::ALL {
        s.components()
            .store_raw_component_for_tests(&h, ty, format!("{ty} of {id}").as_bytes())
            .unwrap();
    }
    let prev = BlockId {
        seqno: id.seqno.saturating_sub(1),
        ..*id
    };
    let next = BlockId {
        seqno: id.seqno + 1,
        ..*id
    };
    s.connections()
        .store_connection(&h, Direction::Prev1, &prev)
        .unwrap();
    s.connections()
        .store_connection(&h, Direction::Next1, &next)
        .unwrap();
    h
}

/// Which of the block's rows exist: (meta, id, components, connections).
fn rows(s: &Storage, id: &BlockId) -> (bool, bool, usize, usize) {
    let db = s.db();
    let key = BlockKey::of(id);
    let components = ArchiveEntryType::ALL
        .iter()
        .filter(|ty| {
            db.contains::<BlockComponents>(&ComponentKey(key, **ty))
                .unwrap()
        })
        .count();
    let connections = Direction::ALL
        .iter()
        .filter(|d| {
            db.contains::<BlockConnections>(&ConnectionKey(key, **d))
                .unwrap()
        })
        .count();
    (
        db.contains::<BlockHandles>(&StoredHash(id.root_hash))
            .unwrap(),
        db.contains::<BlockIds>(&StoredBlockKey(key)).unwrap(),
        components,
        connections,
    )
}

fn present(s: &Storage, id: &BlockId) -> bool {
    let r = rows(s, id);
    assert!(
        r == (true, true, 3, 2) || r == (false, false, 0, 0),
        "{id}: partial rows {r:?}"
    );
    r.0
}

fn grid(s: &Storage) -> (Vec<BlockId>, Vec<BlockId>) {
    let mc: Vec<_> = (0..=100).map(mc_id).collect();
    let sh: Vec<_> = (0..=100).map(shard_id).collect();
    for id in mc.iter().chain(&sh) {
        drop(full_block(s, id));
    }
    (mc, sh)
}

fn stats(mc: usize, total: usize) -> BlockGcStats {
    BlockGcStats {
        mc_blocks_removed: mc,
        total_blocks_removed: total,
    }
}

#[tokio::test]
async fn s34_remove_blocks() {
    let t = TempStorage::new();
    let s = t.s();
    let (mc, sh) = grid(s);
    let heights = |h| vec![(ShardIdent::BASECHAIN, h)];
    assert_eq!(
        s.remove_blocks(70, heights(50)).await.unwrap(),
        stats(69, 118)
    );
    for id in &mc {
        assert_eq!(present(s, id), id.seqno == 0 || id.seqno >= 70, "{id}");
    }
    for id in &sh {
        assert_eq!(present(s, id), id.seqno == 0 || id.seqno >= 50, "{id}");
    }
    assert_eq!(
        s.db().get::<KeyBlocks>(&SeqnoKey(0)).unwrap(),
        Some(StoredBlockId(mc_id(0)))
    );
    assert_eq!(s.remove_blocks(71, heights(51)).await.unwrap(), stats(1, 2));
    assert_eq!(s.remove_blocks(71, heights(51)).await.unwrap(), stats(0, 0));
    assert!(s.handles().load_handle(&mc_id(70)).unwrap().is_none());
    assert!(s.handles().load_handle(&mc_id(71)).unwrap().is_some());
}

#[tokio::test]
async fn s35_protection_flags() {
    let t = TempStorage::new();
    let s = t.s();
    let heights = vec![(ShardIdent::BASECHAIN, 100)];
    let h10 = full_block(s, &shard_id(10));
    let h11 = full_block(s, &shard_id(11));
    let h12 = full_block(s, &shard_id(12));
    s.handles().set_skip_blocks_gc(&h10).unwrap();
    s.handles().set_skip_states_gc(&h11).unwrap();
    s.handles().set_block_persistent(&h12).unwrap();
    drop((h11, h12));
    assert_eq!(
        s.remove_blocks(1000, heights.clone()).await.unwrap(),
        stats(0, 0)
    );
    for seqno in [10, 11, 12] {
        assert!(present(s, &shard_id(seqno)));
    }
    s.handles().set_skip_blocks_gc_finished(&h10).unwrap();
    drop(h10);
    assert_eq!(s.remove_blocks(1000, heights).await.unwrap(), stats(0, 1));
    assert!(!present(s, &shard_id(10)));
    assert!(present(s, &shard_id(11)) && present(s, &shard_id(12)));
}

#[tokio::test]
async fn s36_forks_sharing_a_seqno() {
    let t = TempStorage::new();
    let s = t.s();
    let a = synthetic_id(ShardIdent::BASECHAIN, 20, 1);
    let b = synthetic_id(ShardIdent::BASECHAIN, 20, 2);
    let ha = full_block(s, &a);
    drop(full_block(s, &b));
    s.handles().set_block_persistent(&ha).unwrap();
    drop(ha);
    s.remove_blocks(1000, vec![(ShardIdent::BASECHAIN, 100)])
        .await
        .unwrap();
    assert!(present(s, &a));
    assert!(!present(s, &b));
}

#[tokio::test]
async fn s37_failed_gc_batch() {
    let mut t = TempStorage::with_config(|c| {
        if let Some(gc) = c.blocks_gc.as_mut() {
            gc.max_blocks_per_batch = 10;
        }
    });
    let (mc, sh) = grid(t.s());
    t.s().db().fail_points.gc_batch.arm();
    let err = t
        .s()
        .remove_blocks(70, vec![(ShardIdent::BASECHAIN, 50)])
        .await;
    assert!(matches!(err, Err(StorageError::Kv(KvError::Injected(_)))));
    for id in mc.iter().chain(&sh) {
        assert!(present(t.s(), id), "{id} survives a failed GC batch");
    }
    let s = t.reopen();
    let c = s.open_stats().consistency;
    assert_eq!(
        (
            c.orphaned_flags_count,
            c.restored_flags_count,
            c.dangling_ids_count
        ),
        (0, 0, 0)
    );
    // A successful run afterwards removes in chunks.
    assert_eq!(
        s.remove_blocks(70, vec![(ShardIdent::BASECHAIN, 50)])
            .await
            .unwrap(),
        stats(69, 118)
    );
}

#[tokio::test]
async fn s38_gc_is_clamped_by_open_archives() {
    let t = TempStorage::new();
    let s = t.s();
    let blocks = ingest_archive_1(s).await;
    assert_eq!(s.remove_outdated_blocks(80).await.unwrap(), stats(0, 0));
    let (h, _) = s
        .handles()
        .create_or_load_handle(
            &mc_id(101),
            NewBlockMeta {
                is_key_block: false,
                gen_utime: 1,
                ref_by_mc_seqno: 101,
            },
        )
        .unwrap();
    s.archives().move_into_archive(&h, false).unwrap();
    s.archives().wait_for_archive_commit().await;
    assert_eq!(s.remove_outdated_blocks(80).await.unwrap(), stats(79, 84));
    for b in &blocks {
        let kept = if b.id.is_masterchain() {
            b.id.seqno >= 80
        } else {
            b.id.seqno >= 6
        };
        assert_eq!(
            s.handles().load_handle(&b.id).unwrap().is_some(),
            kept,
            "{}",
            b.id
        );
    }
    let chunk = s.archives().get_archive_chunk(1, 0).unwrap();
    assert_eq!(
        zstd::stream::decode_all(&chunk[..]).unwrap(),
        archive_1_decompressed()
    );
}

/// Issue 13 item 4: a handle row that does not decode is an error that stops the GC run, and nothing is
/// deleted (a short row used to read as "not protected" and the block went).
#[tokio::test]
async fn corrupt_handle_row_stops_gc_and_deletes_nothing() {
    let t = TempStorage::with_config(|c| {
        if let Some(gc) = c.blocks_gc.as_mut() {
            // Small chunks, so that a run that deleted before deciding every block would show.
            gc.max_blocks_per_batch = 10;
        }
    });
    let (mc, sh) = grid(t.s());
    // A protected shard block far into the key order, its meta row cut to 11 bytes.
    let victim = &sh[40];
    t.s()
        .handles()
        .set_block_persistent(&t.s().handles().load_handle(victim).unwrap().unwrap())
        .unwrap();
    let db = t.s().db();
    db.put_raw_value::<BlockHandles>(&StoredHash(victim.root_hash), &[0u8; 11])
        .unwrap();
    let err = t
        .s()
        .remove_blocks(70, vec![(ShardIdent::BASECHAIN, 50)])
        .await
        .unwrap_err();
    assert!(matches!(err, StorageError::Corruption { .. }), "{err}");
    assert!(err.to_string().contains("block_handles"), "{err}");
    let s = t.s();
    for id in mc.iter().chain(&sh) {
        if id == victim {
            continue;
        }
        assert!(
            present(s, id),
            "{id} is deleted by a GC run that met a corrupt row"
        );
    }
    assert!(s
        .db()
        .contains::<BlockIds>(&StoredBlockKey(BlockKey::of(victim)))
        .unwrap());
}
