//! Errors of the state crate.

use regolith_formats::BlockId;
use tycho_types::cell::HashBytes;

/// Why a state could not be read, applied or written.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// A stored cell or count is missing or malformed: the stored states are damaged.
    #[error("stored cell {hash}: {reason}")]
    Corruption {
        /// The cell.
        hash: HashBytes,
        /// What is wrong.
        reason: String,
    },
    /// The storage failed.
    #[error(transparent)]
    Storage(#[from] regolith_storage::StorageError),
    /// A block's state update does not lead from the previous state to the block's new state.
    #[error("block {block}: {reason}")]
    InvalidUpdate {
        /// The block.
        block: Box<BlockId>,
        /// What does not hold.
        reason: String,
    },
    /// A block this build cannot apply (a shard split or merge).
    #[error("block {block}: {reason}")]
    Unsupported {
        /// The block.
        block: Box<BlockId>,
        /// What is not supported.
        reason: String,
    },
    /// A state's BOC could not be written out.
    #[error("writing a state's BOC: {0}")]
    BocWrite(#[source] std::io::Error),
    /// The stored states do not fit together (a checkpoint without its states, a state of another shard).
    #[error("{0}")]
    Inconsistent(String),
}

impl StateError {
    /// Whether the block (and so whoever sent it) is to blame, not this node's storage.
    pub fn is_invalid_block(&self) -> bool {
        matches!(self, Self::InvalidUpdate { .. })
    }

    pub(crate) fn invalid(block: &BlockId, reason: impl std::fmt::Display) -> Self {
        Self::InvalidUpdate {
            block: Box::new(*block),
            reason: reason.to_string(),
        }
    }
}
