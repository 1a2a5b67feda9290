//! Errors of the internal message queue.

use regolith_formats::{BlockId, FormatError, ShardIdent};
use regolith_kv::KvError;
use tycho_types::models::BlockIdShort;

use crate::key::QueueKey;

/// Everything the queue can fail with.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    /// The block already has a stored diff with another hash.
    #[error("diff of block {block} is already stored with hash {existing}, new hash {new}")]
    DuplicateDiffHashMismatch {
        /// The block.
        block: BlockIdShort,
        /// Hash of the stored diff.
        existing: String,
        /// Hash of the diff being applied.
        new: String,
    },
    /// The diff's seqno does not follow the shard's last stored diff.
    #[error("non-sequential diff seqno {new} for shard {shard}: last stored seqno is {last}")]
    NonSequentialSeqno {
        /// The shard.
        shard: ShardIdent,
        /// Seqno of the new diff.
        new: u32,
        /// Seqno of the last stored diff.
        last: u32,
    },
    /// The diff's first message is at or below the shard's commit pointer.
    #[error("diff of block {block}: first message {first:?} is not above the commit pointer {pointer:?}")]
    BelowCommitPointer {
        /// The block.
        block: BlockIdShort,
        /// Key of the first message.
        first: QueueKey,
        /// The commit pointer key.
        pointer: QueueKey,
    },
    /// `statistics.shard` is not the block's shard.
    #[error("statistics are for shard {statistics}, the block is {block}")]
    ShardMismatch {
        /// The block.
        block: BlockIdShort,
        /// Shard of the statistics.
        statistics: ShardIdent,
    },
    /// Another diff of the shard already has this `max_message`.
    #[error("diff of block {block}: max message {max_message:?} is already used by another diff of the shard")]
    MaxMessageCollision {
        /// The block.
        block: BlockIdShort,
        /// The colliding key.
        max_message: QueueKey,
    },
    /// A message destination is not a std address.
    #[error("diff of block {block}: message {key:?} has a destination that is not a std address")]
    NonStdDestination {
        /// The block.
        block: BlockIdShort,
        /// The message key.
        key: QueueKey,
    },
    /// A commit lists no masterchain block.
    #[error("commit lists no masterchain block")]
    NoMasterchainBlock,
    /// A commit lists a shard twice.
    #[error("commit lists shard {0} twice")]
    DuplicateShard(ShardIdent),
    /// A top block marked as updated has no stored diff.
    #[error("no diff for updated block {block} (ref by mc {ref_by_mc_seqno}, zerostate seqno {zerostate_seqno})")]
    DiffNotFound {
        /// The block.
        block: BlockIdShort,
        /// The mc seqno that registered it.
        ref_by_mc_seqno: u32,
        /// The zerostate seqno.
        zerostate_seqno: u32,
    },
    /// A commit would move a shard's pointer backwards.
    #[error("commit pointer of {shard} would move back from {current:?} to {new:?}")]
    PointerRegression {
        /// The shard.
        shard: ShardIdent,
        /// The stored pointer key.
        current: QueueKey,
        /// The new pointer key.
        new: QueueKey,
    },
    /// The queue is committed beyond the node's last applied mc block.
    #[error(
        "queue committed up to {committed}, which is ahead of the last applied mc block {applied}"
    )]
    QueueAheadOfAppliedState {
        /// The last committed mc block of the queue.
        committed: Box<BlockId>,
        /// The last applied mc block of the node.
        applied: Box<BlockId>,
    },
    /// An iterator range lists a source shard twice.
    #[error("iterator ranges list source shard {0} twice")]
    DuplicateIteratorSource(ShardIdent),
    /// A stored message could not be deserialized.
    #[error("cannot deserialize message {key:?} of source {source_shard}: {reason}")]
    Deserialize {
        /// Its source shard.
        source_shard: ShardIdent,
        /// Its key.
        key: QueueKey,
        /// Why.
        reason: String,
    },
    /// Input or stored data is not valid.
    #[error("invalid data: {what}")]
    InvalidData {
        /// What was wrong.
        what: String,
    },
    /// A persistent queue state could not be imported.
    #[error("cannot import queue state of block {block}: {reason}")]
    Import {
        /// The block of the state.
        block: Box<BlockId>,
        /// Why.
        reason: ImportFailure,
    },
    /// The queue database failed (with what was being done), a stored row does not decode (with its table
    /// and key), or a test injected a failure.
    #[error("queue: {0}")]
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
    /// The local configuration is not valid.
    #[error("invalid internal_queue config: {0}")]
    Config(String),
}

/// Why a queue-state import failed.
#[derive(Debug, thiserror::Error)]
pub enum ImportFailure {
    /// The file does not parse.
    #[error("malformed queue state: {0}")]
    Format(#[from] FormatError),
    /// The header is for another block.
    #[error("header is for {shard}:{seqno}")]
    WrongBlock {
        /// Header shard.
        shard: ShardIdent,
        /// Header seqno.
        seqno: u32,
    },
    /// The newest diff's hash is not the expected one.
    #[error("top diff hash {actual} does not match the expected {expected}")]
    HashMismatch {
        /// Expected hash (hex).
        expected: String,
        /// Actual hash (hex).
        actual: String,
    },
    /// The number of diffs is not the expected tail length.
    #[error("{actual} diffs, expected tail_len {expected}")]
    TailLenMismatch {
        /// Expected.
        expected: u32,
        /// Actual.
        actual: usize,
    },
    /// A chunk is not a valid BOC.
    #[error("chunk {chunk}: {reason}")]
    BadChunk {
        /// Chunk index.
        chunk: usize,
        /// Why.
        reason: String,
    },
    /// A root's hash is not the listed message hash.
    #[error("diff {seqno}: message {index} has hash {actual}, listed {expected}")]
    MessageHashMismatch {
        /// Diff seqno.
        seqno: u32,
        /// Index in the diff's list.
        index: usize,
        /// Listed hash (hex).
        expected: String,
        /// Root hash (hex).
        actual: String,
    },
    /// A message is not internal (or does not parse as a message).
    #[error("diff {seqno}: message {hash} is not an internal message: {reason}")]
    NonInternal {
        /// Diff seqno.
        seqno: u32,
        /// Message hash (hex).
        hash: String,
        /// Why.
        reason: String,
    },
    /// A message has a src or dst that is not a std address.
    #[error("diff {seqno}: message {hash} has a non-std address")]
    NonStdAddress {
        /// Diff seqno.
        seqno: u32,
        /// Message hash (hex).
        hash: String,
    },
    /// The chunks hold fewer roots than the diffs list.
    #[error("chunks hold {found} messages, the diffs list {listed}")]
    TooFewMessages {
        /// Listed.
        listed: usize,
        /// Found.
        found: usize,
    },
    /// The chunks hold more roots than the diffs list.
    #[error("chunks hold more messages than the {listed} the diffs list")]
    TooManyMessages {
        /// Listed.
        listed: usize,
    },
}

impl QueueError {
    /// Whether the queue database is locked by another process (another node runs on the same directory).
    pub fn is_locked(&self) -> bool {
        matches!(self, Self::Kv(e) if e.is_locked())
    }

    pub(crate) fn invalid(what: impl Into<String>) -> Self {
        Self::InvalidData { what: what.into() }
    }
}

impl From<FormatError> for QueueError {
    fn from(e: FormatError) -> Self {
        Self::InvalidData {
            what: e.to_string(),
        }
    }
}

/// Result alias of the queue.
pub type Result<T, E = QueueError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    #[test]
    fn error_stays_small() {
        // Keeps `Result<T, QueueError>` cheap (clippy's `result_large_err` threshold is 128 bytes).
        assert!(size_of::<super::QueueError>() <= 128);
    }
}
