//! The `int_queue` RocksDB: opening with per-table options (§4), typed access helpers, owned snapshots and
//! owned iterators (readers and iterators read all their data from one snapshot, §9), and fail points.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rocksdb::{
    BlockBasedOptions, Cache, ColumnFamily, ColumnFamilyDescriptor, DBCompressionType,
    DBRawIteratorWithThreadMode, Options, ReadOptions, SnapshotWithThreadMode, WriteBatch, DB,
};

use crate::error::{QueueError, Result};
use crate::tables::{self, Codec, Table};

/// Size of the block cache shared by the bulk families.
const BLOCK_CACHE_BYTES: usize = 256 << 20;
/// Write buffer size of the bulk families.
const WRITE_BUFFER_BYTES: usize = 256 << 20;
/// Minimum blob size of message bodies.
const MIN_BLOB_BYTES: u64 = 32 << 10;

/// Points where tests can inject a failure: the next operation at that point fails once.
#[derive(Debug, Default)]
pub struct FailPoints {
    /// The next diff write (`PendingDiff::write`) fails.
    pub apply_batch: AtomicBool,
    /// The next commit batch fails.
    pub commit_batch: AtomicBool,
    /// The next delete-primitive batch (clear or GC) fails.
    pub delete_batch: AtomicBool,
    /// The next import batch fails.
    pub import_batch: AtomicBool,
    /// The next GC tick panics.
    pub gc_tick_panic: AtomicBool,
}

impl FailPoints {
    pub(crate) fn hit(flag: &AtomicBool, name: &'static str) -> Result<()> {
        if flag.swap(false, Ordering::AcqRel) {
            return Err(QueueError::Injected(name));
        }
        Ok(())
    }
}

/// The queue database with typed tables.
pub struct QueueDb {
    db: DB,
    path: PathBuf,
    /// Failure injection for tests.
    pub fail_points: FailPoints,
}

fn table_options(name: &str, cache: &Cache) -> Options {
    let mut opts = Options::default();
    match name {
        tables::ShardIntMessages::NAME
        | tables::IntMsgStatistics::NAME
        | tables::IntMsgDiffsTail::NAME
        | tables::IntMsgDiffInfo::NAME => {
            let mut block = BlockBasedOptions::default();
            block.set_block_cache(cache);
            opts.set_block_based_table_factory(&block);
            opts.set_compression_type(DBCompressionType::None);
            opts.set_write_buffer_size(WRITE_BUFFER_BYTES);
            opts.set_max_write_buffer_number(2);
            // Every range delete is followed by an explicit range compaction instead.
            opts.set_disable_auto_compactions(true);
            if name == tables::ShardIntMessages::NAME {
                opts.set_enable_blob_files(true);
                opts.set_min_blob_size(MIN_BLOB_BYTES);
                opts.set_enable_blob_gc(true);
                opts.set_blob_compression_type(DBCompressionType::None);
            }
        }
        _ => {
            let mut block = BlockBasedOptions::default();
            block.set_block_cache(cache);
            block.set_bloom_filter(10.0, false);
            block.set_whole_key_filtering(true);
            opts.set_block_based_table_factory(&block);
            opts.set_memtable_whole_key_filtering(true);
            opts.set_memtable_prefix_bloom_ratio(0.1);
        }
    }
    opts
}

impl QueueDb {
    /// Opens (creating if missing) the database at `path` with exactly the six families plus `default`.
    pub fn open(path: &Path) -> Result<Self> {
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.create_missing_column_families(true);
        opts.set_max_background_jobs(2);
        opts.set_keep_log_file_num(2);
        let cache = Cache::new_lru_cache(BLOCK_CACHE_BYTES);
        let cfs = tables::ALL_TABLES
            .iter()
            .map(|name| ColumnFamilyDescriptor::new(*name, table_options(name, &cache)));
        let db = DB::open_cf_descriptors(&opts, path, cfs)
            .map_err(QueueError::db(format!("opening {}", path.display())))?;
        Ok(Self {
            db,
            path: path.to_path_buf(),
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
        let opts = Options::default();
        let cache = Cache::new_lru_cache(16 << 20);
        let cfs = tables::ALL_TABLES
            .iter()
            .map(|name| ColumnFamilyDescriptor::new(*name, table_options(name, &cache)));
        let db = DB::open_cf_descriptors_read_only(&opts, path, cfs, false).map_err(
            QueueError::db(format!("opening {} read-only", path.display())),
        )?;
        Ok(Self {
            db,
            path: path.to_path_buf(),
            fail_points: FailPoints::default(),
        })
    }

    /// The database directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The raw RocksDB handle (tests and tools).
    pub fn raw(&self) -> &DB {
        &self.db
    }

    /// The column family of a table.
    pub fn cf<T: Table>(&self) -> &ColumnFamily {
        self.cf_by_name(T::NAME)
    }

    pub(crate) fn cf_by_name(&self, name: &str) -> &ColumnFamily {
        // Every table is created at open, so the lookup cannot fail.
        self.db
            .cf_handle(name)
            .expect("column family is created at open")
    }

    /// Adds a put to a batch.
    pub fn batch_put<T: Table>(&self, batch: &mut WriteBatch, key: &T::Key, value: &T::Value) {
        batch.put_cf(self.cf::<T>(), key.encode(), value.encode());
    }

    /// Commits a batch atomically.
    pub fn write(&self, batch: WriteBatch, context: &str) -> Result<()> {
        self.db
            .write(batch)
            .map_err(QueueError::db(context.to_string()))
    }

    /// Flushes the memtables of the given tables.
    pub fn flush_tables(&self, names: &[&str]) -> Result<()> {
        for name in names {
            self.db
                .flush_cf(self.cf_by_name(name))
                .map_err(QueueError::db(format!("flushing {name}")))?;
        }
        Ok(())
    }

    /// Compacts a raw key range of a table.
    pub(crate) fn compact_range(&self, name: &str, from: &[u8], to: &[u8]) {
        self.db
            .compact_range_cf(self.cf_by_name(name), Some(from), Some(to));
    }

    /// Every (key, value) of every family, for byte-level comparisons in tests and tools.
    pub fn dump(&self) -> Vec<(String, Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        for name in std::iter::once("default").chain(tables::ALL_TABLES.iter().copied()) {
            let Some(cf) = self.db.cf_handle(name) else {
                continue;
            };
            let mut it = self.db.raw_iterator_cf(cf);
            it.seek_to_first();
            while let (Some(k), Some(v)) = (it.key(), it.value()) {
                out.push((name.to_string(), k.to_vec(), v.to_vec()));
                it.next();
            }
        }
        out
    }
}

/// A RocksDB snapshot that keeps its database alive.
pub struct QueueSnapshot {
    // Field order matters: the snapshot is released before the database reference is dropped.
    snapshot: SnapshotWithThreadMode<'static, DB>,
    db: Arc<QueueDb>,
}

impl QueueSnapshot {
    /// Takes a snapshot of the current state.
    pub fn new(db: Arc<QueueDb>) -> Self {
        let snapshot = db.db.snapshot();
        // SAFETY: the snapshot borrows `db.db`, which lives inside the `Arc` stored next to it and is
        // therefore alive (and at a stable address) until after the snapshot is dropped (field order).
        let snapshot = unsafe {
            std::mem::transmute::<SnapshotWithThreadMode<'_, DB>, SnapshotWithThreadMode<'static, DB>>(
                snapshot,
            )
        };
        Self { snapshot, db }
    }

    /// The database this snapshot belongs to.
    pub fn db(&self) -> &Arc<QueueDb> {
        &self.db
    }

    fn read_options(&self) -> ReadOptions {
        let mut opts = ReadOptions::default();
        opts.set_snapshot(&self.snapshot);
        opts
    }

    /// Point read of a typed value.
    pub fn get<T: Table>(&self, key: &T::Key) -> Result<Option<T::Value>> {
        let raw = self
            .db
            .db
            .get_pinned_cf_opt(self.db.cf::<T>(), key.encode(), &self.read_options())
            .map_err(QueueError::db(format!("reading {}", T::NAME)))?;
        raw.map(|v| T::Value::decode(&v)).transpose()
    }

    /// Whether a key exists.
    pub fn contains<T: Table>(&self, key: &T::Key) -> Result<bool> {
        Ok(self
            .db
            .db
            .get_pinned_cf_opt(self.db.cf::<T>(), key.encode(), &self.read_options())
            .map_err(QueueError::db(format!("reading {}", T::NAME)))?
            .is_some())
    }

    /// A raw iterator over `[from, to)` of a table (`to = None`: to the end).
    pub fn iter<T: Table>(
        &self,
        from: &[u8],
        to: Option<&[u8]>,
    ) -> DBRawIteratorWithThreadMode<'_, DB> {
        let mut opts = self.read_options();
        opts.set_iterate_lower_bound(from.to_vec());
        if let Some(to) = to {
            opts.set_iterate_upper_bound(to.to_vec());
        }
        let mut it = self.db.db.raw_iterator_cf_opt(self.db.cf::<T>(), opts);
        it.seek(from);
        it
    }

    /// A raw iterator over a whole family, by name (tools that walk every table).
    pub(crate) fn iter_by_name(&self, name: &str) -> DBRawIteratorWithThreadMode<'_, DB> {
        let mut it = self
            .db
            .db
            .raw_iterator_cf_opt(self.db.cf_by_name(name), self.read_options());
        it.seek_to_first();
        it
    }

    /// A raw iterator positioned at the last key of `[from, to)`.
    pub fn iter_last<T: Table>(
        &self,
        from: &[u8],
        to: &[u8],
    ) -> DBRawIteratorWithThreadMode<'_, DB> {
        let mut opts = self.read_options();
        opts.set_iterate_lower_bound(from.to_vec());
        opts.set_iterate_upper_bound(to.to_vec());
        let mut it = self.db.db.raw_iterator_cf_opt(self.db.cf::<T>(), opts);
        it.seek_to_last();
        it
    }
}

/// A raw iterator over `[from, to)` of one table that owns its snapshot.
pub struct OwnedIter {
    // Field order matters: the iterator is dropped before the snapshot it reads.
    iter: DBRawIteratorWithThreadMode<'static, DB>,
    _snapshot: Arc<QueueSnapshot>,
}

impl OwnedIter {
    /// Opens an iterator on a snapshot.
    pub fn new<T: Table>(snapshot: Arc<QueueSnapshot>, from: &[u8], to: &[u8]) -> Self {
        let mut opts = snapshot.read_options();
        opts.set_iterate_lower_bound(from.to_vec());
        opts.set_iterate_upper_bound(to.to_vec());
        opts.set_readahead_size(1 << 20);
        let iter = snapshot
            .db
            .db
            .raw_iterator_cf_opt(snapshot.db.cf::<T>(), opts);
        // SAFETY: the iterator borrows the database and the snapshot, both owned (through `Arc`s) by the
        // `_snapshot` field, which is dropped after the iterator (field order).
        let mut iter = unsafe {
            std::mem::transmute::<
                DBRawIteratorWithThreadMode<'_, DB>,
                DBRawIteratorWithThreadMode<'static, DB>,
            >(iter)
        };
        iter.seek(from);
        Self {
            iter,
            _snapshot: snapshot,
        }
    }

    /// The current (key, value), if valid.
    pub fn item(&self) -> Option<(&[u8], &[u8])> {
        self.iter.item()
    }

    /// Moves to the next entry.
    pub fn advance(&mut self) {
        self.iter.next();
    }

    /// The iterator's error, if it stopped because of one.
    pub fn status(&self) -> Result<()> {
        self.iter
            .status()
            .map_err(QueueError::db("iterating messages"))
    }
}

/// Surfaces a raw iterator's error after it stops being valid.
pub(crate) fn iter_status(it: &DBRawIteratorWithThreadMode<'_, DB>, context: &str) -> Result<()> {
    it.status().map_err(QueueError::db(context.to_string()))
}
