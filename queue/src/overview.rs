//! A read-only overview of the queue for tools (`regolith inspect queue`): commit pointers, the last committed
//! mc block, every stored diff with its zone and per-partition message counts, the stored GC
//! bounds, and an optional digest of the whole logical content. Everything is read from one snapshot.

use std::collections::BTreeMap;

use regolith_formats::{BlockId, HashBytes, ShardIdent};

use regolith_kv::KeyRange;

use crate::db::QueueSnapshot;
use crate::diff::CommitPointer;
use crate::diff_info::DiffInfo;
use crate::error::Result;
use crate::key::{PartitionIdx, QueueKey};
use crate::tables::{Count, IntMsgDiffInfo, IntMsgGcBounds, IntMsgStatistics, ShardKey};
use crate::zone::{self, DiffZone};

/// One stored diff record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffOverview {
    /// Source shard.
    pub shard: ShardIdent,
    /// Block seqno.
    pub seqno: u32,
    /// Committed or uncommitted.
    pub zone: DiffZone,
    /// The record.
    pub info: DiffInfo,
    /// Partition → messages of this diff counted by its statistics rows.
    pub messages_per_partition: BTreeMap<PartitionIdx, u64>,
}

/// The queue as a whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueOverview {
    /// The last committed mc block.
    pub last_committed_mc_block: Option<BlockId>,
    /// Shard → commit pointer.
    pub commit_pointers: BTreeMap<ShardIdent, CommitPointer>,
    /// Every record, by shard then seqno.
    pub diffs: Vec<DiffOverview>,
    /// Source shard → inclusive GC bound, as the last commits stored it (what GC deletes up to).
    pub gc_bounds: BTreeMap<ShardIdent, QueueKey>,
    /// BLAKE3 over every (family, key, value) in key order, if requested.
    pub content_digest: Option<HashBytes>,
}

/// Reads the overview from one snapshot; `with_digest` also hashes every byte of the database content.
pub(crate) fn overview(snapshot: &QueueSnapshot, with_digest: bool) -> Result<QueueOverview> {
    let commit_pointers = zone::all_pointers(snapshot)?;
    let last_committed_mc_block = zone::last_committed_mc_block(snapshot)?;

    // Statistics rows: (shard, max_message) → partition → count.
    let mut counts: BTreeMap<(ShardIdent, QueueKey), BTreeMap<PartitionIdx, u64>> = BTreeMap::new();
    for row in snapshot.iter::<IntMsgStatistics>(KeyRange::all()) {
        let (key, Count(count)) = row?;
        *counts
            .entry((key.shard, key.max_message))
            .or_default()
            .entry(key.partition)
            .or_default() += count;
    }

    let mut diffs = Vec::new();
    for row in snapshot.iter::<IntMsgDiffInfo>(KeyRange::all()) {
        let (key, info) = row?;
        let pointer = commit_pointers.get(&key.shard);
        let zone = if DiffZone::Committed.contains(&info.max_message, pointer) {
            DiffZone::Committed
        } else {
            DiffZone::Uncommitted
        };
        diffs.push(DiffOverview {
            shard: key.shard,
            seqno: key.seqno,
            zone,
            messages_per_partition: counts
                .get(&(key.shard, info.max_message))
                .cloned()
                .unwrap_or_default(),
            info,
        });
    }

    // The stored bounds (the same for every partition a commit names; the smallest is shown).
    let mut gc_bounds: BTreeMap<ShardIdent, QueueKey> = BTreeMap::new();
    for row in snapshot.iter::<IntMsgGcBounds>(KeyRange::all()) {
        let (key, bound) = row?;
        gc_bounds
            .entry(key.shard)
            .and_modify(|b| *b = (*b).min(bound))
            .or_insert(bound);
    }

    let content_digest = if with_digest {
        Some(digest(snapshot)?)
    } else {
        None
    };
    Ok(QueueOverview {
        last_committed_mc_block,
        commit_pointers,
        diffs,
        gc_bounds,
        content_digest,
    })
}

/// BLAKE3 over (family name, key, value) of every entry, families in declaration order, keys in order.
/// Lengths are hashed too, so different splits of the same bytes give different digests.
fn digest(snapshot: &QueueSnapshot) -> Result<HashBytes> {
    let hasher = std::cell::RefCell::new(blake3::Hasher::new());
    snapshot.for_each_raw_row(
        |name| {
            let mut hasher = hasher.borrow_mut();
            hasher.update(&(name.len() as u32).to_le_bytes());
            hasher.update(name.as_bytes());
        },
        |k, v| {
            let mut hasher = hasher.borrow_mut();
            hasher.update(&(k.len() as u32).to_le_bytes());
            hasher.update(k);
            hasher.update(&(v.len() as u64).to_le_bytes());
            hasher.update(v);
        },
    )?;
    Ok(HashBytes(*hasher.into_inner().finalize().as_bytes()))
}

/// Every shard that has at least one diff record, found with one seek per shard.
pub(crate) fn shards_with_records(
    snapshot: &QueueSnapshot,
) -> Result<std::collections::BTreeSet<ShardIdent>> {
    let mut out = std::collections::BTreeSet::new();
    let mut range = Some(KeyRange::all());
    while let Some(rows) = range {
        let Some(key) = snapshot.keys::<IntMsgDiffInfo>(rows).next().transpose()? else {
            break;
        };
        out.insert(key.shard);
        // Next: the first key after every record of this shard.
        range = KeyRange::after_prefix(&ShardKey(key.shard));
    }
    Ok(out)
}
