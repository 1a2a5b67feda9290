//! The `ledger` RocksDB: opening it as an `OptimisticTransactionDB`, typed reads and scans, and
//! [`LedgerDb::transact`], which runs a decision in one transaction and runs it again from the start when the
//! commit finds that a key it read was written concurrently (ledger.md §3).

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rocksdb::{
    ColumnFamily, ColumnFamilyDescriptor, ErrorKind, OptimisticTransactionDB,
    OptimisticTransactionOptions, Options, Transaction, WriteOptions,
};

use crate::error::{LedgerError, Result};
use crate::records::RawRow;
use crate::tables::{self, Codec, MetaKey, RawBytes, Table};

/// Layout version of the database, stored under `meta/db_version`.
pub const DB_VERSION: u8 = 1;

/// How many times a transaction is attempted before [`LedgerError::Contention`].
const MAX_ATTEMPTS: u32 = 10_000;

type RawDb = OptimisticTransactionDB;

/// What a transaction body decided to do with its transaction.
pub(crate) enum TxnStep<R> {
    /// Commit the writes, then return the value (or run the body again if the commit conflicts).
    Commit(R),
    /// Nothing was written: return the value; the transaction is dropped (rolled back).
    ReadOnly(R),
}

/// The ledger database with typed tables.
pub(crate) struct LedgerDb {
    db: RawDb,
    write_options: WriteOptions,
    commit_retries: AtomicU64,
}

impl LedgerDb {
    /// Opens (creating if missing) the database at `path`; `sync` makes every commit wait for the WAL fsync.
    pub fn open(path: &Path, sync: bool) -> Result<Self> {
        let mut options = Options::default();
        options.create_if_missing(true);
        options.create_missing_column_families(true);
        options.set_max_background_jobs(2);
        options.set_keep_log_file_num(2);
        let descriptors = tables::ALL_TABLES
            .iter()
            .map(|name| ColumnFamilyDescriptor::new(*name, Options::default()));
        let db = RawDb::open_cf_descriptors(&options, path, descriptors).map_err(
            LedgerError::db(format!("opening the ledger database at {}", path.display())),
        )?;
        let mut write_options = WriteOptions::default();
        write_options.set_sync(sync);
        let this = Self {
            db,
            write_options,
            commit_retries: AtomicU64::new(0),
        };
        this.check_version()?;
        Ok(this)
    }

    fn check_version(&self) -> Result<()> {
        const KEY: MetaKey = MetaKey("db_version");
        match self.get::<tables::Meta>(&KEY)? {
            Some(RawBytes(bytes)) => match bytes.as_slice() {
                [found] if *found == DB_VERSION => Ok(()),
                [found] => Err(LedgerError::UnsupportedVersion {
                    found: *found,
                    expected: DB_VERSION,
                }),
                other => Err(LedgerError::corruption(
                    "meta/db_version",
                    format!("{} bytes", other.len()),
                )),
            },
            None => self
                .db
                .put_cf_opt(
                    self.cf::<tables::Meta>(),
                    KEY.encode(),
                    [DB_VERSION],
                    &self.write_options,
                )
                .map_err(LedgerError::db("writing meta/db_version")),
        }
    }

    /// The column family of a table.
    fn cf<T: Table>(&self) -> &ColumnFamily {
        // Every table is created at open, so the lookup cannot fail.
        self.db
            .cf_handle(T::NAME)
            .expect("column family is created at open")
    }

    /// Point read of a typed value outside a transaction.
    pub fn get<T: Table>(&self, key: &T::Key) -> Result<Option<T::Value>> {
        let raw = self
            .db
            .get_pinned_cf(self.cf::<T>(), key.encode())
            .map_err(LedgerError::db(format!("reading {}", T::NAME)))?;
        raw.map(|value| T::Value::decode(&value)).transpose()
    }

    /// Every row of a table whose raw key starts with `prefix`, in key order.
    pub fn scan<T: Table>(&self, prefix: &[u8]) -> Result<Vec<(T::Key, T::Value)>> {
        let mut rows = Vec::new();
        let mut it = self.db.raw_iterator_cf(self.cf::<T>());
        it.seek(prefix);
        while let (Some(key), Some(value)) = (it.key(), it.value()) {
            if !key.starts_with(prefix) {
                break;
            }
            rows.push((T::Key::decode(key)?, T::Value::decode(value)?));
            it.next();
        }
        it.status()
            .map_err(LedgerError::db(format!("scanning {}", T::NAME)))?;
        Ok(rows)
    }

    /// How many rows a table has.
    pub fn count<T: Table>(&self) -> Result<u64> {
        let mut count = 0;
        let mut it = self.db.raw_iterator_cf(self.cf::<T>());
        it.seek_to_first();
        while it.valid() {
            count += 1;
            it.next();
        }
        it.status()
            .map_err(LedgerError::db(format!("counting {}", T::NAME)))?;
        Ok(count)
    }

    /// Every row of every table as raw bytes, tables in declaration order.
    pub fn raw_rows(&self) -> Result<Vec<RawRow>> {
        let mut rows = Vec::new();
        for name in tables::ALL_TABLES {
            let cf = self
                .db
                .cf_handle(name)
                .expect("column family is created at open");
            let mut it = self.db.raw_iterator_cf(cf);
            it.seek_to_first();
            while let (Some(key), Some(value)) = (it.key(), it.value()) {
                rows.push(RawRow {
                    table: name,
                    key: key.to_vec(),
                    value: value.to_vec(),
                });
                it.next();
            }
            it.status()
                .map_err(LedgerError::db(format!("dumping {name}")))?;
        }
        Ok(rows)
    }

    /// Commit conflicts retried since open.
    pub fn commit_retries(&self) -> u64 {
        self.commit_retries.load(Ordering::Relaxed)
    }

    /// Runs `body` in a transaction and commits it; when the commit reports that a key read with
    /// [`Txn::get_for_update`] or written by the body changed meanwhile, the whole body runs again on a fresh
    /// transaction, so every decision is made on the state it commits against.
    pub fn transact<R>(
        &self,
        what: &'static str,
        mut body: impl FnMut(&Txn<'_>) -> Result<TxnStep<R>>,
    ) -> Result<R> {
        let txn_options = OptimisticTransactionOptions::default();
        for attempt in 1..=MAX_ATTEMPTS {
            let txn = Txn {
                db: self,
                inner: self.db.transaction_opt(&self.write_options, &txn_options),
            };
            let value = match body(&txn)? {
                TxnStep::ReadOnly(value) => return Ok(value),
                TxnStep::Commit(value) => value,
            };
            match txn.inner.commit() {
                Ok(()) => return Ok(value),
                Err(e) if matches!(e.kind(), ErrorKind::Busy | ErrorKind::TryAgain) => {
                    self.commit_retries.fetch_add(1, Ordering::Relaxed);
                    back_off(attempt);
                }
                Err(e) => return Err(LedgerError::db(format!("committing {what}"))(e)),
            }
        }
        Err(LedgerError::Contention {
            what,
            attempts: MAX_ATTEMPTS,
        })
    }
}

/// Waits a little before another attempt; the wait grows with the attempt and is jittered so that workers
/// that conflicted once do not meet again in lockstep.
fn back_off(attempt: u32) {
    if attempt < 4 {
        std::thread::yield_now();
        return;
    }
    let jitter = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::from(d.subsec_nanos() % 97))
        .unwrap_or(0);
    let micros = u64::from(attempt.min(100)) * 10 + jitter;
    std::thread::sleep(Duration::from_micros(micros));
}

/// One optimistic transaction with typed access.
pub(crate) struct Txn<'a> {
    db: &'a LedgerDb,
    inner: Transaction<'a, RawDb>,
}

impl Txn<'_> {
    /// Reads a value and makes the commit fail if anyone else writes that key before it.
    pub fn get_for_update<T: Table>(&self, key: &T::Key) -> Result<Option<T::Value>> {
        let raw = self
            .inner
            .get_pinned_for_update_cf(self.db.cf::<T>(), key.encode(), true)
            .map_err(LedgerError::db(format!(
                "reading {} in a transaction",
                T::NAME
            )))?;
        raw.map(|value| T::Value::decode(&value)).transpose()
    }

    /// Writes a row.
    pub fn put<T: Table>(&self, key: &T::Key, value: &T::Value) -> Result<()> {
        self.inner
            .put_cf(self.db.cf::<T>(), key.encode(), value.encode())
            .map_err(LedgerError::db(format!("writing {}", T::NAME)))
    }

    /// Deletes a row.
    pub fn delete<T: Table>(&self, key: &T::Key) -> Result<()> {
        self.inner
            .delete_cf(self.db.cf::<T>(), key.encode())
            .map_err(LedgerError::db(format!("deleting from {}", T::NAME)))
    }

    /// The keys of a table from the raw key `from` onward, as this transaction sees them, for as long as
    /// `keep` accepts them.
    pub fn keys_while<T: Table>(
        &self,
        from: &[u8],
        keep: impl Fn(&T::Key) -> bool,
    ) -> Result<Vec<T::Key>> {
        let mut keys = Vec::new();
        let mut it = self.inner.raw_iterator_cf(self.db.cf::<T>());
        it.seek(from);
        while let Some(raw) = it.key() {
            let key = T::Key::decode(raw)?;
            if !keep(&key) {
                break;
            }
            keys.push(key);
            it.next();
        }
        it.status().map_err(LedgerError::db(format!(
            "scanning {} in a transaction",
            T::NAME
        )))?;
        Ok(keys)
    }
}
