//! Zones (queue.md §3): a diff is Committed when its `max_message` is at or below its shard's commit pointer,
//! Uncommitted otherwise. Zones are computed on each read from the stored record and the pointer.

use std::collections::BTreeMap;

use regolith_formats::{BlockId, ShardIdent};

use regolith_kv::KeyRange;

use crate::db::QueueSnapshot;
use crate::diff::CommitPointer;
use crate::diff_info::DiffInfo;
use crate::error::Result;
use crate::key::QueueKey;
use crate::tables::{
    BlockIdBe, DiffInfoKey, IntMsgCommitPointer, IntMsgDiffInfo, IntMsgVar, ShardKey,
    LAST_COMMITTED_MC_BLOCK_ID,
};

/// Which zone a read accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DiffZone {
    /// At or below the commit pointer.
    Committed,
    /// Above the commit pointer (or the shard has none).
    Uncommitted,
    /// Either zone.
    Both,
}

impl DiffZone {
    /// Whether a diff with this `max_message` lies in the zone, given the shard's pointer.
    pub fn contains(&self, max_message: &QueueKey, pointer: Option<&CommitPointer>) -> bool {
        let committed = is_committed(max_message, pointer);
        match self {
            Self::Committed => committed,
            Self::Uncommitted => !committed,
            Self::Both => true,
        }
    }
}

/// Committed iff a pointer exists and `max_message ≤ pointer.queue_key`.
pub(crate) fn is_committed(max_message: &QueueKey, pointer: Option<&CommitPointer>) -> bool {
    pointer.is_some_and(|p| *max_message <= p.queue_key)
}

/// The shard's commit pointer.
pub(crate) fn pointer(
    snapshot: &QueueSnapshot,
    shard: ShardIdent,
) -> Result<Option<CommitPointer>> {
    Ok(snapshot.get::<IntMsgCommitPointer>(&ShardKey(shard))?)
}

/// Every commit pointer.
pub(crate) fn all_pointers(
    snapshot: &QueueSnapshot,
) -> Result<BTreeMap<ShardIdent, CommitPointer>> {
    let mut out = BTreeMap::new();
    for row in snapshot.iter::<IntMsgCommitPointer>(KeyRange::all()) {
        let (ShardKey(shard), pointer) = row?;
        out.insert(shard, pointer);
    }
    Ok(out)
}

/// The record (shard, seqno) if it lies in `zone`.
pub(crate) fn diff_info(
    snapshot: &QueueSnapshot,
    shard: ShardIdent,
    seqno: u32,
    zone: DiffZone,
) -> Result<Option<DiffInfo>> {
    let Some(info) = snapshot.get::<IntMsgDiffInfo>(&DiffInfoKey { shard, seqno })? else {
        return Ok(None);
    };
    if zone == DiffZone::Both {
        return Ok(Some(info));
    }
    let pointer = pointer(snapshot, shard)?;
    Ok(zone
        .contains(&info.max_message, pointer.as_ref())
        .then_some(info))
}

/// The shard's record with the highest seqno (either zone).
pub(crate) fn last_record(snapshot: &QueueSnapshot, shard: ShardIdent) -> Result<Option<DiffInfo>> {
    let mut rows = snapshot.iter_rev::<IntMsgDiffInfo>(KeyRange::prefix(&ShardKey(shard)));
    Ok(rows.next().transpose()?.map(|(_, info)| info))
}

/// The last committed mc block.
pub(crate) fn last_committed_mc_block(snapshot: &QueueSnapshot) -> Result<Option<BlockId>> {
    Ok(snapshot
        .get::<IntMsgVar>(&LAST_COMMITTED_MC_BLOCK_ID)?
        .map(|BlockIdBe(id)| id))
}
