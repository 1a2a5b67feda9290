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
        source: rocksdb::Error,
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
        move |source| Self::Db {
            context: context.to_string(),
            source,
        }
    }

    pub(crate) fn corruption(table: &'static str, key: &[u8], reason: impl ToString) -> Self {
        Self::Corruption {
            table,
            key: hex::encode(key),
            reason: reason.to_string(),
        }
    }
}

/// Result alias of the key/value layer.
pub type Result<T, E = KvError> = std::result::Result<T, E>;
