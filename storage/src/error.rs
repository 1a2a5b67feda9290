//! Errors of the block storage.

use regolith_formats::{BlockError, BlockId, FormatError};
use regolith_kv::KvError;

/// Everything the block storage can fail with.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The database failed (with what was being done), a stored row does not decode (with its table and
    /// key), or a test injected a failure.
    #[error(transparent)]
    Kv(#[from] KvError),
    /// A file operation failed.
    #[error("I/O error while {context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A stored value could not be decoded.
    #[error("corrupted {what}: {reason}")]
    Corruption {
        /// Which value.
        what: String,
        /// Why.
        reason: String,
    },
    /// Stored rows contradict each other (e.g. an indexed key block without handle rows).
    #[error("inconsistent storage: {0}")]
    Inconsistent(String),
    /// The id given differs from the stored one with its root hash (file hash, workchain, shard or seqno).
    #[error("block id mismatch for {id}: stored {stored}")]
    BlockIdMismatch {
        /// The requested id.
        id: BlockId,
        /// The stored id besides the root hash.
        stored: String,
    },
    /// A handle passed as existing belongs to another block.
    #[error("block handle id mismatch: expected {expected}, handle is {actual}")]
    BlockHandleIdMismatch {
        /// The id the call was for.
        expected: Box<BlockId>,
        /// The handle's id.
        actual: Box<BlockId>,
    },
    /// The handle was evicted by GC and is inert; reload it.
    #[error("block handle {0} was removed by GC")]
    HandleRemoved(BlockId),
    /// A component is not stored.
    #[error("block {what} not found for block {id}")]
    NotFound {
        /// Component name.
        what: &'static str,
        /// Block id.
        id: BlockId,
    },
    /// Waiting ended by timeout.
    #[error("timed out")]
    Timeout,
    /// The notifier went away without a value.
    #[error("subscription closed")]
    Closed,
    /// Input data (a block, a proof) is not valid.
    #[error("invalid {what}: {reason}")]
    InvalidData {
        /// Which input.
        what: String,
        /// Why.
        reason: String,
    },
    /// A configuration value is refused.
    #[error("invalid config `{key}`: {reason}")]
    InvalidConfig {
        /// The key, e.g. `storage.blocks_gc.safe_distance`.
        key: String,
        /// Why.
        reason: String,
    },
    /// An archive is not known or not committed.
    #[error("archive {0} not found")]
    ArchiveNotFound(u32),
    /// An archive chunk offset that is not a multiple of the chunk size.
    #[error("invalid archive chunk offset {0}")]
    InvalidOffset(u64),
    /// A block cannot go into an archive because a part is missing.
    #[error("block {id} does not have all parts (has_data={has_data}, has_proof={has_proof}, has_queue_diff={has_queue_diff})")]
    MissingBlockParts {
        /// The block.
        id: BlockId,
        /// Data present.
        has_data: bool,
        /// Proof present.
        has_proof: bool,
        /// Queue diff present.
        has_queue_diff: bool,
    },
    /// The database was written by an incompatible version.
    #[error("unsupported database version {found:?} (expected {expected:?})")]
    UnsupportedVersion {
        /// Stored version.
        found: [u8; 3],
        /// This build's version.
        expected: [u8; 3],
    },
}

impl StorageError {
    pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Self {
        let context = context.into();
        move |source| Self::Io { context, source }
    }

    /// Whether the database is locked by another process (another node runs on the same directory).
    pub fn is_locked(&self) -> bool {
        matches!(self, Self::Kv(e) if e.is_locked())
    }

    pub(crate) fn corruption(what: impl Into<String>, reason: impl std::fmt::Display) -> Self {
        Self::Corruption {
            what: what.into(),
            reason: reason.to_string(),
        }
    }
}

impl From<FormatError> for StorageError {
    fn from(e: FormatError) -> Self {
        Self::Corruption {
            what: "stored value".into(),
            reason: e.to_string(),
        }
    }
}

impl From<BlockError> for StorageError {
    fn from(e: BlockError) -> Self {
        Self::InvalidData {
            what: "block".into(),
            reason: e.to_string(),
        }
    }
}

/// Result alias of the block storage.
pub type Result<T, E = StorageError> = std::result::Result<T, E>;
