//! The `core` RocksDB through the typed key/value layer: opening with the tables of
//! [`crate::tables::CoreTables`] (each with its options and merge operators), and fail points.

use std::path::Path;

use regolith_kv::{Database, DbOptions, FailPoint};

use crate::config::StorageConfig;
use crate::error::Result;
use crate::tables::CoreTables;

/// Points where tests can inject a failure: the next operation at that point fails once (armed only with
/// the `test-utils` feature).
#[derive(Debug, Default)]
pub struct FailPoints {
    /// The next component batch (§7.2 step 5) fails.
    pub component_batch: FailPoint,
    /// The next block-GC chunk batch fails.
    pub gc_batch: FailPoint,
    /// The next archive commit stops after the temp file is written and synced.
    pub archive_commit_after_tmp: FailPoint,
    /// The next persistent-state write stops after its temp file is written and synced.
    pub state_after_tmp: FailPoint,
    /// The next persistent-state write stops after the rename, before the record.
    pub state_after_rename: FailPoint,
}

/// The `core` database with typed tables (dereferences to the [`regolith_kv::Db`]) and its fail points.
pub type CoreDb = Database<CoreTables, FailPoints>;

/// The memtables of the `core` database together, bytes.
pub const WRITE_BUFFER_BUDGET: usize = 64 << 20;

/// Opens (creating if missing) the `core` database at `path`.
pub fn open(path: &Path, config: &StorageConfig, read_only: bool) -> Result<CoreDb> {
    let options = DbOptions {
        read_only,
        // `block_handles` has a hashed memtable, which takes inserts from one writer at a time.
        concurrent_memtable_write: false,
        // The memtables of all tables together: a sync writes components, handles and cells at once, and
        // each table's own limit (64 MiB by default) let them hold several times this (docs/benchmarks.md).
        write_buffer_budget: Some(WRITE_BUFFER_BUDGET),
        ..DbOptions::default()
    };
    Ok(Database::open(path, config, options)?)
}

/// The handle row of the block with `key` (`None` without a handle); a row that does not decode is a
/// corruption naming the block and the row.
pub(crate) fn handle_row(
    db: &CoreDb,
    key: &regolith_formats::BlockKey,
) -> Result<Option<crate::tables::StoredHandle>> {
    use regolith_kv::KvError;

    db.get::<crate::tables::BlockHandles>(&crate::tables::StoredHash(key.root_hash()))
        .map_err(|e| match e {
            KvError::Corruption {
                table,
                key: row_key,
                reason,
            } => crate::error::StorageError::Corruption {
                what: format!("block meta of {key:?} (row of {table}, key {row_key})"),
                reason,
            },
            other => other.into(),
        })
}
