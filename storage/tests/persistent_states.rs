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

#[tokio::test]
async fn a_split_state_is_recorded_with_its_parts_and_a_crash_before_the_root_leaves_no_state() {
    use regolith_formats::persistent_state::{SplitManifest, StatePart};
    let mut t = TempStorage::new();
    let id = shard_id(40);
    let (left, right) = (0x4000_0000_0000_0000u64, 0xc000_0000_0000_0000u64);
    {
        let s = t.s();
        s.handles().create_or_load_handle(&id, meta(40)).unwrap();
        // A crash right after the first part's rename: no record, nothing served.
        s.db().fail_points.state_after_rename.arm();
        assert!(s
            .persistent_states()
            .store_split(&id, 1, b"root", &[(left, b"left part"), (right, b"right")])
            .is_err());
        assert_eq!(
            s.persistent_states().get(&id, StateKind::Shard).unwrap(),
            None
        );
    }
    {
        let s = t.reopen();
        assert_eq!(s.open_stats().states.indexed_files, 0);
        assert_eq!(
            s.persistent_states().get(&id, StateKind::Shard).unwrap(),
            None
        );
        // Invalid parts are refused before anything is written.
        assert!(s
            .persistent_states()
            .store_split(&id, 1, b"root", &[(0x2000_0000_0000_0000, b"x")])
            .is_err());
        let record = s
            .persistent_states()
            .store_split(&id, 1, b"root", &[(right, b"right"), (left, b"left part")])
            .unwrap();
        assert_eq!(record.split_depth, 1);
        assert_eq!(
            record
                .parts
                .iter()
                .map(|p| (p.prefix, p.size))
                .collect::<Vec<_>>(),
            [(left, 9), (right, 5)]
        );
        assert!(s
            .handles()
            .load_handle(&id)
            .unwrap()
            .unwrap()
            .has_persistent_shard_state());
    }
    let s = t.reopen();
    let states = s.persistent_states();
    let record = states.get(&id, StateKind::Shard).unwrap().unwrap();
    assert_eq!(record.size, 4);
    let read = |part| std::fs::read(states.file_path(&record, part).unwrap()).unwrap();
    assert_eq!(read(StatePart::SplitRoot), b"root");
    assert_eq!(read(StatePart::SplitPart(left)), b"left part");
    assert_eq!(read(StatePart::SplitPart(right)), b"right");
    assert!(states.file_path(&record, StatePart::Unsplit).is_none());
    let manifest = std::fs::read(states.dir().join(
        regolith_formats::persistent_state::manifest_object_name(&id),
    ))
    .unwrap();
    assert_eq!(
        std::str::from_utf8(&manifest).unwrap(),
        r#"{"version":1,"split_depth":1,"parts":["4000000000000000","c000000000000000"]}"#
    );
    assert_eq!(
        SplitManifest::parse(&manifest, &id).unwrap(),
        (1, vec![left, right])
    );
    assert!(temp_files(states.dir()).is_empty());
}
