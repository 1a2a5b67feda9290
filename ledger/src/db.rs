//! The `ledger` RocksDB: opened as an `OptimisticTransactionDB` through the typed key/value layer, with
//! typed scans and [`LedgerDb::transact`], which runs a decision in one transaction and runs it again from the
//! start when the commit finds that a key it read was written concurrently (ledger.md §3).

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use regolith_kv::{DbOptions, KeyRange, NameKey, RawBytes, Table, TransactionDb, Txn};

use crate::error::{LedgerError, Result};
use crate::tables::{self, LedgerTables};

/// Layout version of the database, stored under `meta/db_version`.
pub const DB_VERSION: u8 = 1;

/// How many times a transaction is attempted before [`LedgerError::Contention`].
const MAX_ATTEMPTS: u32 = 10_000;

/// What a transaction body decided to do with its transaction.
pub(crate) enum TxnStep<R> {
    /// Commit the writes, then return the value (or run the body again if the commit conflicts).
    Commit(R),
    /// Nothing was written: return the value; the transaction is dropped (rolled back).
    ReadOnly(R),
}

/// The ledger database with typed tables.
pub(crate) struct LedgerDb {
    db: TransactionDb<LedgerTables>,
    commit_retries: AtomicU64,
}

impl LedgerDb {
    /// Opens (creating if missing) the database at `path`; `sync` makes every commit wait for the WAL fsync.
    pub(crate) fn open(path: &Path, sync: bool) -> Result<Self> {
        let options = DbOptions {
            sync,
            ..DbOptions::default()
        };
        let db = TransactionDb::open(path, &(), options)?;
        let this = Self {
            db,
            commit_retries: AtomicU64::new(0),
        };
        this.check_version()?;
        Ok(this)
    }

    fn check_version(&self) -> Result<()> {
        const KEY: NameKey = NameKey("db_version");
        match self.db.get::<tables::Meta>(&KEY)? {
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
            None => Ok(self
                .db
                .put::<tables::Meta>(&KEY, &RawBytes(vec![DB_VERSION]))?),
        }
    }

    /// Point read of a typed value outside a transaction.
    pub(crate) fn get<T: Table<Schema = LedgerTables>>(
        &self,
        key: &T::Key,
    ) -> Result<Option<T::Value>> {
        Ok(self.db.get::<T>(key)?)
    }

    /// Every row of a table in `range`, in key order.
    pub(crate) fn scan<T: Table<Schema = LedgerTables>>(
        &self,
        range: KeyRange,
    ) -> Result<Vec<(T::Key, T::Value)>> {
        Ok(self.db.iter::<T>(range).collect::<Result<_, _>>()?)
    }

    /// How many rows a table has.
    pub(crate) fn count<T: Table<Schema = LedgerTables>>(&self) -> Result<u64> {
        let mut count = 0;
        for key in self.db.keys::<T>(KeyRange::all()) {
            key?;
            count += 1;
        }
        Ok(count)
    }

    /// Every row of every table as raw bytes, tables in declaration order.
    #[cfg(feature = "test-utils")]
    pub(crate) fn raw_rows(&self) -> Result<Vec<regolith_kv::RawRow>> {
        Ok(self.db.raw_rows()?)
    }

    /// Commit conflicts retried since open.
    pub(crate) fn commit_retries(&self) -> u64 {
        self.commit_retries.load(Ordering::Relaxed)
    }

    /// Runs `body` in a transaction and commits it; when the commit reports that a key read with
    /// [`Txn::get_for_update`] or written by the body changed meanwhile, the whole body runs again on a fresh
    /// transaction, so every decision is made on the state it commits against.
    pub(crate) fn transact<R>(
        &self,
        what: &'static str,
        mut body: impl FnMut(&Txn<'_, LedgerTables>) -> Result<TxnStep<R>>,
    ) -> Result<R> {
        for attempt in 1..=MAX_ATTEMPTS {
            let txn = self.db.transaction();
            let value = match body(&txn)? {
                TxnStep::ReadOnly(value) => return Ok(value),
                TxnStep::Commit(value) => value,
            };
            if txn.commit(what)? {
                return Ok(value);
            }
            self.commit_retries.fetch_add(1, Ordering::Relaxed);
            back_off(attempt);
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
