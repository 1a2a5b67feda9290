//! A database directory is opened by one process at a time: a second open while the first is held fails
//! with the "locked" kind, and succeeds once the first is closed.

use regolith_kv::{tables, Db, DbOptions, KvError, RawBytes};

tables! {
    /// A one-table database.
    schema Example(());
    /// Raw rows.
    Rows: "rows", RawBytes => RawBytes;
}

#[test]
fn a_held_database_is_reported_as_locked() {
    let dir = tempfile::tempdir().unwrap();
    let first = Db::<Example>::open(dir.path(), &(), DbOptions::default()).unwrap();
    let second = Db::<Example>::open(dir.path(), &(), DbOptions::default());
    let err = second
        .err()
        .expect("a second open of a held database must fail");
    assert!(err.is_locked(), "{err:?}");
    assert!(matches!(err, KvError::Locked { .. }), "{err:?}");
    assert!(err.to_string().contains("opening"), "{err}");
    drop(first);
    Db::<Example>::open(dir.path(), &(), DbOptions::default()).unwrap();
}

#[test]
fn a_database_that_cannot_be_created_is_not_locked() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, b"not a directory").unwrap();
    let err = Db::<Example>::open(&file.join("db"), &(), DbOptions::default())
        .err()
        .expect("a database under a file cannot open");
    assert!(!err.is_locked(), "{err:?}");
}
