//! The `core` RocksDB: opening with per-table options and merge operators, and typed access helpers.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use rocksdb::{
    BlockBasedOptions, ColumnFamily, ColumnFamilyDescriptor, DBCompressionType, Options,
    WriteBatch, DB,
};

use crate::block_meta::block_meta_merge;
use crate::config::StorageConfig;
use crate::error::{Result, StorageError};
use crate::tables::{self, Codec, Table};

/// Points where tests can inject a failure: the next write at that point fails once.
#[derive(Debug, Default)]
pub struct FailPoints {
    /// The next component batch (§7.2 step 5) fails.
    pub component_batch: AtomicBool,
    /// The next block-GC chunk batch fails.
    pub gc_batch: AtomicBool,
    /// The next archive commit stops after the temp file is written and synced.
    pub archive_commit_after_tmp: AtomicBool,
    /// The next persistent-state write stops after its temp file is written and synced.
    pub state_after_tmp: AtomicBool,
    /// The next persistent-state write stops after the rename, before the record.
    pub state_after_rename: AtomicBool,
}

impl FailPoints {
    pub(crate) fn hit(flag: &AtomicBool, name: &'static str) -> Result<()> {
        if flag.swap(false, Ordering::AcqRel) {
            return Err(StorageError::Injected(name));
        }
        Ok(())
    }
}

/// The `core` database with typed tables.
pub struct CoreDb {
    db: DB,
    /// Failure injection for tests.
    pub fail_points: FailPoints,
}

fn archive_ids_concat(
    _key: &[u8],
    existing: Option<&[u8]>,
    operands: &rocksdb::MergeOperands,
) -> Option<Vec<u8>> {
    let mut out = existing.map(<[u8]>::to_vec).unwrap_or_default();
    for op in operands {
        out.extend_from_slice(op);
    }
    Some(out)
}

fn table_options(name: &str, config: &StorageConfig) -> Options {
    let mut opts = Options::default();
    match name {
        tables::BlockHandles::NAME => {
            opts.set_merge_operator("block_meta_merge", block_meta_merge, block_meta_merge);
            let mut block = BlockBasedOptions::default();
            block.set_bloom_filter(10.0, false);
            block.set_whole_key_filtering(true);
            opts.set_block_based_table_factory(&block);
            opts.optimize_for_point_lookup(64);
        }
        tables::BlockComponents::NAME => {
            let c = &config.components;
            opts.set_enable_blob_files(true);
            opts.set_min_blob_size(c.min_blob_size.as_u64());
            opts.set_blob_file_size(c.blob_file_size.as_u64());
            opts.set_enable_blob_gc(true);
            opts.set_blob_gc_age_cutoff(c.blob_gc_age_cutoff);
            opts.set_blob_compression_type(DBCompressionType::None);
            opts.set_compression_type(DBCompressionType::None);
        }
        tables::ArchiveBlockIds::NAME => {
            opts.set_merge_operator("archive_ids_concat", archive_ids_concat, archive_ids_concat);
            opts.set_compression_type(DBCompressionType::None);
        }
        _ => {}
    }
    opts
}

impl CoreDb {
    /// Opens (creating if missing) the database at `path`.
    pub fn open(path: &Path, config: &StorageConfig, read_only: bool) -> Result<Self> {
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.create_missing_column_families(true);
        opts.set_max_background_jobs(2);
        opts.set_keep_log_file_num(2);
        let cfs = tables::ALL_TABLES
            .iter()
            .map(|name| ColumnFamilyDescriptor::new(*name, table_options(name, config)));
        let db = if read_only {
            DB::open_cf_descriptors_read_only(&opts, path, cfs, false)
        } else {
            DB::open_cf_descriptors(&opts, path, cfs)
        }
        .map_err(StorageError::db(format!("opening {}", path.display())))?;
        Ok(Self {
            db,
            fail_points: FailPoints::default(),
        })
    }

    /// The raw RocksDB handle (tests and tools).
    pub fn raw(&self) -> &DB {
        &self.db
    }

    /// The column family of a table.
    pub fn cf<T: Table>(&self) -> &ColumnFamily {
        // Every table is created at open, so the lookup cannot fail.
        self.db
            .cf_handle(T::NAME)
            .expect("column family is created at open")
    }

    /// Point read of a typed value.
    pub fn get<T: Table>(&self, key: &T::Key) -> Result<Option<T::Value>> {
        let raw = self
            .db
            .get_pinned_cf(self.cf::<T>(), key.encode())
            .map_err(StorageError::db(format!("reading {}", T::NAME)))?;
        raw.map(|v| T::Value::decode(&v)).transpose()
    }

    /// Point read without decoding (pinned).
    pub fn get_raw<T: Table>(&self, key: &T::Key) -> Result<Option<rocksdb::DBPinnableSlice<'_>>> {
        self.db
            .get_pinned_cf(self.cf::<T>(), key.encode())
            .map_err(StorageError::db(format!("reading {}", T::NAME)))
    }

    /// Whether a key exists.
    pub fn contains<T: Table>(&self, key: &T::Key) -> Result<bool> {
        Ok(self.get_raw::<T>(key)?.is_some())
    }

    /// A single put outside a batch.
    pub fn put<T: Table>(&self, key: &T::Key, value: &T::Value) -> Result<()> {
        self.db
            .put_cf(self.cf::<T>(), key.encode(), value.encode())
            .map_err(StorageError::db(format!("writing {}", T::NAME)))
    }

    /// A single merge outside a batch.
    pub fn merge<T: Table>(&self, key: &T::Key, value: &T::Value) -> Result<()> {
        self.db
            .merge_cf(self.cf::<T>(), key.encode(), value.encode())
            .map_err(StorageError::db(format!("merging into {}", T::NAME)))
    }

    /// Adds a put to a batch.
    pub fn batch_put<T: Table>(&self, batch: &mut WriteBatch, key: &T::Key, value: &T::Value) {
        batch.put_cf(self.cf::<T>(), key.encode(), value.encode());
    }

    /// Adds a merge to a batch.
    pub fn batch_merge<T: Table>(&self, batch: &mut WriteBatch, key: &T::Key, value: &T::Value) {
        batch.merge_cf(self.cf::<T>(), key.encode(), value.encode());
    }

    /// Adds a delete to a batch.
    pub fn batch_delete<T: Table>(&self, batch: &mut WriteBatch, key: &T::Key) {
        batch.delete_cf(self.cf::<T>(), key.encode());
    }

    /// Adds a range delete `[from, to)` of raw key bounds to a batch.
    pub fn batch_delete_range<T: Table>(&self, batch: &mut WriteBatch, from: &[u8], to: &[u8]) {
        batch.delete_range_cf(self.cf::<T>(), from, to);
    }

    /// Commits a batch atomically (synced to the WAL).
    pub fn write(&self, batch: WriteBatch, context: &str) -> Result<()> {
        self.db
            .write(batch)
            .map_err(StorageError::db(context.to_string()))
    }

    /// A raw iterator over a table from `from` (inclusive) forward.
    pub fn iter_from<T: Table>(&self, from: &[u8]) -> rocksdb::DBRawIteratorWithThreadMode<'_, DB> {
        let mut it = self.db.raw_iterator_cf(self.cf::<T>());
        it.seek(from);
        it
    }

    /// A raw iterator over a table, positioned at the last key.
    pub fn iter_last<T: Table>(&self) -> rocksdb::DBRawIteratorWithThreadMode<'_, DB> {
        let mut it = self.db.raw_iterator_cf(self.cf::<T>());
        it.seek_to_last();
        it
    }

    /// Flushes memtables of all tables (used before close in tools and tests).
    pub fn flush(&self) -> Result<()> {
        for name in tables::ALL_TABLES {
            if let Some(cf) = self.db.cf_handle(name) {
                self.db
                    .flush_cf(cf)
                    .map_err(StorageError::db(format!("flushing {name}")))?;
            }
        }
        Ok(())
    }
}

/// Surfaces a raw iterator's error after it stops being valid.
pub(crate) fn iter_status(
    it: &rocksdb::DBRawIteratorWithThreadMode<'_, DB>,
    context: &str,
) -> Result<()> {
    it.status().map_err(StorageError::db(context.to_string()))
}
