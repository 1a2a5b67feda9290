//! The stored diff record ([`DiffInfo`]), one per (shard, seqno), and its byte form (§4 "DiffInfo value").
//!
//! TL style, integers LE, no constructor id: min ‖ max ‖ shard counts (sorted by shard) ‖ hash ‖ processed_to ‖
//! router_src ‖ router_dst ‖ seqno. Zones, duplicate and continuity checks, GC bounds and the router of an
//! already written block all come from this record.

use std::collections::BTreeMap;

use regolith_formats::queue_diff::{
    read_router_half, write_router_half, RouterPartition, TlReader, MAX_PROCESSED_TO,
};
use regolith_formats::{FormatError, HashBytes, ShardIdent};

use crate::error::{QueueError, Result};
use crate::key::QueueKey;
use crate::router::{half_from_tl, PartitionRouter};

/// Limit of shard-count entries in a record.
pub(crate) const MAX_SHARD_COUNTS: u32 = 10_000_000;

/// A stored diff record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffInfo {
    /// Lower bound of the diff (from its statistics).
    pub min_message: QueueKey,
    /// Upper bound of the diff (from its statistics).
    pub max_message: QueueKey,
    /// Destination shard → message count.
    pub shards_messages_count: BTreeMap<ShardIdent, u64>,
    /// The diff hash from the block.
    pub hash: HashBytes,
    /// Source shard → processed-to key (inclusive).
    pub processed_to: BTreeMap<ShardIdent, QueueKey>,
    /// Serialized `src` half of the router.
    pub router_src: Vec<RouterPartition>,
    /// Serialized `dst` half of the router.
    pub router_dst: Vec<RouterPartition>,
    /// Seqno of the block.
    pub seqno: u32,
}

impl DiffInfo {
    /// The router rebuilt from the record.
    pub fn router(&self) -> PartitionRouter {
        PartitionRouter::from_halves(
            &half_from_tl(&self.router_src),
            &half_from_tl(&self.router_dst),
        )
    }

    /// The byte form.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(200);
        write_key(&mut out, &self.min_message);
        write_key(&mut out, &self.max_message);
        // BTreeMap iteration is numeric shard order, so the bytes are deterministic.
        out.extend_from_slice(&(self.shards_messages_count.len() as u32).to_le_bytes());
        for (shard, count) in &self.shards_messages_count {
            write_shard(&mut out, shard);
            out.extend_from_slice(&count.to_le_bytes());
        }
        out.extend_from_slice(&self.hash.0);
        out.extend_from_slice(&(self.processed_to.len() as u32).to_le_bytes());
        for (shard, key) in &self.processed_to {
            write_shard(&mut out, shard);
            write_key(&mut out, key);
        }
        write_router_half(&mut out, &self.router_src);
        write_router_half(&mut out, &self.router_dst);
        out.extend_from_slice(&self.seqno.to_le_bytes());
        out
    }

    /// Decodes the byte form; shard counts may come in any order.
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        Self::decode_inner(bytes).map_err(|e| QueueError::invalid(format!("diff record: {e}")))
    }

    fn decode_inner(bytes: &[u8]) -> Result<Self, FormatError> {
        let mut r = TlReader::new(bytes);
        let min_message = read_key(&mut r, "min_message")?;
        let max_message = read_key(&mut r, "max_message")?;
        let n = r.count("shard counts", MAX_SHARD_COUNTS, 20)?;
        let mut shards_messages_count = BTreeMap::new();
        for _ in 0..n {
            let shard = r.shard("shard counts")?;
            let count = r.u64("shard counts")?;
            *shards_messages_count.entry(shard).or_insert(0) += count;
        }
        let hash = r.hash("hash")?;
        let n = r.count("processed_to", MAX_PROCESSED_TO, 52)?;
        let mut processed_to = BTreeMap::new();
        for _ in 0..n {
            let shard = r.shard("processed_to")?;
            let key = read_key(&mut r, "processed_to")?;
            processed_to.insert(shard, key);
        }
        let router_src = read_router_half(&mut r, "router_src")?;
        let router_dst = read_router_half(&mut r, "router_dst")?;
        let seqno = r.u32("seqno")?;
        if !r.remaining().is_empty() {
            return Err(FormatError::InvalidData {
                what: "diff record",
                reason: format!("{} trailing bytes", r.remaining().len()),
            });
        }
        Ok(Self {
            min_message,
            max_message,
            shards_messages_count,
            hash,
            processed_to,
            router_src,
            router_dst,
            seqno,
        })
    }
}

fn write_key(out: &mut Vec<u8>, key: &QueueKey) {
    out.extend_from_slice(&key.lt.to_le_bytes());
    out.extend_from_slice(&key.hash.0);
}

fn write_shard(out: &mut Vec<u8>, shard: &ShardIdent) {
    out.extend_from_slice(&shard.workchain().to_le_bytes());
    out.extend_from_slice(&shard.prefix().to_le_bytes());
}

fn read_key(r: &mut TlReader<'_>, what: &'static str) -> Result<QueueKey, FormatError> {
    Ok(QueueKey::new(r.u64(what)?, r.hash(what)?))
}

#[cfg(test)]
mod tests {
    use regolith_formats::queue_diff::RouterAddr as TlRouterAddr;

    use super::*;

    fn sample() -> DiffInfo {
        DiffInfo {
            min_message: QueueKey::new(1, HashBytes([1; 32])),
            max_message: QueueKey::new(9, HashBytes([2; 32])),
            shards_messages_count: [(ShardIdent::BASECHAIN, 5), (ShardIdent::MASTERCHAIN, 7)]
                .into(),
            hash: HashBytes([3; 32]),
            processed_to: [(ShardIdent::MASTERCHAIN, QueueKey::max_for_lt(4))].into(),
            router_src: vec![],
            router_dst: vec![RouterPartition {
                index: 1,
                accounts: vec![TlRouterAddr {
                    workchain: -1,
                    account: HashBytes([1; 32]),
                }],
            }],
            seqno: 42,
        }
    }

    #[test]
    fn round_trip_with_sorted_shard_counts() {
        let info = sample();
        let bytes = info.encode();
        assert_eq!(DiffInfo::decode(&bytes).unwrap(), info);
        // Shard counts are written in numeric shard order: −1 first.
        let counts_at = 80 + 4;
        assert_eq!(&bytes[counts_at..counts_at + 4], &(-1i32).to_le_bytes());
        // Exact layout length: 80 + 4 + 2×20 + 32 + 4 + 52 + 4 + (4 + 4 + 4 + 36) + 4.
        assert_eq!(bytes.len(), 80 + 4 + 40 + 32 + 4 + 52 + 4 + 48 + 4);
        // Any order is accepted by readers.
        let mut swapped = bytes.clone();
        let (a, b) = (counts_at, counts_at + 20);
        let first: Vec<u8> = swapped[a..a + 20].to_vec();
        let second: Vec<u8> = swapped[b..b + 20].to_vec();
        swapped[a..a + 20].copy_from_slice(&second);
        swapped[b..b + 20].copy_from_slice(&first);
        assert_eq!(DiffInfo::decode(&swapped).unwrap(), info);
    }

    #[test]
    fn router_halves_are_read_with_the_rules_of_the_tl_diff() {
        // A record goes through the one router reader of `formats`: accounts and partition indices must be
        // strictly ascending, as in a TL diff (queue.md §6).
        let mut info = sample();
        let account = info.router_dst[0].accounts[0];
        info.router_dst[0].accounts.push(account);
        assert!(
            matches!(
                DiffInfo::decode(&info.encode()),
                Err(QueueError::InvalidData { .. })
            ),
            "a repeated account"
        );
        let mut info = sample();
        info.router_src = vec![
            RouterPartition {
                index: 2,
                accounts: vec![],
            },
            RouterPartition {
                index: 1,
                accounts: vec![],
            },
        ];
        assert!(
            DiffInfo::decode(&info.encode()).is_err(),
            "descending partitions"
        );
    }

    #[test]
    fn rejects_oversized_count_and_garbage() {
        let mut bytes = sample().encode();
        bytes[80..84].copy_from_slice(&10_000_001u32.to_le_bytes());
        assert!(matches!(
            DiffInfo::decode(&bytes),
            Err(QueueError::InvalidData { .. })
        ));
        let bytes = sample().encode();
        for cut in 0..bytes.len() {
            assert!(DiffInfo::decode(&bytes[..cut]).is_err());
        }
        let mut extra = bytes.clone();
        extra.push(0);
        assert!(DiffInfo::decode(&extra).is_err());
    }
}
