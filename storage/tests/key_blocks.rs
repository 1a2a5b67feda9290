//! storage.md §12 scenarios 11–13: the key-block index.

mod common;

use common::*;
use regolith_formats::{BlockId, HashBytes, ShardIdent};
use regolith_storage::tables::{KeyBlocks, SeqnoKey, StoredBlockId};
use regolith_storage::{KeyBlocksDirection, NewBlockMeta, Storage, StorageError};
use regolith_test_support::fixture_bytes;
use tycho_types::boc::Boc;

const UTIMES: [(u32, u32); 4] = [
    (0, 1737727446),
    (10, 1737727546),
    (20, 1737752576),
    (30, 1737752586),
];

fn with_key_blocks() -> TempStorage {
    let t = TempStorage::new();
    for (seqno, utime) in UTIMES {
        let (h, _) = t
            .s()
            .handles()
            .create_or_load_handle(
                &mc_id(seqno),
                NewBlockMeta {
                    is_key_block: true,
                    gen_utime: utime,
                    ref_by_mc_seqno: seqno,
                },
            )
            .unwrap();
        assert!(h.is_key_block());
    }
    t
}

fn seqno_of(
    s: &Storage,
    f: impl FnOnce(&Storage) -> Option<regolith_storage::BlockHandle>,
) -> Option<u32> {
    f(s).map(|h| h.id().seqno)
}

#[test]
fn s11_key_block_lookups() {
    let t = with_key_blocks();
    let s = t.s();
    let h = s.handles();
    let prev = |x| seqno_of(s, |_| h.find_prev_key_block(x).unwrap());
    assert_eq!(prev(0), None);
    assert_eq!(prev(1), Some(0));
    assert_eq!(prev(10), Some(0));
    assert_eq!(prev(11), Some(10));
    assert_eq!(prev(31), Some(30));
    assert_eq!(prev(u32::MAX), Some(30));
    assert_eq!(h.find_last_key_block().unwrap().unwrap().id().seqno, 30);
    assert_eq!(h.load_key_block_handle(20).unwrap().unwrap().id().seqno, 20);
    assert!(h.load_key_block_handle(21).unwrap().is_none());

    let iter = |d| -> Vec<u32> { h.key_blocks_iter(d).map(|r| r.unwrap().seqno).collect() };
    assert_eq!(iter(KeyBlocksDirection::ForwardFrom(10)), vec![10, 20, 30]);
    assert_eq!(iter(KeyBlocksDirection::ForwardFrom(11)), vec![20, 30]);
    assert_eq!(iter(KeyBlocksDirection::Backward), vec![30, 20, 10, 0]);
}

#[test]
fn s12_persistent_key_blocks() {
    let t = with_key_blocks();
    let h = t.s().handles();
    let p = |x| {
        h.find_prev_persistent_key_block(x)
            .unwrap()
            .map(|h| h.id().seqno)
    };
    assert_eq!(p(31), Some(20));
    assert_eq!(p(21), Some(20));
    for x in [20, 11, 1, 0] {
        assert_eq!(p(x), None, "{x}");
    }
    // The test switch makes every key block persistent (except the oldest).
    let t = TempStorage::with_config(|c| c.each_key_block_is_persistent = true);
    for (seqno, utime) in UTIMES {
        t.s()
            .handles()
            .create_or_load_handle(
                &mc_id(seqno),
                NewBlockMeta {
                    is_key_block: true,
                    gen_utime: utime,
                    ref_by_mc_seqno: seqno,
                },
            )
            .unwrap();
    }
    let p = |x| {
        t.s()
            .handles()
            .find_prev_persistent_key_block(x)
            .unwrap()
            .map(|h| h.id().seqno)
    };
    assert_eq!(p(31), Some(30));
    assert_eq!(p(11), Some(10));
    assert_eq!(p(10), None);
}

#[test]
fn key_block_index_errors_are_surfaced() {
    let t = with_key_blocks();
    let s = t.s();
    // An indexed key block without handle rows is an error, never a silent None.
    let ghost = mc_id(40);
    s.db()
        .put::<KeyBlocks>(&SeqnoKey(40), &StoredBlockId(ghost))
        .unwrap();
    assert!(matches!(
        s.handles().load_key_block_handle(40),
        Err(StorageError::Inconsistent(_))
    ));
    assert!(matches!(
        s.handles().find_last_key_block(),
        Err(StorageError::Inconsistent(_))
    ));
    // A corrupted entry surfaces as an error item.
    s.db()
        .put_raw_value::<KeyBlocks>(&SeqnoKey(50), &[1u8; 79])
        .unwrap();
    let items: Vec<_> = s
        .handles()
        .key_blocks_iter(KeyBlocksDirection::ForwardFrom(45))
        .collect();
    assert_eq!(items.len(), 1);
    assert!(items[0].is_err());
}

#[tokio::test]
async fn s13_zerostate() {
    let boc = fixture_bytes("zerostate.boc");
    let root = Boc::decode(&boc).unwrap();
    let file_hash = HashBytes(*blake3::hash(&boc).as_bytes());
    assert_eq!(
        file_hash.to_string(),
        "1172c1f335257481cd1fcd0e4778a68cdefc39f0c9c1633ec6e43cca6819eb1a"
    );
    let id = BlockId {
        shard: ShardIdent::MASTERCHAIN,
        seqno: 0,
        root_hash: *root.repr_hash(),
        file_hash,
    };
    let mut t = TempStorage::new();
    let s = t.s();
    s.handles()
        .create_or_load_handle(&id, NewBlockMeta::zero_state(1737727446, true))
        .unwrap();
    assert_eq!(
        s.db().get::<KeyBlocks>(&SeqnoKey(0)).unwrap(),
        Some(StoredBlockId(id))
    );
    assert_eq!(
        s.handles().find_last_key_block().unwrap().unwrap().id(),
        &id
    );
    assert_eq!(
        s.handles().find_prev_key_block(1).unwrap().unwrap().id(),
        &id
    );
    assert!(s
        .handles()
        .find_prev_persistent_key_block(u32::MAX)
        .unwrap()
        .is_none());

    for target in [1, 100, u32::MAX] {
        s.remove_blocks(target, vec![]).await.unwrap();
        assert!(
            s.handles().load_handle(&id).unwrap().is_some(),
            "GC keeps the zerostate at {target}"
        );
    }
    s.node_state()
        .store_zerostate_proof(b"proof bytes")
        .unwrap();
    let s = t.reopen();
    assert_eq!(
        s.node_state().load_zerostate_proof().unwrap().unwrap(),
        b"proof bytes"
    );
    assert!(s.handles().load_handle(&id).unwrap().is_some());
}
