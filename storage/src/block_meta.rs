//! Block meta: the atomic flags word, its 12-byte on-disk form and the `block_meta_merge` operator.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Result, StorageError};

/// Length of the stored meta value.
pub const META_LEN: usize = 12;
/// Length of a `block_handles` row since layout 0.2: the meta, then the rest of the block's id (workchain,
/// prefix, seqno: 16; file hash: 32).
pub const HANDLE_LEN: usize = META_LEN + 16 + 32;

/// Block flags (bit numbers are normative, see storage.md §2.3).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct BlockFlags(pub u32);

macro_rules! flags {
    ($($(#[$doc:meta])* $name:ident = $bit:expr;)*) => {
        impl BlockFlags {
            $($(#[$doc])* pub const $name: Self = Self(1 << $bit);)*
            /// Every named flag with its name.
            pub const NAMED: &'static [(&'static str, BlockFlags)] = &[$((stringify!($name), Self::$name)),*];
        }
    };
}

flags! {
    /// Block data stored.
    HAS_DATA = 0;
    /// Proof stored.
    HAS_PROOF = 1;
    /// Queue diff stored.
    HAS_QUEUE_DIFF = 2;
    /// Shard state stored.
    HAS_STATE = 3;
    /// Persistent shard state written.
    HAS_PERSISTENT_SHARD_STATE = 4;
    /// Persistent queue state written.
    HAS_PERSISTENT_QUEUE_STATE = 5;
    /// Next1 connection stored.
    HAS_NEXT_1 = 6;
    /// Next2 connection stored.
    HAS_NEXT_2 = 7;
    /// Prev1 connection stored.
    HAS_PREV_1 = 8;
    /// Prev2 connection stored.
    HAS_PREV_2 = 9;
    /// Committed by the strider.
    IS_COMMITTED = 10;
    /// Key block (set only at creation).
    IS_KEY_BLOCK = 11;
    /// Persistent block.
    IS_PERSISTENT = 12;
    /// In-memory marker of a handle evicted by GC; never on disk.
    IS_REMOVED = 15;
    /// Zerostate.
    IS_ZEROSTATE = 16;
    /// Virtual state applied.
    HAS_VIRTUAL_STATE = 17;
    /// States GC protection start.
    SKIP_STATES_GC = 18;
    /// States GC protection end.
    SKIP_STATES_GC_FINISHED = 19;
    /// Blocks GC protection start.
    SKIP_BLOCKS_GC = 20;
    /// Blocks GC protection end.
    SKIP_BLOCKS_GC_FINISHED = 21;
}

impl BlockFlags {
    /// No flags.
    pub const EMPTY: Self = Self(0);
    /// Data, proof and queue diff.
    pub const HAS_ALL_BLOCK_PARTS: Self = Self(0b111);

    /// Whether every bit of `other` is set.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether any bit of `other` is set.
    pub const fn intersects(self, other: Self) -> bool {
        self.0 & other.0 != 0
    }

    /// Bits of both.
    pub const fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    /// Key, persistent or zerostate.
    pub const fn is_important(self) -> bool {
        self.intersects(Self(
            Self::IS_KEY_BLOCK.0 | Self::IS_PERSISTENT.0 | Self::IS_ZEROSTATE.0,
        ))
    }

    /// SKIP_BLOCKS_GC set and its FINISHED partner not.
    pub const fn skip_blocks_gc(self) -> bool {
        self.contains(Self::SKIP_BLOCKS_GC) && !self.contains(Self::SKIP_BLOCKS_GC_FINISHED)
    }

    /// SKIP_STATES_GC set and its FINISHED partner not.
    pub const fn skip_states_gc(self) -> bool {
        self.contains(Self::SKIP_STATES_GC) && !self.contains(Self::SKIP_STATES_GC_FINISHED)
    }

    /// Whether block GC must keep the block regardless of its height.
    pub const fn retain_during_gc(self) -> bool {
        self.is_important() || self.skip_blocks_gc() || self.skip_states_gc()
    }

    /// Names of the set flags (unknown bits as `bit<N>`).
    pub fn names(self) -> Vec<String> {
        let mut out = Vec::new();
        for bit in 0..32 {
            if self.0 & (1 << bit) == 0 {
                continue;
            }
            match Self::NAMED.iter().find(|(_, f)| f.0 == 1 << bit) {
                Some((name, _)) => out.push((*name).to_string()),
                None => out.push(format!("bit{bit}")),
            }
        }
        out
    }
}

impl std::ops::BitOr for BlockFlags {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        self.union(rhs)
    }
}

impl std::fmt::Debug for BlockFlags {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.names().join("|"))
    }
}

/// Meta of a block that is being created.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NewBlockMeta {
    /// Key block.
    pub is_key_block: bool,
    /// Generation time.
    pub gen_utime: u32,
    /// Seqno of the mc block that commits this block.
    pub ref_by_mc_seqno: u32,
}

impl NewBlockMeta {
    /// Meta of a zerostate (ref 0).
    pub const fn zero_state(gen_utime: u32, is_key_block: bool) -> Self {
        Self {
            is_key_block,
            gen_utime,
            ref_by_mc_seqno: 0,
        }
    }
}

/// A snapshot of a meta.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MetaSnapshot {
    /// Flags.
    pub flags: BlockFlags,
    /// Seqno of the referencing mc block.
    pub ref_by_mc_seqno: u32,
    /// Generation time.
    pub gen_utime: u32,
}

impl MetaSnapshot {
    /// The 12-byte stored form (bit 15 cleared).
    pub fn encode(&self) -> [u8; META_LEN] {
        let mut out = [0u8; META_LEN];
        out[0..4].copy_from_slice(&self.ref_by_mc_seqno.to_le_bytes());
        out[4..8].copy_from_slice(&(self.flags.0 & !BlockFlags::IS_REMOVED.0).to_le_bytes());
        out[8..12].copy_from_slice(&self.gen_utime.to_le_bytes());
        out
    }

    /// Decodes a stored value; any length but 12 is corruption.
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        if bytes.len() != META_LEN {
            return Err(StorageError::corruption(
                "block meta",
                format!("expected {META_LEN} bytes, got {}", bytes.len()),
            ));
        }
        Ok(Self {
            ref_by_mc_seqno: u32::from_le_bytes(bytes[0..4].try_into().unwrap()),
            flags: BlockFlags(u32::from_le_bytes(bytes[4..8].try_into().unwrap())),
            gen_utime: u32::from_le_bytes(bytes[8..12].try_into().unwrap()),
        })
    }
}

/// In-memory meta: an atomic word (flags in bits 32..63, ref in 0..31) plus the immutable gen_utime.
#[derive(Debug)]
pub struct BlockMeta {
    word: AtomicU64,
    gen_utime: u32,
}

impl BlockMeta {
    /// Meta of a new block.
    pub fn new(meta: NewBlockMeta) -> Self {
        let flags = if meta.is_key_block {
            BlockFlags::IS_KEY_BLOCK
        } else {
            BlockFlags::EMPTY
        };
        Self::from_snapshot(MetaSnapshot {
            flags,
            ref_by_mc_seqno: meta.ref_by_mc_seqno,
            gen_utime: meta.gen_utime,
        })
    }

    /// Meta from stored values.
    pub fn from_snapshot(s: MetaSnapshot) -> Self {
        Self {
            word: AtomicU64::new((u64::from(s.flags.0) << 32) | u64::from(s.ref_by_mc_seqno)),
            gen_utime: s.gen_utime,
        }
    }

    /// Current snapshot (acquire).
    pub fn load(&self) -> MetaSnapshot {
        let word = self.word.load(Ordering::Acquire);
        MetaSnapshot {
            flags: BlockFlags((word >> 32) as u32),
            ref_by_mc_seqno: word as u32,
            gen_utime: self.gen_utime,
        }
    }

    /// Current flags.
    pub fn flags(&self) -> BlockFlags {
        self.load().flags
    }

    /// Generation time.
    pub fn gen_utime(&self) -> u32 {
        self.gen_utime
    }

    /// Atomic OR; `true` iff at least one bit of `flags` was not set before.
    pub fn add_flags(&self, flags: BlockFlags) -> bool {
        let bits = u64::from(flags.0) << 32;
        let prev = self.word.fetch_or(bits, Ordering::Release);
        prev & bits != bits
    }

    /// Atomic AND-NOT; `true` iff any bit of `flags` was set. Only for the startup check and tests.
    pub fn remove_flags(&self, flags: BlockFlags) -> bool {
        let bits = u64::from(flags.0) << 32;
        let prev = self.word.fetch_and(!bits, Ordering::Release);
        prev & bits != 0
    }
}

/// Splits a `block_handles` value into its meta (12 bytes) and the rest of the block's id (48 bytes, or empty
/// in a merge operand and a row of layout 0.1); `None` for any other length.
pub(crate) fn split_handle_value(value: &[u8]) -> Option<(&[u8], &[u8])> {
    match value.len() {
        META_LEN | HANDLE_LEN => Some(value.split_at(META_LEN)),
        _ => None,
    }
}

/// The `block_meta_merge` operator: OR of flags (bit 15 cleared); ref and utime from the existing value or the
/// oldest operand; the rest of the existing value (the block's id) is kept as it is. Operands are 12-byte
/// metas, an existing value 12 or 60 bytes; on any other length it returns `None` (RocksDB reports corruption).
pub(crate) fn block_meta_merge(
    _key: &[u8],
    existing: Option<&[u8]>,
    operands: &rocksdb::MergeOperands,
) -> Option<Vec<u8>> {
    let (mut result, id) = match existing {
        Some(v) => {
            let (meta, id) = split_handle_value(v)?;
            (Some(MetaSnapshot::decode(meta).ok()?), id)
        }
        None => (None, &[][..]),
    };
    for op in operands {
        let op = MetaSnapshot::decode(op).ok()?;
        match &mut result {
            Some(r) => r.flags = r.flags | op.flags,
            None => result = Some(op),
        }
    }
    result.map(|r| [&r.encode()[..], id].concat())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_reference_example() {
        let meta = BlockMeta::new(NewBlockMeta {
            is_key_block: true,
            gen_utime: 123456789,
            ref_by_mc_seqno: 4311231,
        });
        let bytes = meta.load().encode();
        assert_eq!(
            bytes,
            [0xBF, 0xC8, 0x41, 0x00, 0x00, 0x08, 0x00, 0x00, 0x15, 0xCD, 0x5B, 0x07]
        );
        assert_eq!(MetaSnapshot::decode(&bytes).unwrap(), meta.load());
        assert!(MetaSnapshot::decode(&bytes[..11]).is_err());
        assert!(MetaSnapshot::decode(&[0u8; 13]).is_err());
    }

    #[test]
    fn add_and_remove_flags() {
        let meta = BlockMeta::new(NewBlockMeta::default());
        assert!(meta.add_flags(BlockFlags::HAS_ALL_BLOCK_PARTS));
        assert!(!meta.add_flags(BlockFlags::HAS_ALL_BLOCK_PARTS));
        let meta = BlockMeta::new(NewBlockMeta::default());
        meta.add_flags(BlockFlags::HAS_DATA);
        assert!(meta.add_flags(BlockFlags::HAS_DATA | BlockFlags::HAS_STATE));
        assert!(meta.remove_flags(BlockFlags::HAS_STATE | BlockFlags::IS_KEY_BLOCK));
        assert!(!meta.remove_flags(BlockFlags::HAS_STATE));
        // Unknown bits survive.
        assert!(meta.add_flags(BlockFlags(1 << 30)));
        assert!(meta.flags().contains(BlockFlags(1 << 30)));
    }

    #[test]
    fn encode_masks_removed_bit() {
        let s = MetaSnapshot {
            flags: BlockFlags::HAS_DATA | BlockFlags::IS_REMOVED,
            ref_by_mc_seqno: 1,
            gen_utime: 2,
        };
        let decoded = MetaSnapshot::decode(&s.encode()).unwrap();
        assert_eq!(decoded.flags, BlockFlags::HAS_DATA);
    }
}
