//! Errors of the key/value layer.

/// Everything a typed database operation can fail with.
#[derive(Debug, thiserror::Error)]
pub enum KvError {
    /// RocksDB failed; `context` says during what.
    #[error("database error while {context}: {source}")]
    Db {
        /// What was being done.
        context: String,
        /// The RocksDB error.
        #[source]
        source: DbError,
    },
    /// The database is locked by another process (or another open in this one): its `LOCK` file is held.
    #[error("database error while {context}: {source}")]
    Locked {
        /// What was being done.
        context: String,
        /// The RocksDB error.
        #[source]
        source: DbError,
    },
    /// A stored key or value does not decode.
    #[error("corrupted row in {table} (key {key}): {reason}")]
    Corruption {
        /// The table.
        table: &'static str,
        /// The row's key, hex.
        key: String,
        /// Why it does not decode.
        reason: String,
    },
    /// A test armed this fail point.
    #[error("injected failure at {0}")]
    Injected(&'static str),
}

impl KvError {
    /// The error mapper of a RocksDB call; `context` is formatted only when the call failed, so the
    /// success path of a point read or write allocates nothing for it.
    pub(crate) fn db(context: impl std::fmt::Display) -> impl FnOnce(rocksdb::Error) -> Self {
        move |source| {
            let context = context.to_string();
            if is_lock_held(&source) {
                Self::Locked {
                    context,
                    source: DbError(source),
                }
            } else {
                Self::Db {
                    context,
                    source: DbError(source),
                }
            }
        }
    }

    /// Whether the database is locked by another process (another node runs on the same directory).
    pub fn is_locked(&self) -> bool {
        matches!(self, Self::Locked { .. })
    }

    pub(crate) fn corruption(table: &'static str, key: &[u8], reason: impl ToString) -> Self {
        Self::Corruption {
            table,
            key: hex::encode(key),
            reason: reason.to_string(),
        }
    }
}

/// An error of the database engine (RocksDB), as its message; the engine's own types stay inside this crate.
#[derive(Debug)]
pub struct DbError(rocksdb::Error);

impl std::fmt::Display for DbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for DbError {}

/// Whether RocksDB refused to open because the database's `LOCK` file is held: by another process
/// (`flock` fails: "While lock file: <dir>/LOCK: Resource temporarily unavailable") or by an earlier open
/// in this process ("lock hold by current process ..."). This is the one place that reads the error's text:
/// RocksDB reports both as a plain IO error, without a kind of their own.
fn is_lock_held(error: &rocksdb::Error) -> bool {
    if error.kind() != rocksdb::ErrorKind::IOError {
        return false;
    }
    let message: &str = error.as_ref();
    message.contains("While lock file") || message.contains("lock hold by current process")
}

/// Result alias of the key/value layer.
pub type Result<T, E = KvError> = std::result::Result<T, E>;
