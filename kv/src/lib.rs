//! `regolith-kv`: the typed key/value layer under every regolith database (storage, queue, ledger).
//!
//! - [`Codec`]: the byte encoding of a key or value; keys encode into fixed-size arrays, so no key
//!   allocates; values may be variable-size or borrow their bytes.
//! - [`Table`] and [`tables!`]: a column family declared with its name, key and value types and its RocksDB
//!   options; a [`Schema`] is the set of tables of one database.
//! - [`Db`]: the one database wrapper: typed get, put, merge, delete, batches with range deletes, typed
//!   iteration, owned snapshots and iterators, and (for a [`TransactionDb`]) transactions.
//! - [`Database`]: a [`Db`] with the fail points of the crate that owns it (each crate's database is one).
//! - [`FailPoint`]: failure injection for tests, armed only with the `test-utils` feature.
//!
//! A stored row that does not decode is [`KvError::Corruption`], naming the table and the key; a failure of
//! RocksDB is [`KvError::Db`] (or [`KvError::Locked`] when another process holds the database), with what was
//! being done. RocksDB's own types do not appear in this API beyond the options of a table (`TableDef`), which
//! a crate that tunes its tables builds with its own `rocksdb` dependency.

mod codec;
mod database;
mod db;
mod error;
mod fail;
mod iter;
mod snapshot;
mod table;
mod txn;

pub use codec::{Codec, DecodeError, Empty, NameKey, RawBytes};
pub use database::Database;
#[cfg(feature = "test-utils")]
pub use db::RawRow;
pub use db::{Batch, Db, DbOptions, Engine, Pinned, TransactionDb};
pub use error::{DbError, KvError, Result};
pub use fail::FailPoint;
pub use iter::{Iter, KeyRange, Keys};
pub use snapshot::{OwnedIter, Snapshot};
pub use table::{Schema, Table, TableDef};
pub use txn::Txn;

/// Declares modules that are their crate's own and become public only with the crate's `test-utils`
/// feature: the raw database and tables that tests read and corrupt rows through. The `cfg` is the invoking
/// crate's. `regolith_kv::test_hook_modules!(db, tables);` in a crate root.
#[macro_export]
macro_rules! test_hook_modules {
    ($($name:ident),* $(,)?) => {$(
        #[cfg(feature = "test-utils")]
        pub mod $name;
        #[cfg(not(feature = "test-utils"))]
        #[allow(unreachable_pub)]
        mod $name;
    )*};
}
