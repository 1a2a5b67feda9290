//! The persistent-state index: a state exists for readers only once recorded, a write interrupted at any
//! step leaves no record (and the next open repairs what it can), records survive a reopen, and the handle
//! flag is set in the same batch as the record.

mod common;

use common::*;
use regolith_storage::{KvError, StateKind, StorageError};

fn temp_files(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.ends_with(".tmp"))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn a_recorded_state_survives_a_reopen_and_sets_the_handle_flag() {
    let mut t = TempStorage::new();
    let id = mc_id(10);
    {
        let s = t.s();
        let (handle, _) = s.handles().create_or_load_handle(&id, meta(10)).unwrap();
        let record = s
            .persistent_states()
            .store(&id, StateKind::Shard, b"compressed state")
            .unwrap();
        assert_eq!(record.size, 16);
        assert!(handle.has_persistent_shard_state());
        assert!(!handle.has_persistent_queue_state());
        s.persistent_states()
            .store(&id, StateKind::Queue, b"queue")
            .unwrap();
        assert!(handle.has_persistent_queue_state());
    }
    let s = t.reopen();
    let handle = s.handles().load_handle(&id).unwrap().unwrap();
    assert!(handle.has_persistent_shard_state() && handle.has_persistent_queue_state());
    let states = s.persistent_states();
    assert_eq!(states.list().unwrap().len(), 2);
    let shard = states.get(&id, StateKind::Shard).unwrap().unwrap();
    assert_eq!(
        std::fs::read(states.dir().join(&shard.file)).unwrap(),
        b"compressed state"
    );
    assert_eq!(s.open_stats().states.recorded, 2);
    assert_eq!(s.open_stats().states.indexed_files, 0);
    // another file hash is another block
    let other = regolith_formats::BlockId {
        file_hash: regolith_formats::HashBytes([0xee; 32]),
        ..id
    };
    assert_eq!(states.get(&other, StateKind::Shard).unwrap(), None);
}

#[tokio::test]
async fn a_crash_after_the_temp_file_leaves_no_state_and_the_temp_file_is_removed() {
    let mut t = TempStorage::new();
    let id = mc_id(20);
    {
        let s = t.s();
        s.handles().create_or_load_handle(&id, meta(20)).unwrap();
        s.db().fail_points.state_after_tmp.arm();
        let err = s
            .persistent_states()
            .store(&id, StateKind::Shard, b"state")
            .unwrap_err();
        assert!(
            matches!(err, StorageError::Kv(KvError::Injected(_))),
            "{err}"
        );
        assert_eq!(
            s.persistent_states().get(&id, StateKind::Shard).unwrap(),
            None
        );
        assert_eq!(temp_files(s.persistent_states().dir()).len(), 1);
    }
    let s = t.reopen();
    assert_eq!(s.open_stats().states.removed_temp_files, 1);
    assert!(temp_files(s.persistent_states().dir()).is_empty());
    assert_eq!(
        s.persistent_states().get(&id, StateKind::Shard).unwrap(),
        None
    );
    assert!(!s
        .handles()
        .load_handle(&id)
        .unwrap()
        .unwrap()
        .has_persistent_shard_state());
}

#[tokio::test]
async fn a_crash_after_the_rename_is_completed_by_indexing_at_open() {
    let mut t = TempStorage::new();
    let id = mc_id(30);
    {
        let s = t.s();
        s.handles().create_or_load_handle(&id, meta(30)).unwrap();
        s.db().fail_points.state_after_rename.arm();
        assert!(s
            .persistent_states()
            .store(&id, StateKind::Queue, b"queue state")
            .is_err());
        // the file is complete, but a file alone is not a state
        assert_eq!(
            s.persistent_states().get(&id, StateKind::Queue).unwrap(),
            None
        );
    }
    let s = t.reopen();
    assert_eq!(s.open_stats().states.indexed_files, 1);
    let record = s
        .persistent_states()
        .get(&id, StateKind::Queue)
        .unwrap()
        .unwrap();
    assert_eq!(record.size, 11);
    assert!(s
        .handles()
        .load_handle(&id)
        .unwrap()
        .unwrap()
        .has_persistent_queue_state());
    // a second open finds nothing left to do
    let s = t.reopen();
    assert_eq!(s.open_stats().states.indexed_files, 0);
    assert_eq!(s.open_stats().states.recorded, 1);
}

#[tokio::test]
async fn a_corrupted_record_is_an_error_not_a_missing_state() {
    use regolith_storage::tables::PersistentStates;
    let t = TempStorage::new();
    let s = t.s();
    let id = mc_id(40);
    s.persistent_states()
        .store(&id, StateKind::Shard, b"state")
        .unwrap();
    let key = regolith_storage::persistent_state::PersistentStateKey(
        regolith_formats::BlockKey::of(&id),
        StateKind::Shard,
    );
    s.db()
        .put_raw_value::<PersistentStates>(&key, &[1u8, 2, 3])
        .unwrap();
    assert!(matches!(
        s.persistent_states().get(&id, StateKind::Shard),
        Err(StorageError::Kv(KvError::Corruption { .. }))
    ));
    assert!(s.persistent_states().list().is_err());
}
