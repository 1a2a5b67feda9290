//! Message values stored in the queue: the [`MessageValue`] trait and the production [`EnqueuedMessage`].

use tycho_types::cell::{Cell, Load};
use tycho_types::models::{IntAddr, IntMsgInfo, MsgInfo};

use crate::key::QueueKey;
use crate::message_boc;

/// A message the queue can store: serializable, keyed by (created_lt, cell hash).
pub trait MessageValue: Send + Sync + Sized + 'static {
    /// Appends the stored body (after the 9-byte destination header) to `out`.
    fn serialize(&self, out: &mut Vec<u8>);
    /// Decodes a stored body, which the row's `key` names; the error says what was wrong.
    fn deserialize(key: &QueueKey, bytes: &[u8]) -> Result<Self, String>;
    /// The queue key: (created_lt, representation hash of the cell).
    fn key(&self) -> QueueKey;
    /// Source address.
    fn source(&self) -> &IntAddr;
    /// Destination address.
    fn destination(&self) -> &IntAddr;
    /// The internal message info.
    fn info(&self) -> &IntMsgInfo;
    /// The message cell.
    fn cell(&self) -> &Cell;
}

/// An internal message: its parsed info and its cell. Stored as a single-root BOC of the cell whose cells
/// below the root carry their hashes (the root's is the key's), so that reading it back hashes nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnqueuedMessage {
    /// Parsed info.
    pub info: IntMsgInfo,
    /// The message cell.
    pub cell: Cell,
}

impl EnqueuedMessage {
    /// Parses a message cell; a non-internal message is an error.
    pub fn from_cell(cell: Cell) -> Result<Self, String> {
        let mut slice = cell.as_slice().map_err(|e| format!("message cell: {e}"))?;
        let info = MsgInfo::load_from(&mut slice).map_err(|e| format!("message info: {e}"))?;
        match info {
            MsgInfo::Int(info) => Ok(Self { info, cell }),
            MsgInfo::ExtIn(_) | MsgInfo::ExtOut(_) => Err("not an internal message".into()),
        }
    }

    /// The message hash (representation hash of the cell).
    pub fn hash(&self) -> &regolith_formats::HashBytes {
        self.cell.repr_hash()
    }
}

impl PartialOrd for EnqueuedMessage {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for EnqueuedMessage {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key().cmp(&other.key())
    }
}

impl MessageValue for EnqueuedMessage {
    fn serialize(&self, out: &mut Vec<u8>) {
        message_boc::encode(self.cell.as_ref(), out);
    }

    fn deserialize(key: &QueueKey, bytes: &[u8]) -> Result<Self, String> {
        let message = Self::from_cell(message_boc::decode(bytes, &key.hash)?)?;
        if message.info.created_lt != key.lt {
            return Err(format!(
                "message created at lt {}, its key says {}",
                message.info.created_lt, key.lt
            ));
        }
        Ok(message)
    }

    fn key(&self) -> QueueKey {
        QueueKey::new(self.info.created_lt, *self.cell.repr_hash())
    }

    fn source(&self) -> &IntAddr {
        &self.info.src
    }

    fn destination(&self) -> &IntAddr {
        &self.info.dst
    }

    fn info(&self) -> &IntMsgInfo {
        &self.info
    }

    fn cell(&self) -> &Cell {
        &self.cell
    }
}
