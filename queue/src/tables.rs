//! The column families of the `int_queue` database (the six of queue.md §4, plus the GC bounds), each declared as a typed table.
//!
//! Key encodings are fixed width and big-endian, so byte order is key order. Code reads and writes through
//! these types; range operations build their raw bounds from the same encoders (`*_prefix` helpers).

use regolith_formats::{BlockId, HashBytes, ShardIdent};

use regolith_kv::{tables, DecodeError};
pub use regolith_kv::{Codec, NameKey};
#[cfg(feature = "test-utils")]
pub use regolith_kv::Table;
use rocksdb::{BlockBasedOptions, Cache, DBCompressionType, Options};

use crate::diff::CommitPointer;
use crate::diff_info::DiffInfo;
use crate::key::{
    shard_from_bytes, shard_to_bytes, PartitionIdx, QueueKey, QUEUE_KEY_LEN, SHARD_LEN,
};
use crate::router::{RouterAddr, ROUTER_ADDR_LEN};

tables! {
    /// The seven tables of the `int_queue` database (RocksDB's `default` stays empty); options are built
    /// around the block cache they share.
    pub schema QueueTables(Cache);
    /// Message bodies: partition (2) ‖ source shard (12) ‖ message key (40) = 54 B →
    /// dest workchain i8 (1) ‖ dest address prefix u64 LE (8) ‖ message BOC.
    ShardIntMessages: "shard_int_messages", MessageKey => MessageEntry, options = message_options;
    /// Statistics rows: source shard (12) ‖ partition (2) ‖ diff max_message (40) ‖ dest RouterAddr (33) = 87 B
    /// → count u64 LE. The first 54 bytes are the diff prefix; ranges always use prefix bounds.
    IntMsgStatistics: "int_msg_statistics", StatKey => Count, options = bulk_options;
    /// Diff tail: shard (12) ‖ diff max_message (40) = 52 B → seqno u32 LE.
    IntMsgDiffsTail: "int_msg_diffs_tail", TailKey => TailSeqno, options = bulk_options;
    /// Diff records: shard (12) ‖ seqno u32 BE = 16 B → [`DiffInfo`] bytes.
    IntMsgDiffInfo: "int_msg_diff_info", DiffInfoKey => DiffInfo, options = bulk_options;
    /// Commit pointers: shard (12) → queue_key (40, lt BE) ‖ seqno u32 BE = 44 B.
    IntMsgCommitPointer: "int_msg_commit_pointer", ShardKey => CommitPointer, options = point_options;
    /// Single values: ASCII `last_committed_mc_block_id` → BlockId, 80 B: shard (12, BE) ‖ seqno u32 BE ‖
    /// root_hash ‖ file_hash.
    IntMsgVar: "int_msg_var", NameKey => BlockIdBe, options = point_options;
    /// GC bounds set by the last commit: partition (2, BE) ‖ source shard (12) = 14 B → inclusive bound
    /// queue key (40). Written in the commit's batch, so the bounds survive a restart (a deviation from
    /// queue.md §5.5, which keeps them in memory only: a node that restarts at its tip would otherwise never
    /// collect until the chain moves).
    IntMsgGcBounds: "int_msg_gc_bounds", GcBoundKey => QueueKey, options = point_options;
}

/// Write buffer size of the bulk families.
const WRITE_BUFFER_BYTES: usize = 256 << 20;
/// Data block size of message bodies.
const MESSAGE_BLOCK_BYTES: usize = 64 << 10;
/// Minimum blob size of message bodies.
const MIN_BLOB_BYTES: u64 = 32 << 10;

/// The bulk families: no compression, big write buffers, and no auto compaction (every range delete is
/// followed by an explicit range compaction instead).
fn bulk_options(opts: &mut Options, cache: &Cache) {
    let mut block = BlockBasedOptions::default();
    block.set_block_cache(cache);
    opts.set_block_based_table_factory(&block);
    opts.set_compression_type(DBCompressionType::None);
    opts.set_write_buffer_size(WRITE_BUFFER_BYTES);
    opts.set_max_write_buffer_number(2);
    opts.set_disable_auto_compactions(true);
}

/// Message bodies: a bulk family with BlobDB for large bodies, in 64 KiB blocks (the table is only ever
/// scanned in key order, never read by key: a big block means fewer block reads, cache lookups and
/// checksums per message).
fn message_options(opts: &mut Options, cache: &Cache) {
    bulk_options(opts, cache);
    let mut block = BlockBasedOptions::default();
    block.set_block_cache(cache);
    block.set_block_size(MESSAGE_BLOCK_BYTES);
    opts.set_block_based_table_factory(&block);
    opts.set_enable_blob_files(true);
    opts.set_min_blob_size(MIN_BLOB_BYTES);
    opts.set_enable_blob_gc(true);
    opts.set_blob_compression_type(DBCompressionType::None);
}

/// The small point-lookup families: bloom filters, memtable bloom.
fn point_options(opts: &mut Options, cache: &Cache) {
    let mut block = BlockBasedOptions::default();
    block.set_block_cache(cache);
    block.set_bloom_filter(10.0, false);
    block.set_whole_key_filtering(true);
    opts.set_block_based_table_factory(&block);
    opts.set_memtable_whole_key_filtering(true);
    opts.set_memtable_prefix_bloom_ratio(0.1);
}

type Result<T, E = DecodeError> = std::result::Result<T, E>;

/// A decode of a part (shard, queue key, router address) as a row decode error.
fn part<T>(result: crate::error::Result<T>) -> Result<T> {
    result.map_err(DecodeError::new)
}

/// Length of a message key.
pub const MESSAGE_KEY_LEN: usize = 2 + SHARD_LEN + QUEUE_KEY_LEN;
/// Length of a statistics key.
pub const STAT_KEY_LEN: usize = DIFF_PREFIX_LEN + ROUTER_ADDR_LEN;
/// Length of a statistics diff prefix: shard ‖ partition ‖ max_message.
pub const DIFF_PREFIX_LEN: usize = SHARD_LEN + 2 + QUEUE_KEY_LEN;
/// Length of a tail key.
pub const TAIL_KEY_LEN: usize = SHARD_LEN + QUEUE_KEY_LEN;
/// Length of the value header of a message: dest workchain ‖ dest prefix LE.
pub const MESSAGE_HEADER_LEN: usize = 9;
/// The key of the last committed mc block in `int_msg_var`.
pub const LAST_COMMITTED_MC_BLOCK_ID: NameKey = NameKey("last_committed_mc_block_id");

fn check_len(what: &str, bytes: &[u8], len: usize) -> Result<()> {
    DecodeError::check_len(what, bytes, len)
}

/// Key of `shard_int_messages`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct MessageKey {
    /// Partition.
    pub partition: PartitionIdx,
    /// Source shard.
    pub shard: ShardIdent,
    /// Message key.
    pub key: QueueKey,
}

impl MessageKey {
    /// The fixed-size byte form.
    pub fn to_bytes(self) -> [u8; MESSAGE_KEY_LEN] {
        let mut out = [0u8; MESSAGE_KEY_LEN];
        out[..2].copy_from_slice(&self.partition.to_be_bytes());
        out[2..14].copy_from_slice(&shard_to_bytes(&self.shard));
        out[14..].copy_from_slice(&self.key.to_bytes());
        out
    }
}

impl Codec for MessageKey {
    type Encoded<'a> = [u8; MESSAGE_KEY_LEN];
    fn encode(&self) -> [u8; MESSAGE_KEY_LEN] {
        self.to_bytes()
    }
    fn decode(bytes: &[u8]) -> Result<Self> {
        check_len("message key", bytes, MESSAGE_KEY_LEN)?;
        Ok(Self {
            partition: u16::from_be_bytes([bytes[0], bytes[1]]),
            shard: part(shard_from_bytes(&bytes[2..14]))?,
            key: part(QueueKey::from_bytes(&bytes[14..]))?,
        })
    }
}

/// Value of `shard_int_messages`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageEntry {
    /// Destination workchain.
    pub dest_workchain: i8,
    /// Destination address prefix.
    pub dest_prefix: u64,
    /// The serialized message.
    pub body: Vec<u8>,
}

impl MessageEntry {
    /// Writes the value header.
    pub fn write_header(out: &mut Vec<u8>, dest_workchain: i8, dest_prefix: u64) {
        out.push(dest_workchain as u8);
        out.extend_from_slice(&dest_prefix.to_le_bytes());
    }

    /// Reads the value header without touching the body: (dest workchain, dest prefix, body).
    pub fn split(bytes: &[u8]) -> crate::error::Result<(i8, u64, &[u8])> {
        if bytes.len() < MESSAGE_HEADER_LEN {
            return Err(crate::error::QueueError::invalid(format!(
                "message value of {} bytes is shorter than its header",
                bytes.len()
            )));
        }
        Ok((
            bytes[0] as i8,
            u64::from_le_bytes(bytes[1..9].try_into().unwrap()),
            &bytes[MESSAGE_HEADER_LEN..],
        ))
    }
}

impl Codec for MessageEntry {
    type Encoded<'a> = Vec<u8>;
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(MESSAGE_HEADER_LEN + self.body.len());
        Self::write_header(&mut out, self.dest_workchain, self.dest_prefix);
        out.extend_from_slice(&self.body);
        out
    }
    fn decode(bytes: &[u8]) -> Result<Self> {
        let (dest_workchain, dest_prefix, body) = part(Self::split(bytes))?;
        Ok(Self {
            dest_workchain,
            dest_prefix,
            body: body.to_vec(),
        })
    }
}

/// The 54-byte prefix `shard ‖ partition ‖ max_message` of a diff's rows in `int_msg_statistics`, as a
/// range bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiffPrefix {
    /// Source shard.
    pub shard: ShardIdent,
    /// Partition.
    pub partition: PartitionIdx,
    /// `max_message` of the diff.
    pub max_message: QueueKey,
}

impl Codec for DiffPrefix {
    type Encoded<'a> = [u8; DIFF_PREFIX_LEN];
    fn encode(&self) -> [u8; DIFF_PREFIX_LEN] {
        diff_prefix(&self.shard, self.partition, &self.max_message)
    }
    fn decode(_: &[u8]) -> Result<Self> {
        Err(DecodeError::new("diff prefixes are not stored"))
    }
}

/// Key of `int_msg_statistics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct StatKey {
    /// Source shard.
    pub shard: ShardIdent,
    /// Partition.
    pub partition: PartitionIdx,
    /// `max_message` of the diff.
    pub max_message: QueueKey,
    /// Destination.
    pub dest: RouterAddr,
}

/// The 54-byte diff prefix `shard ‖ partition ‖ max_message` of statistics rows.
pub fn diff_prefix(
    shard: &ShardIdent,
    partition: PartitionIdx,
    max_message: &QueueKey,
) -> [u8; DIFF_PREFIX_LEN] {
    let mut out = [0u8; DIFF_PREFIX_LEN];
    out[..12].copy_from_slice(&shard_to_bytes(shard));
    out[12..14].copy_from_slice(&partition.to_be_bytes());
    out[14..].copy_from_slice(&max_message.to_bytes());
    out
}

impl Codec for StatKey {
    type Encoded<'a> = [u8; STAT_KEY_LEN];
    fn encode(&self) -> [u8; STAT_KEY_LEN] {
        let mut out = [0u8; STAT_KEY_LEN];
        out[..DIFF_PREFIX_LEN].copy_from_slice(&diff_prefix(
            &self.shard,
            self.partition,
            &self.max_message,
        ));
        out[DIFF_PREFIX_LEN..].copy_from_slice(&self.dest.to_bytes());
        out
    }
    fn decode(bytes: &[u8]) -> Result<Self> {
        check_len("statistics key", bytes, STAT_KEY_LEN)?;
        Ok(Self {
            shard: part(shard_from_bytes(&bytes[..12]))?,
            partition: u16::from_be_bytes([bytes[12], bytes[13]]),
            max_message: part(QueueKey::from_bytes(&bytes[14..54]))?,
            dest: part(RouterAddr::from_bytes(&bytes[54..]))?,
        })
    }
}

/// A u64 LE count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Count(pub u64);

impl Codec for Count {
    type Encoded<'a> = [u8; 8];
    fn encode(&self) -> [u8; 8] {
        self.0.to_le_bytes()
    }
    fn decode(bytes: &[u8]) -> Result<Self> {
        check_len("count", bytes, 8)?;
        Ok(Self(u64::from_le_bytes(bytes.try_into().unwrap())))
    }
}

/// Key of `int_msg_diffs_tail`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct TailKey {
    /// Shard.
    pub shard: ShardIdent,
    /// `max_message` of the diff.
    pub max_message: QueueKey,
}

impl TailKey {
    /// The fixed-size byte form.
    pub fn to_bytes(self) -> [u8; TAIL_KEY_LEN] {
        let mut out = [0u8; TAIL_KEY_LEN];
        out[..12].copy_from_slice(&shard_to_bytes(&self.shard));
        out[12..].copy_from_slice(&self.max_message.to_bytes());
        out
    }
}

impl Codec for TailKey {
    type Encoded<'a> = [u8; TAIL_KEY_LEN];
    fn encode(&self) -> [u8; TAIL_KEY_LEN] {
        self.to_bytes()
    }
    fn decode(bytes: &[u8]) -> Result<Self> {
        check_len("tail key", bytes, TAIL_KEY_LEN)?;
        Ok(Self {
            shard: part(shard_from_bytes(&bytes[..12]))?,
            max_message: part(QueueKey::from_bytes(&bytes[12..]))?,
        })
    }
}

/// A seqno stored u32 LE (tail values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TailSeqno(pub u32);

impl Codec for TailSeqno {
    type Encoded<'a> = [u8; 4];
    fn encode(&self) -> [u8; 4] {
        self.0.to_le_bytes()
    }
    fn decode(bytes: &[u8]) -> Result<Self> {
        check_len("tail seqno", bytes, 4)?;
        Ok(Self(u32::from_le_bytes(bytes.try_into().unwrap())))
    }
}

/// Key of `int_msg_diff_info`: shard ‖ seqno BE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct DiffInfoKey {
    /// Shard.
    pub shard: ShardIdent,
    /// Seqno.
    pub seqno: u32,
}

impl DiffInfoKey {
    /// The fixed-size byte form.
    pub fn to_bytes(self) -> [u8; 16] {
        let mut out = [0u8; 16];
        out[..12].copy_from_slice(&shard_to_bytes(&self.shard));
        out[12..].copy_from_slice(&self.seqno.to_be_bytes());
        out
    }
}

impl Codec for DiffInfoKey {
    type Encoded<'a> = [u8; 16];
    fn encode(&self) -> [u8; 16] {
        self.to_bytes()
    }
    fn decode(bytes: &[u8]) -> Result<Self> {
        check_len("diff record key", bytes, 16)?;
        Ok(Self {
            shard: part(shard_from_bytes(&bytes[..12]))?,
            seqno: u32::from_be_bytes(bytes[12..].try_into().unwrap()),
        })
    }
}

impl Codec for DiffInfo {
    type Encoded<'a> = Vec<u8>;
    fn encode(&self) -> Vec<u8> {
        DiffInfo::encode(self)
    }
    fn decode(bytes: &[u8]) -> Result<Self> {
        part(DiffInfo::decode(bytes))
    }
}

/// A shard as a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ShardKey(pub ShardIdent);

impl Codec for ShardKey {
    type Encoded<'a> = [u8; SHARD_LEN];
    fn encode(&self) -> [u8; SHARD_LEN] {
        shard_to_bytes(&self.0)
    }
    fn decode(bytes: &[u8]) -> Result<Self> {
        Ok(Self(part(shard_from_bytes(bytes))?))
    }
}

impl Codec for CommitPointer {
    type Encoded<'a> = [u8; 44];
    fn encode(&self) -> [u8; 44] {
        let mut out = [0u8; 44];
        out[..40].copy_from_slice(&self.queue_key.to_bytes());
        out[40..].copy_from_slice(&self.seqno.to_be_bytes());
        out
    }
    fn decode(bytes: &[u8]) -> Result<Self> {
        check_len("commit pointer", bytes, 44)?;
        Ok(Self {
            queue_key: part(QueueKey::from_bytes(&bytes[..40]))?,
            seqno: u32::from_be_bytes(bytes[40..].try_into().unwrap()),
        })
    }
}

/// The key of a GC bound: (partition, source shard).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct GcBoundKey {
    /// The partition.
    pub partition: PartitionIdx,
    /// The source shard whose messages the bound covers.
    pub shard: ShardIdent,
}

impl Codec for GcBoundKey {
    type Encoded<'a> = [u8; 2 + SHARD_LEN];
    fn encode(&self) -> [u8; 2 + SHARD_LEN] {
        let mut out = [0u8; 2 + SHARD_LEN];
        out[..2].copy_from_slice(&self.partition.to_be_bytes());
        out[2..].copy_from_slice(&shard_to_bytes(&self.shard));
        out
    }
    fn decode(bytes: &[u8]) -> Result<Self> {
        check_len("gc bound key", bytes, 2 + SHARD_LEN)?;
        Ok(Self {
            partition: u16::from_be_bytes([bytes[0], bytes[1]]),
            shard: part(shard_from_bytes(&bytes[2..]))?,
        })
    }
}

impl Codec for QueueKey {
    type Encoded<'a> = [u8; QUEUE_KEY_LEN];
    fn encode(&self) -> [u8; QUEUE_KEY_LEN] {
        self.to_bytes()
    }
    fn decode(bytes: &[u8]) -> Result<Self> {
        check_len("queue key", bytes, QUEUE_KEY_LEN)?;
        part(QueueKey::from_bytes(bytes))
    }
}

/// A block id in the queue's big-endian 80-byte form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockIdBe(pub BlockId);

impl Codec for BlockIdBe {
    type Encoded<'a> = [u8; 80];
    fn encode(&self) -> [u8; 80] {
        let mut out = [0u8; 80];
        out[..12].copy_from_slice(&shard_to_bytes(&self.0.shard));
        out[12..16].copy_from_slice(&self.0.seqno.to_be_bytes());
        out[16..48].copy_from_slice(&self.0.root_hash.0);
        out[48..].copy_from_slice(&self.0.file_hash.0);
        out
    }
    fn decode(bytes: &[u8]) -> Result<Self> {
        check_len("block id", bytes, 80)?;
        Ok(Self(BlockId {
            shard: part(shard_from_bytes(&bytes[..12]))?,
            seqno: u32::from_be_bytes(bytes[12..16].try_into().unwrap()),
            root_hash: HashBytes(bytes[16..48].try_into().unwrap()),
            file_hash: HashBytes(bytes[48..80].try_into().unwrap()),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_key_layout() {
        let key = MessageKey {
            partition: 1,
            shard: ShardIdent::BASECHAIN,
            key: QueueKey::new(0x0102030405060708, HashBytes([0xaa; 32])),
        };
        let bytes = key.encode();
        assert_eq!(bytes.len(), 54);
        let mut expected = vec![0x00, 0x01, 0, 0, 0, 0, 0x80, 0, 0, 0, 0, 0, 0, 0];
        expected.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        expected.extend_from_slice(&[0xaa; 32]);
        assert_eq!(bytes.to_vec(), expected);
        assert_eq!(MessageKey::decode(&bytes).unwrap(), key);
        let mut value = Vec::new();
        MessageEntry::write_header(&mut value, -1, 0x1122334455667788);
        assert_eq!(
            value,
            [0xff, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11]
        );
    }

    #[test]
    fn fixed_lengths() {
        let stat = StatKey {
            shard: ShardIdent::MASTERCHAIN,
            partition: 0,
            max_message: QueueKey::MAX,
            dest: RouterAddr::MIN,
        };
        assert_eq!(stat.encode().len(), 87);
        assert_eq!(StatKey::decode(&stat.encode()).unwrap(), stat);
        let tail = TailKey {
            shard: ShardIdent::BASECHAIN,
            max_message: QueueKey::MIN,
        };
        assert_eq!(tail.encode().len(), 52);
        let info = DiffInfoKey {
            shard: ShardIdent::BASECHAIN,
            seqno: 7,
        };
        assert_eq!(DiffInfoKey::decode(&info.encode()).unwrap(), info);
        let ptr = CommitPointer {
            queue_key: QueueKey::max_for_lt(5),
            seqno: 3,
        };
        assert_eq!(ptr.encode().len(), 44);
        assert_eq!(CommitPointer::decode(&ptr.encode()).unwrap(), ptr);
        let id = BlockIdBe(BlockId {
            shard: ShardIdent::MASTERCHAIN,
            seqno: 9,
            root_hash: HashBytes([1; 32]),
            file_hash: HashBytes([2; 32]),
        });
        assert_eq!(id.encode().len(), 80);
        assert_eq!(BlockIdBe::decode(&id.encode()).unwrap(), id);
    }
}
