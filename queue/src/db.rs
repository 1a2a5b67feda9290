//! The `int_queue` RocksDB (§4) through the typed key/value layer: opening, owned snapshots (readers and
//! iterators read all their data from one snapshot, §9), and fail points.

use std::path::Path;

use rocksdb::Cache;
use regolith_kv::{Db, DbOptions, FailPoint};

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

/// The queue database with typed tables.
pub struct QueueDb {
    db: Db<QueueTables>,
    /// Failure injection for tests.
    pub fail_points: FailPoints,
}

impl std::ops::Deref for QueueDb {
    type Target = Db<QueueTables>;

    fn deref(&self) -> &Db<QueueTables> {
        &self.db
    }
}

impl AsRef<Db<QueueTables>> for QueueDb {
    fn as_ref(&self) -> &Db<QueueTables> {
        &self.db
    }
}

/// A snapshot of the queue database that keeps it alive.
pub type QueueSnapshot = regolith_kv::Snapshot<QueueTables, QueueDb>;

/// An iterator over one table that owns its snapshot.
pub type OwnedIter<T> = regolith_kv::OwnedIter<T, QueueDb>;

impl QueueDb {
    /// Opens (creating if missing) the database at `path` with its seven families plus `default`.
    pub fn open(path: &Path) -> Result<Self> {
        let cache = Cache::new_lru_cache(BLOCK_CACHE_BYTES);
        Ok(Self {
            db: Db::open(path, &cache, DbOptions::default())?,
            fail_points: FailPoints::default(),
        })
    }

    /// Opens an existing database read-only (tools beside a running node); writes fail.
    pub fn open_read_only(path: &Path) -> Result<Self> {
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
        Ok(Self {
            db: Db::open(path, &cache, options)?,
            fail_points: FailPoints::default(),
        })
    }

    /// Every (table, key, value) of every table, for byte-level comparisons in tests and tools.
    pub fn dump(&self) -> Vec<(String, Vec<u8>, Vec<u8>)> {
        self.db
            .raw_rows()
            .unwrap_or_default()
            .into_iter()
            .map(|row| (row.table.to_string(), row.key, row.value))
            .collect()
    }
}
