//! Queue keys (lt, hash), partitions, shard byte encodings and ranges (queue.md §2).

use std::ops::Bound;

use regolith_formats::{HashBytes, ShardIdent};

use crate::error::{QueueError, Result};

/// A partition index: 0 = main, 1 = low priority; storage and APIs accept any u16.
pub type PartitionIdx = u16;

/// A position in the queue: (lt, message hash), ordered by lt, then by hash bytes.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct QueueKey {
    /// Logical time (`created_lt` of a message).
    pub lt: u64,
    /// Representation hash of the message cell.
    pub hash: HashBytes,
}

impl std::fmt::Debug for QueueKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "({}, {})", self.lt, self.hash)
    }
}

/// Length of a stored queue key: lt u64 BE ‖ hash.
pub(crate) const QUEUE_KEY_LEN: usize = 40;
/// Length of a stored shard: workchain i32 BE ‖ prefix u64 BE.
pub(crate) const SHARD_LEN: usize = 12;

impl QueueKey {
    /// The smallest key.
    pub const MIN: Self = Self {
        lt: 0,
        hash: HashBytes::ZERO,
    };
    /// The largest key.
    pub const MAX: Self = Self {
        lt: u64::MAX,
        hash: HashBytes([0xff; 32]),
    };

    /// Builds a key.
    pub const fn new(lt: u64, hash: HashBytes) -> Self {
        Self { lt, hash }
    }

    /// The smallest key with this lt.
    pub const fn min_for_lt(lt: u64) -> Self {
        Self {
            lt,
            hash: HashBytes::ZERO,
        }
    }

    /// The largest key with this lt.
    pub const fn max_for_lt(lt: u64) -> Self {
        Self {
            lt,
            hash: HashBytes([0xff; 32]),
        }
    }

    /// The smallest key greater than this one; `MAX` saturates.
    pub fn next_value(&self) -> Self {
        let mut hash = self.hash.0;
        for byte in hash.iter_mut().rev() {
            if *byte == 0xff {
                *byte = 0;
            } else {
                *byte += 1;
                return Self {
                    lt: self.lt,
                    hash: HashBytes(hash),
                };
            }
        }
        match self.lt.checked_add(1) {
            Some(lt) => Self::min_for_lt(lt),
            None => Self::MAX,
        }
    }

    /// The storage form: lt BE ‖ hash.
    pub fn to_bytes(&self) -> [u8; QUEUE_KEY_LEN] {
        let mut out = [0u8; QUEUE_KEY_LEN];
        out[..8].copy_from_slice(&self.lt.to_be_bytes());
        out[8..].copy_from_slice(&self.hash.0);
        out
    }

    /// Decodes the storage form.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        if bytes.len() != QUEUE_KEY_LEN {
            return Err(QueueError::invalid(format!(
                "queue key of {} bytes, expected {QUEUE_KEY_LEN}",
                bytes.len()
            )));
        }
        Ok(Self {
            lt: u64::from_be_bytes(bytes[..8].try_into().unwrap()),
            hash: HashBytes(bytes[8..].try_into().unwrap()),
        })
    }
}

impl From<regolith_formats::queue_diff::QueueKey> for QueueKey {
    fn from(k: regolith_formats::queue_diff::QueueKey) -> Self {
        Self {
            lt: k.lt,
            hash: k.hash,
        }
    }
}

impl From<QueueKey> for regolith_formats::queue_diff::QueueKey {
    fn from(k: QueueKey) -> Self {
        Self {
            lt: k.lt,
            hash: k.hash,
        }
    }
}

/// The storage form of a shard: workchain i32 BE ‖ prefix u64 BE.
pub(crate) fn shard_to_bytes(shard: &ShardIdent) -> [u8; SHARD_LEN] {
    let mut out = [0u8; SHARD_LEN];
    out[..4].copy_from_slice(&shard.workchain().to_be_bytes());
    out[4..].copy_from_slice(&shard.prefix().to_be_bytes());
    out
}

/// Decodes the storage form of a shard.
pub(crate) fn shard_from_bytes(bytes: &[u8]) -> Result<ShardIdent> {
    if bytes.len() != SHARD_LEN {
        return Err(QueueError::invalid(format!(
            "shard of {} bytes, expected {SHARD_LEN}",
            bytes.len()
        )));
    }
    let workchain = i32::from_be_bytes(bytes[..4].try_into().unwrap());
    let prefix = u64::from_be_bytes(bytes[4..].try_into().unwrap());
    ShardIdent::new(workchain, prefix).ok_or_else(|| {
        QueueError::invalid(format!(
            "stored shard {workchain}:{prefix:016x} is not valid"
        ))
    })
}

/// Whether `shard` contains an address with this workchain and address prefix (first 8 bytes, BE).
pub(crate) fn shard_contains(shard: &ShardIdent, workchain: i32, address_prefix: u64) -> bool {
    if shard.workchain() != workchain {
        return false;
    }
    let bits = u32::from(shard.prefix_len());
    if bits == 0 {
        return true;
    }
    let mask = !0u64 << (64 - bits);
    (address_prefix ^ shard.prefix()) & mask == 0
}

/// The full shard of a workchain (the coarse destination of shard counts).
pub(crate) fn full_shard(workchain: i32) -> ShardIdent {
    ShardIdent::new_full(workchain)
}

/// A half-open read range `[from, to)` of one source shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardRange {
    /// Source shard.
    pub shard: ShardIdent,
    /// First key (inclusive).
    pub from: QueueKey,
    /// End key (exclusive).
    pub to: QueueKey,
}

/// A read range with explicit bounds; normalised to a [`ShardRange`] (§2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BoundedShardRange {
    /// Source shard.
    pub shard: ShardIdent,
    /// Lower bound.
    pub from: Bound<QueueKey>,
    /// Upper bound.
    pub to: Bound<QueueKey>,
}

impl BoundedShardRange {
    /// Builds a range.
    pub fn new(shard: ShardIdent, from: Bound<QueueKey>, to: Bound<QueueKey>) -> Self {
        Self { shard, from, to }
    }

    /// The normalised half-open range: Included(x)/Excluded(x) from → x/next(x); to → next(x)/x.
    pub fn normalize(&self) -> ShardRange {
        let from = match self.from {
            Bound::Included(k) => k,
            Bound::Excluded(k) => k.next_value(),
            Bound::Unbounded => QueueKey::MIN,
        };
        let to = match self.to {
            Bound::Included(k) => k.next_value(),
            Bound::Excluded(k) => k,
            Bound::Unbounded => QueueKey::MAX,
        };
        ShardRange {
            shard: self.shard,
            from,
            to,
        }
    }
}

impl From<BoundedShardRange> for ShardRange {
    fn from(r: BoundedShardRange) -> Self {
        r.normalize()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(last: &[u8]) -> HashBytes {
        let mut out = [0u8; 32];
        out[32 - last.len()..].copy_from_slice(last);
        HashBytes(out)
    }

    #[test]
    fn next_value_cases() {
        assert_eq!(
            QueueKey::new(5, h(&[])).next_value(),
            QueueKey::new(5, h(&[1]))
        );
        assert_eq!(
            QueueKey::new(5, h(&[0xff])).next_value(),
            QueueKey::new(5, h(&[1, 0]))
        );
        assert_eq!(
            QueueKey::max_for_lt(5).next_value(),
            QueueKey::min_for_lt(6)
        );
        assert_eq!(QueueKey::MAX.next_value(), QueueKey::MAX);
        assert!(QueueKey::max_for_lt(1) < QueueKey::min_for_lt(2));
        assert_eq!(QueueKey::default(), QueueKey::MIN);
    }

    #[test]
    fn byte_order_is_key_order() {
        let keys = [
            QueueKey::MIN,
            QueueKey::new(1, h(&[5])),
            QueueKey::max_for_lt(1),
            QueueKey::min_for_lt(256),
            QueueKey::MAX,
        ];
        for pair in keys.windows(2) {
            assert!(pair[0] < pair[1]);
            assert!(pair[0].to_bytes() < pair[1].to_bytes());
            assert_eq!(QueueKey::from_bytes(&pair[0].to_bytes()).unwrap(), pair[0]);
        }
    }

    #[test]
    fn shard_encoding_and_contains() {
        let sh = ShardIdent::BASECHAIN;
        let mc = ShardIdent::MASTERCHAIN;
        assert_eq!(shard_from_bytes(&shard_to_bytes(&mc)).unwrap(), mc);
        // As bytes, wc −1 sorts after wc 0.
        assert!(shard_to_bytes(&sh) < shard_to_bytes(&mc));
        let left = ShardIdent::new(0, 0x4000_0000_0000_0000).unwrap();
        assert!(shard_contains(&left, 0, 0x0300_0000_0000_0000));
        assert!(!shard_contains(&left, 0, 0x8300_0000_0000_0000));
        assert!(shard_contains(&sh, 0, u64::MAX));
        assert!(!shard_contains(&sh, -1, 0));
    }

    #[test]
    fn bounded_ranges_normalise() {
        let a = QueueKey::max_for_lt(10);
        let r = BoundedShardRange::new(
            ShardIdent::BASECHAIN,
            Bound::Excluded(a),
            Bound::Included(a),
        );
        let n = r.normalize();
        assert_eq!(n.from, a.next_value());
        assert_eq!(n.to, a.next_value());
    }
}
