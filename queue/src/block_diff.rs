//! Building a queue diff for a block received from the network (queue.md §5.8). The block's TL diff lists
//! only message hashes, so the whole block is required: the bodies come from its `OutMsgDescr`.

use tycho_types::cell::Load;
use tycho_types::models::{Block, BlockId, MsgInfo, OutMsg, OutMsgDescr};
use tycho_types::prelude::HashBytes;

use regolith_formats::queue_diff::{queue_diff_hash, QueueDiff};
use regolith_formats::CheckedBlock;

use crate::diff::{DiffStatistics, QueueDiffWithMessages};
use crate::error::{QueueError, Result};
use crate::key::QueueKey;
use crate::message::EnqueuedMessage;
use crate::router::PartitionRouter;

/// A network block's diff, ready for `apply_diff`.
#[derive(Debug, Clone)]
pub struct BlockQueueDiff {
    /// The diff with its messages.
    pub diff: QueueDiffWithMessages<EnqueuedMessage>,
    /// Statistics with the TL diff's bounds.
    pub statistics: DiffStatistics,
    /// The diff hash (BLAKE3 of the TL bytes), equal to the block's `out_msg_queue_updates.diff_hash`.
    pub hash: HashBytes,
}

/// Builds the diff of `block_id` from its TL diff bytes and the block itself. Without the block body
/// (`None`) building fails. Checks: the TL diff parses and is for this block (shard, seqno, no trailing
/// bytes), its hash equals the block's `diff_hash`, and every listed hash is a `New` entry of `OutMsgDescr`.
pub fn diff_from_block(
    block_id: &BlockId,
    block: Option<&Block>,
    tl_diff: &[u8],
) -> Result<BlockQueueDiff> {
    let block = block.ok_or_else(|| {
        QueueError::invalid(format!(
            "block {block_id}: the block body is required to build its queue diff"
        ))
    })?;
    let expected_hash = block.out_msg_queue_updates.diff_hash;
    let out_msgs = out_msg_descr(block_id, block)?;
    diff_from_out_msgs(block_id, &expected_hash, &out_msgs, tl_diff)
}

/// Builds the diff of a checked block: its TL diff is already parsed, hashed and matched with the block, so
/// only the messages are looked up in the block's `OutMsgDescr`.
pub fn diff_from_checked(block: &CheckedBlock) -> Result<BlockQueueDiff> {
    let block_id = block.id();
    let out_msgs = out_msg_descr(block_id, &block.parsed().block)?;
    build(
        block_id,
        &out_msgs,
        block.queue_diff(),
        *block.queue_diff_hash(),
    )
}

fn out_msg_descr(block_id: &BlockId, block: &Block) -> Result<OutMsgDescr> {
    let extra = block
        .load_extra()
        .map_err(|e| QueueError::invalid(format!("block {block_id}: cannot load extra: {e}")))?;
    extra
        .load_out_msg_description()
        .map_err(|e| QueueError::invalid(format!("block {block_id}: cannot load OutMsgDescr: {e}")))
}

/// Builds the diff from its TL bytes and an `OutMsgDescr`; `expected_hash` is the block's `diff_hash`.
pub fn diff_from_out_msgs(
    block_id: &BlockId,
    expected_hash: &HashBytes,
    out_msgs: &OutMsgDescr,
    tl_diff: &[u8],
) -> Result<BlockQueueDiff> {
    let tl = QueueDiff::parse_for_block(tl_diff, block_id)
        .map_err(|e| QueueError::invalid(format!("queue diff of block {block_id}: {e}")))?;
    let hash = queue_diff_hash(tl_diff);
    if hash != *expected_hash {
        return Err(QueueError::invalid(format!(
            "queue diff of block {block_id}: hash {hash} does not match the block's diff_hash {expected_hash}"
        )));
    }
    build(block_id, out_msgs, &tl, hash)
}

/// The diff of a block from its parsed TL diff (already matched with the block) and its `OutMsgDescr`.
fn build(
    block_id: &BlockId,
    out_msgs: &OutMsgDescr,
    tl: &QueueDiff,
    hash: HashBytes,
) -> Result<BlockQueueDiff> {
    let mut diff = QueueDiffWithMessages::<EnqueuedMessage> {
        router: PartitionRouter::from_tl(&tl.router_partitions_src, &tl.router_partitions_dst),
        processed_to: tl
            .processed_to
            .iter()
            .map(|(s, k)| (*s, QueueKey::from(*k)))
            .collect(),
        ..Default::default()
    };
    for hash in &tl.messages {
        let invalid =
            |what: String| QueueError::invalid(format!("block {block_id}: message {hash}: {what}"));
        let (_, out_msg) = out_msgs
            .get(hash)
            .map_err(|e| invalid(format!("cannot read OutMsgDescr: {e}")))?
            .ok_or_else(|| {
                invalid("listed in the queue diff but absent from OutMsgDescr".into())
            })?;
        let OutMsg::New(new) = out_msg else {
            return Err(invalid("the OutMsgDescr entry is not OutMsg::New".into()));
        };
        let envelope = new
            .load_out_msg_envelope()
            .map_err(|e| invalid(format!("cannot load the envelope: {e}")))?;
        let cell = envelope.message.inner().clone();
        if cell.repr_hash() != hash {
            return Err(invalid(format!(
                "the envelope holds message {}",
                cell.repr_hash()
            )));
        }
        let mut slice = cell
            .as_slice()
            .map_err(|e| invalid(format!("bad message cell: {e}")))?;
        let info = MsgInfo::load_from(&mut slice)
            .map_err(|e| invalid(format!("bad message info: {e}")))?;
        let MsgInfo::Int(info) = info else {
            // Only internal messages enter the queue.
            continue;
        };
        let message = EnqueuedMessage { info, cell };
        diff.messages.insert(
            crate::message::MessageValue::key(&message),
            std::sync::Arc::new(message),
        );
    }
    let statistics = DiffStatistics::from_diff(
        &diff,
        block_id.shard,
        tl.min_message.into(),
        tl.max_message.into(),
    );
    Ok(BlockQueueDiff {
        diff,
        statistics,
        hash,
    })
}
