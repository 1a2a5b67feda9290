//! Column families of the `core` database, each declared as a typed table.
//!
//! Code reads and writes through these types ([`crate::db::CoreDb`] helpers), never raw slices, except where
//! a range operation needs the raw key bounds (GC, listing), which are built from the same key types.

use regolith_formats::archive::ArchiveEntryType;
use regolith_formats::{decode_block_id, encode_block_id, BlockId, BlockKey, HashBytes};

use crate::block_meta::MetaSnapshot;
use crate::error::{Result, StorageError};
use crate::persistent_state::{PersistentStateKey, PersistentStateValue};

/// A key or value with a byte encoding.
pub trait Codec: Sized {
    /// Encodes the value.
    fn encode(&self) -> Vec<u8>;
    /// Decodes a stored value; a wrong length or shape is a corruption error.
    fn decode(bytes: &[u8]) -> Result<Self>;
}

/// A column family with its key and value types.
pub trait Table {
    /// Column family name.
    const NAME: &'static str;
    /// Key type.
    type Key: Codec;
    /// Value type.
    type Value: Codec;
}

macro_rules! tables {
    ($($(#[$doc:meta])* $name:ident: $cf:literal, $key:ty => $value:ty;)*) => {
        $(
            $(#[$doc])*
            pub struct $name;
            impl Table for $name {
                const NAME: &'static str = $cf;
                type Key = $key;
                type Value = $value;
            }
        )*
        /// Names of every column family of the database.
        pub const ALL_TABLES: &[&str] = &[$($cf),*];
    };
}

tables! {
    /// Node state: ASCII names → values (`last_mc_block`, `init_mc_block`, `zerostate_id`: 80-byte ids;
    /// `zerostate_proof`: raw bytes; `db_version`: 3-byte semver).
    State: "state", StateKey => RawBytes;
    /// Block meta: root hash (32) → 12-byte meta (§2.4), merged with `block_meta_merge`.
    BlockHandles: "block_handles", HashBytes => MetaSnapshot;
    /// Known blocks in key order: block key (48) → file hash (32).
    BlockIds: "block_ids", BlockKey => HashBytes;
    /// Key-block index: mc seqno (u32 BE) → block id (80 LE). Never touched by GC.
    KeyBlocks: "key_blocks", SeqnoKey => BlockId;
    /// Connections: block key (48) ‖ direction (1) → connected id (80 LE).
    BlockConnections: "block_connections", ConnectionKey => BlockId;
    /// Components: block key (48) ‖ type (1: Block 0, Proof 1, QueueDiff 2) → zstd frame with content size.
    BlockComponents: "block_components", ComponentKey => RawBytes;
    /// Blocks of an archive being built: archive id (u32 BE) → concatenated 80-byte ids (merge `archive_ids_concat`).
    ArchiveBlockIds: "archive_block_ids", SeqnoKey => RawBytes;
    /// Archive events: archive id (u32 BE) ‖ event code (u32 BE) → empty or u32 LE.
    ArchiveEvents: "archive_events", ArchiveEventKey => RawBytes;
    /// Persistent states: block key (48) ‖ kind (1: shard 0, queue 1) → the state's file, size, chunk size
    /// and split parts (`persistent_state::PersistentStateValue`). A state is served only once recorded.
    PersistentStates: "persistent_states", PersistentStateKey => PersistentStateValue;
}

/// A state key name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateKey(pub &'static str);

impl Codec for StateKey {
    fn encode(&self) -> Vec<u8> {
        self.0.as_bytes().to_vec()
    }
    fn decode(_: &[u8]) -> Result<Self> {
        Err(StorageError::corruption(
            "state key",
            "state keys are not enumerated",
        ))
    }
}

/// Uninterpreted bytes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RawBytes(pub Vec<u8>);

impl Codec for RawBytes {
    fn encode(&self) -> Vec<u8> {
        self.0.clone()
    }
    fn decode(bytes: &[u8]) -> Result<Self> {
        Ok(Self(bytes.to_vec()))
    }
}

impl Codec for HashBytes {
    fn encode(&self) -> Vec<u8> {
        self.0.to_vec()
    }
    fn decode(bytes: &[u8]) -> Result<Self> {
        let arr: [u8; 32] = bytes.try_into().map_err(|_| {
            StorageError::corruption("hash", format!("expected 32 bytes, got {}", bytes.len()))
        })?;
        Ok(HashBytes(arr))
    }
}

impl Codec for MetaSnapshot {
    fn encode(&self) -> Vec<u8> {
        MetaSnapshot::encode(self).to_vec()
    }
    fn decode(bytes: &[u8]) -> Result<Self> {
        MetaSnapshot::decode(bytes)
    }
}

impl Codec for BlockKey {
    fn encode(&self) -> Vec<u8> {
        self.0.to_vec()
    }
    fn decode(bytes: &[u8]) -> Result<Self> {
        Ok(BlockKey::from_slice(bytes)?)
    }
}

impl Codec for BlockId {
    fn encode(&self) -> Vec<u8> {
        encode_block_id(self).to_vec()
    }
    fn decode(bytes: &[u8]) -> Result<Self> {
        Ok(decode_block_id(bytes)?)
    }
}

/// A u32 seqno or archive id, stored BE so byte order is numeric order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct SeqnoKey(pub u32);

impl Codec for SeqnoKey {
    fn encode(&self) -> Vec<u8> {
        self.0.to_be_bytes().to_vec()
    }
    fn decode(bytes: &[u8]) -> Result<Self> {
        let arr: [u8; 4] = bytes.try_into().map_err(|_| {
            StorageError::corruption("u32 key", format!("expected 4 bytes, got {}", bytes.len()))
        })?;
        Ok(Self(u32::from_be_bytes(arr)))
    }
}

/// Direction of a block connection (the key byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Predecessor.
    Prev1 = 0,
    /// Second predecessor after a merge.
    Prev2 = 1,
    /// Successor (left child after a split).
    Next1 = 2,
    /// Right child after a split.
    Next2 = 3,
}

impl Direction {
    /// All directions.
    pub const ALL: [Direction; 4] = [Self::Prev1, Self::Prev2, Self::Next1, Self::Next2];

    /// Looks a direction up by its key byte.
    pub fn from_byte(b: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|d| *d as u8 == b)
    }
}

/// Key of `block_connections`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionKey(pub BlockKey, pub Direction);

impl Codec for ConnectionKey {
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(49);
        out.extend_from_slice(self.0.as_bytes());
        out.push(self.1 as u8);
        out
    }
    fn decode(bytes: &[u8]) -> Result<Self> {
        if bytes.len() != 49 {
            return Err(StorageError::corruption(
                "connection key",
                format!("length {}", bytes.len()),
            ));
        }
        let dir = Direction::from_byte(bytes[48]).ok_or_else(|| {
            StorageError::corruption("connection key", format!("direction {}", bytes[48]))
        })?;
        Ok(Self(BlockKey::from_slice(&bytes[..48])?, dir))
    }
}

/// Key of `block_components`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ComponentKey(pub BlockKey, pub ArchiveEntryType);

impl Codec for ComponentKey {
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(49);
        out.extend_from_slice(self.0.as_bytes());
        out.push(self.1.as_byte());
        out
    }
    fn decode(bytes: &[u8]) -> Result<Self> {
        if bytes.len() != 49 {
            return Err(StorageError::corruption(
                "component key",
                format!("length {}", bytes.len()),
            ));
        }
        let ty = ArchiveEntryType::from_byte(bytes[48]).ok_or_else(|| {
            StorageError::corruption("component key", format!("type {}", bytes[48]))
        })?;
        Ok(Self(BlockKey::from_slice(&bytes[..48])?, ty))
    }
}

/// Key of `archive_events`: archive id BE ‖ event code BE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ArchiveEventKey {
    /// Archive id.
    pub archive_id: u32,
    /// Event code.
    pub event: u32,
}

impl Codec for ArchiveEventKey {
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8);
        out.extend_from_slice(&self.archive_id.to_be_bytes());
        out.extend_from_slice(&self.event.to_be_bytes());
        out
    }
    fn decode(bytes: &[u8]) -> Result<Self> {
        if bytes.len() != 8 {
            return Err(StorageError::corruption(
                "archive event key",
                format!("length {}", bytes.len()),
            ));
        }
        Ok(Self {
            archive_id: u32::from_be_bytes(bytes[0..4].try_into().unwrap()),
            event: u32::from_be_bytes(bytes[4..8].try_into().unwrap()),
        })
    }
}
