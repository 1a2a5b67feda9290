//! The `int_queue` RocksDB (§4) through the typed key/value layer: opening, owned snapshots (readers and
//! iterators read all their data from one snapshot, §9), and fail points.

use std::path::Path;

use regolith_kv::{Database, DbOptions, FailPoint};
use rocksdb::Cache;

use crate::error::{QueueError, Result};
use crate::tables::QueueTables;

/// Size of the block cache shared by the bulk families.
const BLOCK_CACHE_BYTES: usize = 256 << 20;

/// Points where tests can inject a failure: the next operation at that point fails once (armed only with
/// the `test-utils` feature).
#[derive(Debug, Default)]
pub struct FailPoints {
    /// The next diff write (`PendingDiff::write`) fails.
    pub apply_batch: FailPoint,
    /// The next commit batch fails.
    pub commit_batch: FailPoint,
    /// The next delete-primitive batch (clear or GC) fails.
    pub delete_batch: FailPoint,
    /// The next import batch fails.
    pub import_batch: FailPoint,
    /// The next GC tick panics.
    pub gc_tick_panic: FailPoint,
}

/// The queue database with typed tables (dereferences to the [`regolith_kv::Db`]) and its fail points.
pub type QueueDb = Database<QueueTables, FailPoints>;

/// A snapshot of the queue database that keeps it alive.
pub type QueueSnapshot = regolith_kv::Snapshot<QueueTables, QueueDb>;

/// An iterator over one table that owns its snapshot.
pub type OwnedIter<T> = regolith_kv::OwnedIter<T, QueueDb>;

/// Opens (creating if missing) the database at `path` with its seven families plus `default`.
pub(crate) fn open(path: &Path) -> Result<QueueDb> {
    let cache = Cache::new_lru_cache(BLOCK_CACHE_BYTES);
    Ok(Database::open(path, &cache, DbOptions::default())?)
}

/// Opens an existing database read-only (tools beside a running node); writes fail.
pub(crate) fn open_read_only(path: &Path) -> Result<QueueDb> {
    if !path.join("CURRENT").is_file() {
        return Err(QueueError::Io {
            context: format!("opening the queue database {}", path.display()),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "no database there"),
        });
    }
    let cache = Cache::new_lru_cache(16 << 20);
    let options = DbOptions {
        read_only: true,
        ..DbOptions::default()
    };
    Ok(Database::open(path, &cache, options)?)
}
