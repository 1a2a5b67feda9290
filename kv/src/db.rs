//! The typed database wrapper: opening with each table's options, point operations, batches, flushes.

use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use rocksdb::{
    ColumnFamily, ColumnFamilyDescriptor, DBPinnableSlice, OptimisticTransactionDB, Options,
    WriteBatch, WriteOptions, DB,
};

use crate::codec::{Codec, RawBytes};
use crate::error::{KvError, Result};
use crate::iter::{Iter, KeyRange, Keys};
use crate::table::{Schema, Table};

mod sealed {
    pub trait Sealed {}
    impl Sealed for rocksdb::DB {}
    impl Sealed for rocksdb::OptimisticTransactionDB {}
}

/// A RocksDB flavour the wrapper runs on: [`rocksdb::DB`] or [`rocksdb::OptimisticTransactionDB`].
pub trait Engine: sealed::Sealed + rocksdb::DBAccess + Send + Sync + Sized + 'static {
    #[doc(hidden)]
    fn open_engine(
        options: &Options,
        path: &Path,
        cfs: Vec<ColumnFamilyDescriptor>,
        read_only: bool,
    ) -> std::result::Result<Self, rocksdb::Error>;
    #[doc(hidden)]
    fn cf(&self, name: &str) -> Option<&ColumnFamily>;
    #[doc(hidden)]
    fn get_pinned(
        &self,
        cf: &ColumnFamily,
        key: &[u8],
    ) -> std::result::Result<Option<DBPinnableSlice<'_>>, rocksdb::Error>;
    #[doc(hidden)]
    fn put(
        &self,
        cf: &ColumnFamily,
        key: &[u8],
        value: &[u8],
        options: &WriteOptions,
    ) -> std::result::Result<(), rocksdb::Error>;
    #[doc(hidden)]
    fn merge(
        &self,
        cf: &ColumnFamily,
        key: &[u8],
        value: &[u8],
        options: &WriteOptions,
    ) -> std::result::Result<(), rocksdb::Error>;
    #[doc(hidden)]
    fn delete(
        &self,
        cf: &ColumnFamily,
        key: &[u8],
        options: &WriteOptions,
    ) -> std::result::Result<(), rocksdb::Error>;
    #[doc(hidden)]
    fn flush(&self, cf: &ColumnFamily) -> std::result::Result<(), rocksdb::Error>;
    #[doc(hidden)]
    fn sync_wal(&self) -> std::result::Result<(), rocksdb::Error>;
    #[doc(hidden)]
    fn raw_iter<'a>(
        &'a self,
        cf: &ColumnFamily,
        options: rocksdb::ReadOptions,
    ) -> rocksdb::DBRawIteratorWithThreadMode<'a, Self>;
}

macro_rules! engine_common {
    () => {
        fn cf(&self, name: &str) -> Option<&ColumnFamily> {
            self.cf_handle(name)
        }
        fn get_pinned(
            &self,
            cf: &ColumnFamily,
            key: &[u8],
        ) -> std::result::Result<Option<DBPinnableSlice<'_>>, rocksdb::Error> {
            self.get_pinned_cf(cf, key)
        }
        fn put(
            &self,
            cf: &ColumnFamily,
            key: &[u8],
            value: &[u8],
            options: &WriteOptions,
        ) -> std::result::Result<(), rocksdb::Error> {
            self.put_cf_opt(cf, key, value, options)
        }
        fn merge(
            &self,
            cf: &ColumnFamily,
            key: &[u8],
            value: &[u8],
            options: &WriteOptions,
        ) -> std::result::Result<(), rocksdb::Error> {
            self.merge_cf_opt(cf, key, value, options)
        }
        fn delete(
            &self,
            cf: &ColumnFamily,
            key: &[u8],
            options: &WriteOptions,
        ) -> std::result::Result<(), rocksdb::Error> {
            self.delete_cf_opt(cf, key, options)
        }
        fn flush(&self, cf: &ColumnFamily) -> std::result::Result<(), rocksdb::Error> {
            self.flush_cf(cf)
        }
        fn sync_wal(&self) -> std::result::Result<(), rocksdb::Error> {
            self.flush_wal(true)
        }
        fn raw_iter<'a>(
            &'a self,
            cf: &ColumnFamily,
            options: rocksdb::ReadOptions,
        ) -> rocksdb::DBRawIteratorWithThreadMode<'a, Self> {
            self.raw_iterator_cf_opt(cf, options)
        }
    };
}

impl Engine for DB {
    fn open_engine(
        options: &Options,
        path: &Path,
        cfs: Vec<ColumnFamilyDescriptor>,
        read_only: bool,
    ) -> std::result::Result<Self, rocksdb::Error> {
        if read_only {
            DB::open_cf_descriptors_read_only(options, path, cfs, false)
        } else {
            DB::open_cf_descriptors(options, path, cfs)
        }
    }
    engine_common!();
}

impl Engine for OptimisticTransactionDB {
    fn open_engine(
        options: &Options,
        path: &Path,
        cfs: Vec<ColumnFamilyDescriptor>,
        _read_only: bool,
    ) -> std::result::Result<Self, rocksdb::Error> {
        OptimisticTransactionDB::open_cf_descriptors(options, path, cfs)
    }
    engine_common!();
}

/// How a database is opened (the database is created if missing, with every table of its schema).
#[derive(Debug, Clone)]
pub struct DbOptions {
    /// Open read-only (plain databases only); writes fail.
    pub read_only: bool,
    /// Every write waits for the WAL fsync.
    pub sync: bool,
    /// Several writers may insert into a memtable at once; off for a schema with a table whose memtable
    /// takes one writer at a time (a hashed memtable).
    pub concurrent_memtable_write: bool,
    /// The memtables of every table together stay under this many bytes (RocksDB's
    /// `db_write_buffer_size`: past it, the largest memtable is flushed); `None`: each table's own limits only.
    pub write_buffer_budget: Option<usize>,
}

impl Default for DbOptions {
    fn default() -> Self {
        Self {
            read_only: false,
            sync: false,
            concurrent_memtable_write: true,
            write_buffer_budget: None,
        }
    }
}

/// A database whose writes can also go through optimistic transactions ([`Db::transaction`]).
pub type TransactionDb<S> = Db<S, OptimisticTransactionDB>;

#[cfg(feature = "test-utils")]
/// A raw row of some table, for byte-level comparisons in tests and tools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawRow {
    /// The table.
    pub table: &'static str,
    /// The key bytes.
    pub key: Vec<u8>,
    /// The value bytes.
    pub value: Vec<u8>,
}

/// A database of schema `S` with typed tables.
pub struct Db<S: Schema, E: Engine = DB> {
    pub(crate) db: E,
    path: PathBuf,
    write_options: WriteOptions,
    _schema: PhantomData<fn() -> S>,
}

impl<S: Schema, E: Engine> Db<S, E> {
    /// Opens (creating if missing) the database at `path` with every table of `S`, each with its options.
    pub fn open(path: &Path, config: &S::Config, options: DbOptions) -> Result<Self> {
        let DbOptions {
            read_only,
            sync,
            concurrent_memtable_write,
            write_buffer_budget,
        } = options;
        let mut db_options = Options::default();
        db_options.set_max_background_jobs(2);
        db_options.set_keep_log_file_num(2);
        db_options.set_allow_concurrent_memtable_write(concurrent_memtable_write);
        db_options.create_if_missing(true);
        db_options.create_missing_column_families(true);
        if let Some(budget) = write_buffer_budget {
            db_options.set_db_write_buffer_size(budget);
        }
        let cfs = S::TABLES
            .iter()
            .map(|table| {
                let mut cf_options = Options::default();
                (table.options)(&mut cf_options, config);
                ColumnFamilyDescriptor::new(table.name, cf_options)
            })
            .collect();
        let what = if read_only { " read-only" } else { "" };
        let db = E::open_engine(&db_options, path, cfs, read_only).map_err(KvError::db(
            format_args!("opening {}{what}", path.display()),
        ))?;
        let mut write_options = WriteOptions::default();
        write_options.set_sync(sync);
        Ok(Self {
            db,
            path: path.to_path_buf(),
            write_options,
            _schema: PhantomData,
        })
    }

    /// The database directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn cf<T: Table<Schema = S>>(&self) -> &ColumnFamily {
        self.cf_by_name(T::NAME)
    }

    pub(crate) fn cf_by_name(&self, name: &str) -> &ColumnFamily {
        // Every table of the schema is created at open, so the lookup cannot fail.
        self.db
            .cf(name)
            .expect("every table of the schema is created at open")
    }

    pub(crate) fn write_options(&self) -> &WriteOptions {
        &self.write_options
    }

    /// Point read of a typed value.
    pub fn get<T: Table<Schema = S>>(&self, key: &T::Key) -> Result<Option<T::Value>> {
        let encoded = key.encode();
        let raw = self
            .db
            .get_pinned(self.cf::<T>(), encoded.as_ref())
            .map_err(KvError::db(format_args!("reading {}", T::NAME)))?;
        raw.map(|value| decode_value::<T>(encoded.as_ref(), &value))
            .transpose()
    }

    /// Point read of a raw-bytes value without copying it (e.g. ranged reads of a stored frame).
    pub fn get_pinned<T: Table<Schema = S, Value = RawBytes>>(
        &self,
        key: &T::Key,
    ) -> Result<Option<Pinned<'_>>> {
        let raw = self
            .db
            .get_pinned(self.cf::<T>(), key.encode().as_ref())
            .map_err(KvError::db(format_args!("reading {}", T::NAME)))?;
        Ok(raw.map(Pinned))
    }

    /// Whether a key exists.
    pub fn contains<T: Table<Schema = S>>(&self, key: &T::Key) -> Result<bool> {
        Ok(self
            .db
            .get_pinned(self.cf::<T>(), key.encode().as_ref())
            .map_err(KvError::db(format_args!("reading {}", T::NAME)))?
            .is_some())
    }

    /// A single put outside a batch.
    pub fn put<T: Table<Schema = S>>(&self, key: &T::Key, value: &T::Value) -> Result<()> {
        self.db
            .put(
                self.cf::<T>(),
                key.encode().as_ref(),
                value.encode().as_ref(),
                &self.write_options,
            )
            .map_err(KvError::db(format_args!("writing {}", T::NAME)))
    }

    /// A single merge outside a batch.
    pub fn merge<T: Table<Schema = S>>(&self, key: &T::Key, value: &T::Value) -> Result<()> {
        self.db
            .merge(
                self.cf::<T>(),
                key.encode().as_ref(),
                value.encode().as_ref(),
                &self.write_options,
            )
            .map_err(KvError::db(format_args!("merging into {}", T::NAME)))
    }

    /// A single delete outside a batch.
    pub fn delete<T: Table<Schema = S>>(&self, key: &T::Key) -> Result<()> {
        self.db
            .delete(self.cf::<T>(), key.encode().as_ref(), &self.write_options)
            .map_err(KvError::db(format_args!("deleting from {}", T::NAME)))
    }

    /// Typed rows of a table in `range`, ascending.
    pub fn iter<T: Table<Schema = S>>(&self, range: KeyRange) -> Iter<'_, T, E> {
        Iter::new(self.raw_iter::<T>(&range, None), range, false)
    }

    /// Typed rows of a table in `range`, descending.
    pub fn iter_rev<T: Table<Schema = S>>(&self, range: KeyRange) -> Iter<'_, T, E> {
        Iter::new(self.raw_iter::<T>(&range, None), range, true)
    }

    /// Typed keys of a table in `range`, ascending; values are not decoded.
    pub fn keys<T: Table<Schema = S>>(&self, range: KeyRange) -> Keys<'_, T, E> {
        Keys(self.iter(range))
    }

    pub(crate) fn raw_iter<T: Table<Schema = S>>(
        &self,
        range: &KeyRange,
        snapshot: Option<&rocksdb::SnapshotWithThreadMode<'_, E>>,
    ) -> rocksdb::DBRawIteratorWithThreadMode<'_, E> {
        let mut options = range.read_options();
        if let Some(snapshot) = snapshot {
            options.set_snapshot(snapshot);
        }
        self.db.raw_iter(self.cf::<T>(), options)
    }

    /// Flushes the memtable of one table.
    pub fn flush<T: Table<Schema = S>>(&self) -> Result<()> {
        self.db
            .flush(self.cf::<T>())
            .map_err(KvError::db(format_args!("flushing {}", T::NAME)))
    }

    /// Syncs the write-ahead log: every write of this database so far is durable when this returns. Writers
    /// on other threads are not held up while it runs.
    pub fn sync_wal(&self) -> Result<()> {
        self.db.sync_wal().map_err(KvError::db(format_args!(
            "syncing the log of {}",
            self.path.display()
        )))
    }

    /// Flushes the memtables of every table.
    pub fn flush_all(&self) -> Result<()> {
        for table in S::TABLES {
            self.db
                .flush(self.cf_by_name(table.name))
                .map_err(KvError::db(format_args!("flushing {}", table.name)))?;
        }
        Ok(())
    }

    /// Every row of every table as raw bytes, tables in declaration order (byte-level comparisons in
    /// tests).
    #[cfg(feature = "test-utils")]
    pub fn raw_rows(&self) -> Result<Vec<RawRow>> {
        let mut rows = Vec::new();
        for table in S::TABLES {
            let mut it = self
                .db
                .raw_iter(self.cf_by_name(table.name), KeyRange::all().read_options());
            it.seek_to_first();
            while let (Some(key), Some(value)) = (it.key(), it.value()) {
                rows.push(RawRow {
                    table: table.name,
                    key: key.to_vec(),
                    value: value.to_vec(),
                });
                it.next();
            }
            it.status()
                .map_err(KvError::db(format_args!("dumping {}", table.name)))?;
        }
        Ok(rows)
    }

    /// Writes arbitrary value bytes under a typed key, to build corrupt rows in tests.
    #[cfg(feature = "test-utils")]
    pub fn put_raw_value<T: Table<Schema = S>>(&self, key: &T::Key, value: &[u8]) -> Result<()> {
        self.db
            .put(
                self.cf::<T>(),
                key.encode().as_ref(),
                value,
                &self.write_options,
            )
            .map_err(KvError::db(format_args!("writing {}", T::NAME)))
    }

    /// Merges arbitrary operand bytes under a typed key, to exercise a merge operator on bad input in tests.
    #[cfg(feature = "test-utils")]
    pub fn merge_raw_value<T: Table<Schema = S>>(&self, key: &T::Key, value: &[u8]) -> Result<()> {
        self.db
            .merge(
                self.cf::<T>(),
                key.encode().as_ref(),
                value,
                &self.write_options,
            )
            .map_err(KvError::db(format_args!("merging into {}", T::NAME)))
    }

    /// The stored value bytes under a typed key, undecoded, for byte-level checks in tests.
    #[cfg(feature = "test-utils")]
    pub fn get_raw_value<T: Table<Schema = S>>(&self, key: &T::Key) -> Result<Option<Vec<u8>>> {
        Ok(self
            .db
            .get_pinned(self.cf::<T>(), key.encode().as_ref())
            .map_err(KvError::db(format_args!("reading {}", T::NAME)))?
            .map(|value| value.to_vec()))
    }
}

impl<S: Schema> Db<S, DB> {
    /// Adds a put to a batch.
    pub fn batch_put<T: Table<Schema = S>>(
        &self,
        batch: &mut Batch<S>,
        key: &T::Key,
        value: &T::Value,
    ) {
        batch.inner.put_cf(
            self.cf::<T>(),
            key.encode().as_ref(),
            value.encode().as_ref(),
        );
    }

    /// Adds a merge to a batch.
    pub fn batch_merge<T: Table<Schema = S>>(
        &self,
        batch: &mut Batch<S>,
        key: &T::Key,
        value: &T::Value,
    ) {
        batch.inner.merge_cf(
            self.cf::<T>(),
            key.encode().as_ref(),
            value.encode().as_ref(),
        );
    }

    /// Adds a delete to a batch.
    pub fn batch_delete<T: Table<Schema = S>>(&self, batch: &mut Batch<S>, key: &T::Key) {
        batch.inner.delete_cf(self.cf::<T>(), key.encode().as_ref());
    }

    /// Adds a range delete of `[range.lower, range.upper)` to a batch; a range without both bounds
    /// deletes nothing.
    pub fn batch_delete_range<T: Table<Schema = S>>(&self, batch: &mut Batch<S>, range: &KeyRange) {
        if let (Some(from), Some(to)) = (&range.lower, &range.upper) {
            batch.inner.delete_range_cf(self.cf::<T>(), from, to);
        }
    }

    /// Commits a batch atomically.
    ///
    /// `context` names the change in the error; it is only formatted when the write fails, so callers pass
    /// `format_args!` rather than an allocated string.
    pub fn write(&self, batch: Batch<S>, context: impl std::fmt::Display) -> Result<()> {
        self.db
            .write_opt(batch.inner, &self.write_options)
            .map_err(KvError::db(context))
    }

    /// Compacts the keys of a table in `range` (an unset bound is open).
    pub fn compact_range<T: Table<Schema = S>>(&self, range: &KeyRange) {
        self.db.compact_range_cf(
            self.cf::<T>(),
            range.lower.as_deref(),
            range.upper.as_deref(),
        );
    }
}

/// A write batch of one schema's database, filled through [`Db::batch_put`] and friends and committed
/// atomically by [`Db::write`].
pub struct Batch<S: Schema> {
    inner: WriteBatch,
    _schema: PhantomData<fn() -> S>,
}

impl<S: Schema> Default for Batch<S> {
    fn default() -> Self {
        Self {
            inner: WriteBatch::default(),
            _schema: PhantomData,
        }
    }
}

impl<S: Schema> Batch<S> {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of operations in the batch.
    pub fn len(&self) -> usize {
        self.inner.len()
    }

    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    /// Size of the batch in bytes.
    pub fn size_in_bytes(&self) -> usize {
        self.inner.size_in_bytes()
    }
}

/// A pinned raw value (no copy).
pub struct Pinned<'a>(DBPinnableSlice<'a>);

impl std::ops::Deref for Pinned<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl AsRef<[u8]> for Pinned<'_> {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

pub(crate) fn decode_key<T: Table>(key: &[u8]) -> Result<T::Key> {
    T::Key::decode(key).map_err(|e| KvError::corruption(T::NAME, key, format!("key: {e}")))
}

pub(crate) fn decode_value<T: Table>(key: &[u8], value: &[u8]) -> Result<T::Value> {
    T::Value::decode(value).map_err(|e| KvError::corruption(T::NAME, key, e))
}
