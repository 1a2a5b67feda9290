//! TL `block.queueDiff` (id `0x6020a3b2`): the per-block diff of the internal message queue.
//!
//! Layout (TL, integers LE): prev_hash 32 ‖ shard (i32 ‖ u64) ‖ seqno u32 ‖ processed_to ‖ min_message ‖
//! max_message ‖ messages ‖ router_partitions_src ‖ router_partitions_dst. Parsing enforces every rule of
//! queue.md §6; writing a parsed value gives back the same bytes. The diff hash is BLAKE3 of the boxed bytes.

use tycho_types::models::{BlockId, ShardIdent};
use tycho_types::prelude::HashBytes;

use crate::block_id::make_shard;
use crate::FormatError;

/// TL constructor id of `block.queueDiff`.
pub const QUEUE_DIFF_ID: u32 = 0x6020_a3b2;
/// Limit of `processed_to` entries.
pub const MAX_PROCESSED_TO: u32 = 1000;
/// Limit of message hashes (and of accounts per router partition).
pub const MAX_MESSAGES: u32 = 10_000_000;
/// Limit of router partitions.
pub const MAX_PARTITIONS: u32 = 65_536;

/// A position in the queue: (lt, message hash), ordered lexicographically.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct QueueKey {
    /// Logical time of the message.
    pub lt: u64,
    /// Message hash.
    pub hash: HashBytes,
}

/// An account address in a router partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RouterAddr {
    /// Workchain (fits i8).
    pub workchain: i8,
    /// Account id.
    pub account: HashBytes,
}

/// One router partition: its index and the accounts routed to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouterPartition {
    /// Partition index.
    pub index: u16,
    /// Accounts, strictly ascending.
    pub accounts: Vec<RouterAddr>,
}

/// A parsed `block.queueDiff`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueDiff {
    /// Hash of the previous diff of this shard.
    pub prev_hash: HashBytes,
    /// Shard of the block.
    pub shard: ShardIdent,
    /// Seqno of the block.
    pub seqno: u32,
    /// Per shard, the queue position processed up to; shards strictly ascending.
    pub processed_to: Vec<(ShardIdent, QueueKey)>,
    /// Smallest message key of the diff.
    pub min_message: QueueKey,
    /// Largest message key of the diff.
    pub max_message: QueueKey,
    /// Hashes of the diff's messages, strictly ascending.
    pub messages: Vec<HashBytes>,
    /// Router partitions by source account.
    pub router_partitions_src: Vec<RouterPartition>,
    /// Router partitions by destination account.
    pub router_partitions_dst: Vec<RouterPartition>,
}

/// Reads TL primitives from a slice, naming what ran out.
pub struct TlReader<'a> {
    data: &'a [u8],
}

impl<'a> TlReader<'a> {
    /// Starts reading `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Self { data }
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> &'a [u8] {
        self.data
    }

    /// Takes `n` bytes.
    pub fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], FormatError> {
        if self.data.len() < n {
            return Err(FormatError::UnexpectedEof { what });
        }
        let (head, tail) = self.data.split_at(n);
        self.data = tail;
        Ok(head)
    }

    /// Reads a u32 LE.
    pub fn u32(&mut self, what: &'static str) -> Result<u32, FormatError> {
        Ok(u32::from_le_bytes(self.take(4, what)?.try_into().unwrap()))
    }

    /// Reads an i32 LE.
    pub fn i32(&mut self, what: &'static str) -> Result<i32, FormatError> {
        Ok(i32::from_le_bytes(self.take(4, what)?.try_into().unwrap()))
    }

    /// Reads a u64 LE.
    pub fn u64(&mut self, what: &'static str) -> Result<u64, FormatError> {
        Ok(u64::from_le_bytes(self.take(8, what)?.try_into().unwrap()))
    }

    /// Reads 32 bytes.
    pub fn hash(&mut self, what: &'static str) -> Result<HashBytes, FormatError> {
        Ok(HashBytes(self.take(32, what)?.try_into().unwrap()))
    }

    /// Reads a `shardIdent` and checks that it is a valid shard.
    pub fn shard(&mut self, what: &'static str) -> Result<ShardIdent, FormatError> {
        let workchain = self.i32(what)?;
        let prefix = self.u64(what)?;
        make_shard(workchain, prefix)
    }

    /// Reads a count and checks it against a limit and against the bytes left (`min_item_len` each).
    pub fn count(
        &mut self,
        what: &'static str,
        limit: u32,
        min_item_len: usize,
    ) -> Result<usize, FormatError> {
        let n = self.u32(what)?;
        if n > limit {
            return Err(FormatError::invalid(
                what,
                format!("count {n} exceeds {limit}"),
            ));
        }
        if (n as usize).saturating_mul(min_item_len) > self.data.len() {
            return Err(FormatError::UnexpectedEof { what });
        }
        Ok(n as usize)
    }
}

fn shard_order_key(shard: &ShardIdent) -> (i32, u64) {
    (shard.workchain(), shard.prefix())
}

fn read_queue_key(r: &mut TlReader<'_>, what: &'static str) -> Result<QueueKey, FormatError> {
    Ok(QueueKey {
        lt: r.u64(what)?,
        hash: r.hash(what)?,
    })
}

/// Reads one TL router half (`router_partitions_src` or `_dst`, queue.md §6): u32 partition count ≤ 65,536,
/// then per partition a u32 index that fits u16 (strictly ascending), a u32 account count ≤ 10,000,000 and
/// that many (workchain i32 that fits i8, account 32) entries, strictly ascending. The one reader of this
/// layout: diffs, queue states and the queue's stored diff records all go through it.
pub fn read_router_half(
    r: &mut TlReader<'_>,
    what: &'static str,
) -> Result<Vec<RouterPartition>, FormatError> {
    let n = r.count(what, MAX_PARTITIONS, 8)?;
    let mut partitions = Vec::with_capacity(n);
    for _ in 0..n {
        let index = r.u32(what)?;
        let index = u16::try_from(index).map_err(|_| {
            FormatError::invalid(what, format!("partition index {index} does not fit u16"))
        })?;
        if let Some(last) = partitions.last() {
            let last: &RouterPartition = last;
            if index <= last.index {
                return Err(FormatError::invalid(
                    what,
                    "partition indices are not strictly ascending",
                ));
            }
        }
        let count = r.count(what, MAX_MESSAGES, 36)?;
        let mut accounts = Vec::with_capacity(count);
        for _ in 0..count {
            let wc = r.i32(what)?;
            let workchain = i8::try_from(wc).map_err(|_| {
                FormatError::invalid(what, format!("workchain {wc} does not fit i8"))
            })?;
            let addr = RouterAddr {
                workchain,
                account: r.hash(what)?,
            };
            if accounts.last().is_some_and(|last| addr <= *last) {
                return Err(FormatError::invalid(
                    what,
                    "accounts are not strictly ascending",
                ));
            }
            accounts.push(addr);
        }
        partitions.push(RouterPartition { index, accounts });
    }
    Ok(partitions)
}

/// Writes one TL router half in the layout [`read_router_half`] reads.
pub fn write_router_half(out: &mut Vec<u8>, partitions: &[RouterPartition]) {
    out.extend_from_slice(&(partitions.len() as u32).to_le_bytes());
    for p in partitions {
        out.extend_from_slice(&u32::from(p.index).to_le_bytes());
        out.extend_from_slice(&(p.accounts.len() as u32).to_le_bytes());
        for a in &p.accounts {
            out.extend_from_slice(&i32::from(a.workchain).to_le_bytes());
            out.extend_from_slice(a.account.as_slice());
        }
    }
}

impl QueueDiff {
    /// Parses a complete boxed `block.queueDiff`; trailing bytes are an error.
    pub fn parse(data: &[u8]) -> Result<Self, FormatError> {
        let mut reader = TlReader::new(data);
        let diff = Self::read(&mut reader)?;
        if !reader.remaining().is_empty() {
            return Err(FormatError::invalid(
                "queue diff",
                format!("{} trailing bytes", reader.remaining().len()),
            ));
        }
        Ok(diff)
    }

    /// Parses a diff that must belong to `block_id` (same shard and seqno, no trailing bytes).
    pub fn parse_for_block(data: &[u8], block_id: &BlockId) -> Result<Self, FormatError> {
        let diff = Self::parse(data)?;
        if diff.shard != block_id.shard || diff.seqno != block_id.seqno {
            return Err(FormatError::invalid(
                "queue diff",
                format!(
                    "diff is for {}:{}, not for block {}",
                    diff.shard,
                    diff.seqno,
                    block_id.as_short_id()
                ),
            ));
        }
        Ok(diff)
    }

    /// Reads one boxed diff from a reader (used inside queue states).
    pub fn read(r: &mut TlReader<'_>) -> Result<Self, FormatError> {
        let id = r.u32("queue diff constructor")?;
        if id != QUEUE_DIFF_ID {
            return Err(FormatError::UnknownConstructor {
                what: "block.queueDiff",
                expected: QUEUE_DIFF_ID,
                actual: id,
            });
        }
        let prev_hash = r.hash("prev_hash")?;
        let shard = r.shard("shard")?;
        let seqno = r.u32("seqno")?;

        let n = r.count("processed_to", MAX_PROCESSED_TO, 52)?;
        let mut processed_to: Vec<(ShardIdent, QueueKey)> = Vec::with_capacity(n);
        for _ in 0..n {
            let shard = r.shard("processed_to")?;
            let key = read_queue_key(r, "processed_to")?;
            if let Some((last, _)) = processed_to.last() {
                if shard_order_key(&shard) <= shard_order_key(last) {
                    return Err(FormatError::invalid(
                        "processed_to",
                        "shards are not strictly ascending",
                    ));
                }
            }
            processed_to.push((shard, key));
        }

        let min_message = read_queue_key(r, "min_message")?;
        let max_message = read_queue_key(r, "max_message")?;
        if max_message < min_message {
            return Err(FormatError::invalid(
                "max_message",
                "max_message < min_message",
            ));
        }

        let n = r.count("messages", MAX_MESSAGES, 32)?;
        let mut messages: Vec<HashBytes> = Vec::with_capacity(n);
        for _ in 0..n {
            let hash = r.hash("messages")?;
            if hash == HashBytes::ZERO {
                return Err(FormatError::invalid("messages", "all-zero message hash"));
            }
            if messages.last().is_some_and(|last| hash <= *last) {
                return Err(FormatError::invalid(
                    "messages",
                    "hashes are not strictly ascending",
                ));
            }
            messages.push(hash);
        }

        let router_partitions_src = read_router_half(r, "router_partitions_src")?;
        let router_partitions_dst = read_router_half(r, "router_partitions_dst")?;
        Ok(Self {
            prev_hash,
            shard,
            seqno,
            processed_to,
            min_message,
            max_message,
            messages,
            router_partitions_src,
            router_partitions_dst,
        })
    }

    /// Serializes the boxed diff.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&QUEUE_DIFF_ID.to_le_bytes());
        out.extend_from_slice(self.prev_hash.as_slice());
        write_shard(out, &self.shard);
        out.extend_from_slice(&self.seqno.to_le_bytes());
        out.extend_from_slice(&(self.processed_to.len() as u32).to_le_bytes());
        for (shard, key) in &self.processed_to {
            write_shard(out, shard);
            write_queue_key(out, key);
        }
        write_queue_key(out, &self.min_message);
        write_queue_key(out, &self.max_message);
        out.extend_from_slice(&(self.messages.len() as u32).to_le_bytes());
        for m in &self.messages {
            out.extend_from_slice(m.as_slice());
        }
        write_router_half(out, &self.router_partitions_src);
        write_router_half(out, &self.router_partitions_dst);
    }

    /// Serializes into a new buffer.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write(&mut out);
        out
    }

    /// The diff hash of this value (hash of its canonical bytes).
    pub fn compute_hash(&self) -> HashBytes {
        queue_diff_hash(&self.to_bytes())
    }
}

/// Diff hash = BLAKE3-256 of the exact boxed bytes.
pub fn queue_diff_hash(boxed: &[u8]) -> HashBytes {
    HashBytes(*blake3::hash(boxed).as_bytes())
}

fn write_shard(out: &mut Vec<u8>, shard: &ShardIdent) {
    out.extend_from_slice(&shard.workchain().to_le_bytes());
    out.extend_from_slice(&shard.prefix().to_le_bytes());
}

fn write_queue_key(out: &mut Vec<u8>, key: &QueueKey) {
    out.extend_from_slice(&key.lt.to_le_bytes());
    out.extend_from_slice(key.hash.as_slice());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture() -> Vec<u8> {
        std::fs::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../shared/fixtures/first_block_queue_diff.bin"),
        )
        .unwrap()
    }

    #[test]
    fn fixture_round_trips() {
        let raw = fixture();
        let diff = QueueDiff::parse(&raw).unwrap();
        assert_eq!(diff.shard, ShardIdent::MASTERCHAIN);
        assert_eq!(diff.seqno, 1);
        assert_eq!(diff.processed_to.len(), 2);
        assert!(diff.messages.is_empty());
        assert_eq!(diff.to_bytes(), raw);
        assert_eq!(diff.compute_hash(), queue_diff_hash(&raw));
    }

    #[test]
    fn rejects_bad_input() {
        let raw = fixture();
        let mut trailing = raw.clone();
        trailing.push(0);
        assert!(QueueDiff::parse(&trailing).is_err());
        for cut in 0..raw.len() {
            assert!(QueueDiff::parse(&raw[..cut]).is_err(), "cut {cut}");
        }
        let mut bad_id = raw.clone();
        bad_id[0] ^= 1;
        assert!(matches!(
            QueueDiff::parse(&bad_id),
            Err(FormatError::UnknownConstructor { .. })
        ));

        let mut diff = QueueDiff::parse(&raw).unwrap();
        diff.messages = vec![HashBytes([2; 32]), HashBytes([1; 32])];
        assert!(
            QueueDiff::parse(&diff.to_bytes()).is_err(),
            "unsorted messages"
        );
        diff.messages = vec![HashBytes::ZERO];
        assert!(QueueDiff::parse(&diff.to_bytes()).is_err(), "zero hash");
        diff.messages = vec![HashBytes([1; 32]), HashBytes([2; 32])];
        assert_eq!(QueueDiff::parse(&diff.to_bytes()).unwrap(), diff);
        diff.processed_to.reverse();
        assert!(
            QueueDiff::parse(&diff.to_bytes()).is_err(),
            "unsorted processed_to"
        );
        diff.processed_to.reverse();
        let (min, max) = (diff.min_message, diff.max_message);
        diff.min_message = QueueKey {
            lt: u64::MAX,
            ..min
        };
        diff.max_message = QueueKey { lt: 0, ..max };
        assert!(QueueDiff::parse(&diff.to_bytes()).is_err(), "max < min");
        diff.min_message = min;
        diff.max_message = max;
        diff.router_partitions_src = vec![RouterPartition {
            index: 3,
            accounts: vec![
                RouterAddr {
                    workchain: 0,
                    account: HashBytes([5; 32]),
                },
                RouterAddr {
                    workchain: 0,
                    account: HashBytes([5; 32]),
                },
            ],
        }];
        assert!(
            QueueDiff::parse(&diff.to_bytes()).is_err(),
            "duplicate account"
        );
        diff.router_partitions_src[0].accounts.pop();
        assert_eq!(QueueDiff::parse(&diff.to_bytes()).unwrap(), diff);

        let mut huge = raw[..4 + 32 + 12 + 4].to_vec();
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(QueueDiff::parse(&huge).is_err());
    }

    #[test]
    fn parse_for_block_checks_shard_and_seqno() {
        let raw = fixture();
        let mut id = BlockId {
            shard: ShardIdent::MASTERCHAIN,
            seqno: 1,
            root_hash: HashBytes::ZERO,
            file_hash: HashBytes::ZERO,
        };
        assert!(QueueDiff::parse_for_block(&raw, &id).is_ok());
        id.seqno = 2;
        assert!(QueueDiff::parse_for_block(&raw, &id).is_err());
    }
}
