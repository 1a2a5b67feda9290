//! Column families of the `core` database (storage.md §10), each declared as a typed table of
//! `regolith-kv` with its RocksDB options beside it.
//!
//! Code reads and writes through these types, never raw slices; range operations build their bounds from
//! the same key types (a [`StoredBlockKey`] or a [`ShortIdPrefix`] is a prefix of every key of a block).
//! Formats' types (`BlockKey`, `BlockId`, `HashBytes`) are wrapped in `Stored*` newtypes, which carry
//! their byte encodings.

use regolith_formats::archive::ArchiveEntryType;
use regolith_formats::{
    decode_block_id, encode_block_id, BlockId, BlockKey, HashBytes, BLOCK_ID_LEN, BLOCK_KEY_LEN,
};
use regolith_kv::{tables, DecodeError};
pub use regolith_kv::{Codec, KeyRange, NameKey, RawBytes};
#[cfg(feature = "test-utils")]
pub use regolith_kv::Table;
use rocksdb::{BlockBasedOptions, DBCompressionType, MergeOperands, Options};

use crate::block_meta::{block_meta_merge, split_handle_value, MetaSnapshot, HANDLE_LEN, META_LEN};
use crate::config::StorageConfig;
use crate::persistent_state::{PersistentStateKey, PersistentStateValue};

tables! {
    /// The tables of the `core` database; options are built from the storage configuration (BlobDB of
    /// the components).
    pub schema CoreTables(StorageConfig);
    /// Node state: ASCII names → values (`last_mc_block`, `init_mc_block`, `zerostate_id`: 80-byte ids;
    /// `zerostate_proof`: raw bytes; `db_version`: 3-byte semver).
    State: "state", NameKey => RawBytes;
    /// Block handles: root hash (32) → 12-byte meta (§2.4) ‖ workchain, prefix, seqno (16) ‖ file hash (32),
    /// merged with `block_meta_merge` (operands are metas alone); point-lookup tuned. The one row a handle
    /// load reads.
    BlockHandles: "block_handles", StoredHash => StoredHandle, options = block_handles_options;
    /// Known blocks in key order: block key (48) → file hash (32).
    BlockIds: "block_ids", StoredBlockKey => StoredHash, options = block_ids_options;
    /// Key-block index: mc seqno (u32 BE) → block id (80 LE). Never touched by GC.
    KeyBlocks: "key_blocks", SeqnoKey => StoredBlockId;
    /// Connections: block key (48) ‖ direction (1) → connected id (80 LE).
    BlockConnections: "block_connections", ConnectionKey => StoredBlockId;
    /// Components: block key (48) ‖ type (1: Block 0, Proof 1, QueueDiff 2) → zstd frame with content size.
    /// BlobDB; no SST or blob compression (the frames are compressed).
    BlockComponents: "block_components", ComponentKey => RawBytes, options = block_components_options;
    /// Blocks of an archive being built: archive id (u32 BE) → concatenated 80-byte ids (merge
    /// `archive_ids_concat`, no compression).
    ArchiveBlockIds: "archive_block_ids", SeqnoKey => RawBytes, options = archive_block_ids_options;
    /// Archive events: archive id (u32 BE) ‖ event code (u32 BE) → empty or u32 LE.
    ArchiveEvents: "archive_events", ArchiveEventKey => RawBytes;
    /// Persistent states: block key (48) ‖ kind (1: shard 0, queue 1) → the state's file, size, chunk size
    /// and split parts (`persistent_state::PersistentStateValue`). A state is served only once recorded.
    PersistentStates: "persistent_states", PersistentStateKey => PersistentStateValue;
    /// Cells of the stored shard states (state.md §7.1): representation hash (32) → body (`d1 d2 ‖ bit_len u16
    /// LE ‖ repr depth u16 LE ‖ data ‖ (hash 32 ‖ depth u16 LE) per lower level, none for a pruned branch ‖
    /// child repr hashes`). Put once, deleted when its count reaches 0. Point reads only: no compression, a
    /// whole-key bloom filter, 4 KiB blocks.
    Cells: "cells", StoredHash => RawBytes, options = cells_options;
    /// Reference counts of the cells counted more than once: repr hash (32) → count (u64 LE, ≥ 2). No row
    /// means 1. No merge operator: a change must see the old count to find 0.
    CellRefs: "cell_refs", StoredHash => RefCount, options = cell_refs_options;
    /// Stored shard states: block key (48) → the state's root hash (32) ‖ the block's file hash (32), so that
    /// the row names its block id alone. This row, not HAS_STATE, says that a state is stored; each row counts
    /// once in its root's reference count.
    ShardStates: "shard_states", StoredBlockKey => StateRoot;
}

/// `cells`: read by key (lazy loading, existence checks of the write walk), scanned only by the checker.
fn cells_options(opts: &mut Options, _: &StorageConfig) {
    let mut block = BlockBasedOptions::default();
    block.set_bloom_filter(12.0, false);
    block.set_whole_key_filtering(true);
    block.set_block_size(4096);
    block.set_data_block_index_type(rocksdb::DataBlockIndexType::BinaryAndHash);
    opts.set_block_based_table_factory(&block);
    opts.set_compression_type(DBCompressionType::None);
    opts.set_memtable_whole_key_filtering(true);
    opts.set_memtable_prefix_bloom_ratio(0.05);
    // Written only at checkpoints: small memtables keep a sync's memory down (the default is 64 MiB each).
    opts.set_write_buffer_size(16 << 20);
}

/// `cell_refs`: small rows read by key on every count change; most lookups miss (a count of 1 has no row).
fn cell_refs_options(opts: &mut Options, _: &StorageConfig) {
    let mut block = BlockBasedOptions::default();
    block.set_bloom_filter(10.0, false);
    block.set_whole_key_filtering(true);
    opts.set_block_based_table_factory(&block);
    opts.set_memtable_whole_key_filtering(true);
    opts.set_memtable_prefix_bloom_ratio(0.05);
    opts.set_write_buffer_size(4 << 20);
}

/// `block_handles`: the meta merge operator, bloom filters, point-lookup tuning.
fn block_handles_options(opts: &mut Options, _: &StorageConfig) {
    opts.set_merge_operator("block_meta_merge", block_meta_merge, block_meta_merge);
    let mut block = BlockBasedOptions::default();
    block.set_bloom_filter(10.0, false);
    block.set_whole_key_filtering(true);
    opts.set_block_based_table_factory(&block);
    opts.optimize_for_point_lookup(64);
    // The table is only ever read by key, never iterated: a hashed memtable (buckets by the whole 32-byte
    // key) makes a write O(1) instead of a skiplist insert at a random position.
    opts.set_prefix_extractor(rocksdb::SliceTransform::create_fixed_prefix(32));
    opts.set_memtable_factory(rocksdb::MemtableFactory::HashSkipList {
        bucket_count: 1 << 20,
        height: 4,
        branching_factor: 4,
    });
}

/// `block_ids`: iterated in key order (short ids, GC, the startup check), and read by key on a handle load
/// only for a row of the 0.1 layout (a meta without the file hash): bloom filters and a hashed data-block
/// index for those point reads.
fn block_ids_options(opts: &mut Options, _: &StorageConfig) {
    let mut block = BlockBasedOptions::default();
    block.set_bloom_filter(10.0, false);
    block.set_whole_key_filtering(true);
    block.set_data_block_index_type(rocksdb::DataBlockIndexType::BinaryAndHash);
    block.set_data_block_hash_ratio(0.75);
    opts.set_block_based_table_factory(&block);
    opts.set_memtable_prefix_bloom_ratio(0.02);
    opts.set_memtable_whole_key_filtering(true);
}

/// `block_components`: BlobDB with the configured sizes and GC; the frames are compressed already.
fn block_components_options(opts: &mut Options, config: &StorageConfig) {
    let c = &config.components;
    opts.set_enable_blob_files(true);
    opts.set_min_blob_size(c.min_blob_size.as_u64());
    opts.set_blob_file_size(c.blob_file_size.as_u64());
    opts.set_enable_blob_gc(true);
    opts.set_blob_gc_age_cutoff(c.blob_gc_age_cutoff);
    opts.set_blob_compression_type(DBCompressionType::None);
    opts.set_compression_type(DBCompressionType::None);
}

/// `archive_block_ids`: the concatenating merge operator, no compression.
fn archive_block_ids_options(opts: &mut Options, _: &StorageConfig) {
    opts.set_merge_operator("archive_ids_concat", archive_ids_concat, archive_ids_concat);
    opts.set_compression_type(DBCompressionType::None);
}

/// The `archive_ids_concat` operator: the existing value followed by every operand, in order.
fn archive_ids_concat(
    _key: &[u8],
    existing: Option<&[u8]>,
    operands: &MergeOperands,
) -> Option<Vec<u8>> {
    let mut out = existing.map(<[u8]>::to_vec).unwrap_or_default();
    for op in operands {
        out.extend_from_slice(op);
    }
    Some(out)
}

type Result<T, E = DecodeError> = std::result::Result<T, E>;

/// A 32-byte hash as stored: the root hash keying `block_handles`, the file hash of `block_ids`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StoredHash(pub HashBytes);

impl Codec for StoredHash {
    type Encoded<'a> = [u8; 32];
    fn encode(&self) -> [u8; 32] {
        self.0 .0
    }
    fn decode(bytes: &[u8]) -> Result<Self> {
        DecodeError::check_len("hash", bytes, 32)?;
        Ok(Self(HashBytes(bytes.try_into().unwrap())))
    }
}

/// A reference count of `cell_refs` (u64 LE).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RefCount(pub u64);

impl Codec for RefCount {
    type Encoded<'a> = [u8; 8];
    fn encode(&self) -> [u8; 8] {
        self.0.to_le_bytes()
    }
    fn decode(bytes: &[u8]) -> Result<Self> {
        DecodeError::check_len("reference count", bytes, 8)?;
        Ok(Self(u64::from_le_bytes(bytes.try_into().unwrap())))
    }
}

/// A `shard_states` value: the state's root hash and the block's file hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateRoot {
    /// The state's root (repr) hash.
    pub root: HashBytes,
    /// The block's file hash.
    pub file_hash: HashBytes,
}

impl Codec for StateRoot {
    type Encoded<'a> = [u8; 64];
    fn encode(&self) -> [u8; 64] {
        let mut out = [0; 64];
        out[..32].copy_from_slice(&self.root.0);
        out[32..].copy_from_slice(&self.file_hash.0);
        out
    }
    fn decode(bytes: &[u8]) -> Result<Self> {
        DecodeError::check_len("state root", bytes, 64)?;
        Ok(Self {
            root: HashBytes(bytes[..32].try_into().unwrap()),
            file_hash: HashBytes(bytes[32..].try_into().unwrap()),
        })
    }
}

/// A `block_handles` value: the block's meta and, since data-dir layout 0.2, the rest of its id, so that the
/// row alone loads a handle for exactly that id (storage.md §5.1–§5.2 read a second row, `block_ids`, for it).
/// A merge operand is the meta alone (`id: None`, 12 bytes), as is a row written by layout 0.1 and not
/// migrated yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredHandle {
    /// The meta (§2.4).
    pub meta: MetaSnapshot,
    /// The block's id besides the root hash that keys the row; `None` in a merge operand or a row of 0.1.
    pub id: Option<HandleIdentity>,
}

/// What a handle row holds of its block's id besides the root hash: 16 bytes as a block key starts
/// (workchain BE ‖ prefix BE ‖ seqno BE), then the file hash (32).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HandleIdentity {
    /// Workchain, shard prefix and seqno, as the first 16 bytes of the block key.
    pub short_id: [u8; 16],
    /// The file hash.
    pub file_hash: HashBytes,
}

impl HandleIdentity {
    /// The identity of `id`.
    pub fn of(id: &BlockId) -> Self {
        Self::from_key(&BlockKey::of(id), id.file_hash)
    }

    /// The identity from a block key and a file hash (a `block_ids` row).
    pub fn from_key(key: &BlockKey, file_hash: HashBytes) -> Self {
        Self {
            short_id: key.0[..16].try_into().unwrap(),
            file_hash,
        }
    }
}

impl std::fmt::Display for HandleIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let workchain = i32::from_be_bytes(self.short_id[0..4].try_into().unwrap());
        let prefix = u64::from_be_bytes(self.short_id[4..12].try_into().unwrap());
        let seqno = u32::from_be_bytes(self.short_id[12..16].try_into().unwrap());
        write!(f, "{workchain}:{prefix:016x}:{seqno} with file hash {}", self.file_hash)
    }
}

impl From<MetaSnapshot> for StoredHandle {
    /// A merge operand: the meta alone.
    fn from(meta: MetaSnapshot) -> Self {
        Self { meta, id: None }
    }
}

/// A [`StoredHandle`] encoded: 12 or 60 bytes, without an allocation.
pub struct EncodedHandle {
    bytes: [u8; HANDLE_LEN],
    len: usize,
}

impl AsRef<[u8]> for EncodedHandle {
    fn as_ref(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

impl Codec for StoredHandle {
    type Encoded<'a> = EncodedHandle;
    fn encode(&self) -> EncodedHandle {
        let mut bytes = [0u8; HANDLE_LEN];
        bytes[..META_LEN].copy_from_slice(&self.meta.encode());
        let len = match &self.id {
            Some(id) => {
                bytes[META_LEN..META_LEN + 16].copy_from_slice(&id.short_id);
                bytes[META_LEN + 16..].copy_from_slice(&id.file_hash.0);
                HANDLE_LEN
            }
            None => META_LEN,
        };
        EncodedHandle { bytes, len }
    }
    fn decode(bytes: &[u8]) -> Result<Self> {
        let (meta, id) = split_handle_value(bytes).ok_or_else(|| {
            DecodeError::new(format!(
                "block handle of {} bytes, expected {META_LEN} or {HANDLE_LEN}",
                bytes.len()
            ))
        })?;
        Ok(Self {
            meta: MetaSnapshot::decode(meta).map_err(DecodeError::new)?,
            id: (!id.is_empty()).then(|| HandleIdentity {
                short_id: id[..16].try_into().unwrap(),
                file_hash: HashBytes(id[16..].try_into().unwrap()),
            }),
        })
    }
}

/// A block key (48: workchain BE ‖ prefix BE ‖ seqno BE ‖ root hash) as stored: the key of `block_ids`,
/// and the prefix of every key of a block in `block_connections`, `block_components` and
/// `persistent_states`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct StoredBlockKey(pub BlockKey);

impl Codec for StoredBlockKey {
    type Encoded<'a> = [u8; BLOCK_KEY_LEN];
    fn encode(&self) -> [u8; BLOCK_KEY_LEN] {
        self.0 .0
    }
    fn decode(bytes: &[u8]) -> Result<Self> {
        BlockKey::from_slice(bytes)
            .map(Self)
            .map_err(|e| DecodeError::new(format!("block key: {e}")))
    }
}

/// Every row of the blocks `first..=last` (in key order) of a table keyed or prefixed by the block key:
/// from `first` up to the successor of `last` (a 49-byte all-ff bound if `last` has none).
pub fn block_range(first: BlockKey, last: BlockKey) -> KeyRange {
    KeyRange::inclusive(&StoredBlockKey(first), &StoredBlockKey(last))
}

/// A block id stored as a value (80 B LE, §2.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredBlockId(pub BlockId);

impl Codec for StoredBlockId {
    type Encoded<'a> = [u8; BLOCK_ID_LEN];
    fn encode(&self) -> [u8; BLOCK_ID_LEN] {
        encode_block_id(&self.0)
    }
    fn decode(bytes: &[u8]) -> Result<Self> {
        decode_block_id(bytes)
            .map(Self)
            .map_err(|e| DecodeError::new(format!("block id: {e}")))
    }
}

/// The first 16 bytes of a block key, workchain BE ‖ prefix BE ‖ seqno BE: a range prefix of every block
/// with this short id (several on forks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShortIdPrefix {
    /// Workchain.
    pub workchain: i32,
    /// Shard prefix with its tag bit.
    pub prefix: u64,
    /// Seqno.
    pub seqno: u32,
}

impl Codec for ShortIdPrefix {
    type Encoded<'a> = [u8; 16];
    fn encode(&self) -> [u8; 16] {
        let mut out = [0u8; 16];
        out[..4].copy_from_slice(&self.workchain.to_be_bytes());
        out[4..12].copy_from_slice(&self.prefix.to_be_bytes());
        out[12..].copy_from_slice(&self.seqno.to_be_bytes());
        out
    }
    fn decode(_: &[u8]) -> Result<Self> {
        Err(DecodeError::new("short id prefixes are not stored"))
    }
}

/// A u32 seqno or archive id, stored BE so byte order is numeric order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct SeqnoKey(pub u32);

impl Codec for SeqnoKey {
    type Encoded<'a> = [u8; 4];
    fn encode(&self) -> [u8; 4] {
        self.0.to_be_bytes()
    }
    fn decode(bytes: &[u8]) -> Result<Self> {
        DecodeError::check_len("u32 key", bytes, 4)?;
        Ok(Self(u32::from_be_bytes(bytes.try_into().unwrap())))
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

/// Encodes a block key followed by one byte (connection and component keys).
fn block_key_and(key: &BlockKey, byte: u8) -> [u8; BLOCK_KEY_LEN + 1] {
    let mut out = [0u8; BLOCK_KEY_LEN + 1];
    out[..BLOCK_KEY_LEN].copy_from_slice(key.as_bytes());
    out[BLOCK_KEY_LEN] = byte;
    out
}

/// Decodes a block key followed by one byte.
fn split_block_key(what: &str, bytes: &[u8]) -> Result<(BlockKey, u8)> {
    DecodeError::check_len(what, bytes, BLOCK_KEY_LEN + 1)?;
    let key = BlockKey::from_slice(&bytes[..BLOCK_KEY_LEN])
        .map_err(|e| DecodeError::new(format!("{what}: {e}")))?;
    Ok((key, bytes[BLOCK_KEY_LEN]))
}

/// Key of `block_connections`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionKey(pub BlockKey, pub Direction);

impl Codec for ConnectionKey {
    type Encoded<'a> = [u8; BLOCK_KEY_LEN + 1];
    fn encode(&self) -> [u8; BLOCK_KEY_LEN + 1] {
        block_key_and(&self.0, self.1 as u8)
    }
    fn decode(bytes: &[u8]) -> Result<Self> {
        let (key, byte) = split_block_key("connection key", bytes)?;
        let dir = Direction::from_byte(byte)
            .ok_or_else(|| DecodeError::new(format!("connection key: direction {byte}")))?;
        Ok(Self(key, dir))
    }
}

/// Key of `block_components`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ComponentKey(pub BlockKey, pub ArchiveEntryType);

impl Codec for ComponentKey {
    type Encoded<'a> = [u8; BLOCK_KEY_LEN + 1];
    fn encode(&self) -> [u8; BLOCK_KEY_LEN + 1] {
        block_key_and(&self.0, self.1.as_byte())
    }
    fn decode(bytes: &[u8]) -> Result<Self> {
        let (key, byte) = split_block_key("component key", bytes)?;
        let ty = ArchiveEntryType::from_byte(byte)
            .ok_or_else(|| DecodeError::new(format!("component key: type {byte}")))?;
        Ok(Self(key, ty))
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
    type Encoded<'a> = [u8; 8];
    fn encode(&self) -> [u8; 8] {
        let mut out = [0u8; 8];
        out[..4].copy_from_slice(&self.archive_id.to_be_bytes());
        out[4..].copy_from_slice(&self.event.to_be_bytes());
        out
    }
    fn decode(bytes: &[u8]) -> Result<Self> {
        DecodeError::check_len("archive event key", bytes, 8)?;
        Ok(Self {
            archive_id: u32::from_be_bytes(bytes[0..4].try_into().unwrap()),
            event: u32::from_be_bytes(bytes[4..8].try_into().unwrap()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_and_reject_bad_bytes() {
        let key = BlockKey::from_parts(-1, 0x8000_0000_0000_0000, 7, &HashBytes([3; 32]));
        let c = ConnectionKey(key, Direction::Next1);
        assert_eq!(ConnectionKey::decode(&c.encode()).unwrap(), c);
        let mut bad = c.encode();
        bad[48] = 9;
        assert!(ConnectionKey::decode(&bad).is_err());
        assert!(ConnectionKey::decode(&bad[..48]).is_err());
        let p = ComponentKey(key, ArchiveEntryType::QueueDiff);
        assert_eq!(ComponentKey::decode(&p.encode()).unwrap(), p);
        assert_eq!(
            ShortIdPrefix {
                workchain: -1,
                prefix: 0x8000_0000_0000_0000,
                seqno: 7
            }
            .encode(),
            key.0[..16]
        );
        let e = ArchiveEventKey {
            archive_id: 5,
            event: 400,
        };
        assert_eq!(ArchiveEventKey::decode(&e.encode()).unwrap(), e);
        assert!(SeqnoKey::decode(&[1, 2, 3]).is_err());
        assert!(StoredHash::decode(&[0; 31]).is_err());
    }
}
