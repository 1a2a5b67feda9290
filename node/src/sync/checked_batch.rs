//! A batch of next blocks (`regolith.getNextBlocksFull`) whose blocks are decompressed and checked ahead of
//! its apply: the sync prepares the next batch this way while the current one is applied, so the decoding
//! and hashing run on the blocking pool beside the apply instead of after it.
//!
//! Nothing is trusted or stored by being checked ahead: the apply takes the blocks in the same order and
//! under the same rules as before (each mc block verified before any shard block it names is taken), and a
//! block that failed its check fails when the apply reaches it. At most [`CHECK_AHEAD_BYTES`] of
//! decompressed blocks are prepared per batch, so a batch that decompresses to far more than it weighs costs
//! no more memory than that before its first mc block is verified; the rest is decoded when taken.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use anyhow::{anyhow, Result};
use regolith_formats::{BlockId, CheckedBlock};
use regolith_rpc::client::{BlockDataFull, ClientError, Neighbour, NextBlocksBatch};

use crate::sync::block_check::check_downloaded_block;

/// Decompressed block bytes prepared ahead per batch (an honest batch of 16 mc blocks with their shard
/// blocks is about 1 MiB).
pub(crate) const CHECK_AHEAD_BYTES: u64 = 16 << 20;

/// A batch with its first blocks checked.
pub(crate) struct CheckedBatch {
    batch: NextBlocksBatch,
    mc: VecDeque<Result<CheckedBlock>>,
    shards: HashMap<BlockId, Result<CheckedBlock>>,
}

fn decoded(id: Option<&BlockId>, data: Result<BlockDataFull, ClientError>) -> Result<CheckedBlock> {
    let data = data.map_err(|e| anyhow!("{e}"))?;
    check_downloaded_block(id, &data)
}

impl CheckedBatch {
    /// Decompresses the batch's mc blocks in order, then its shard blocks, until [`CHECK_AHEAD_BYTES`] are
    /// decompressed, and checks them on the blocking pool.
    pub(crate) async fn check_ahead(mut batch: NextBlocksBatch) -> Self {
        let mut budget = CHECK_AHEAD_BYTES;
        let mut mc = Vec::new();
        while budget > 0 {
            let Some(data) = batch.next_mc().await else {
                break;
            };
            let failed = data.is_err();
            if let Ok(d) = &data {
                budget = budget.saturating_sub(d.block.len() as u64);
            }
            mc.push(data);
            if failed {
                // The apply stops at this block: nothing after it is needed.
                break;
            }
        }
        let mut shards = Vec::new();
        for id in batch.shard_block_ids() {
            if budget == 0 {
                break;
            }
            let Some(data) = batch.take_shard(&id).await else {
                continue;
            };
            if let Ok(d) = &data {
                budget = budget.saturating_sub(d.block.len() as u64);
            }
            shards.push((id, data));
        }
        let checked = tokio::task::spawn_blocking(move || {
            let mc: VecDeque<_> = mc.into_iter().map(|d| decoded(None, d)).collect();
            let shards: HashMap<_, _> = shards
                .into_iter()
                .map(|(id, d)| (id, decoded(Some(&id), d)))
                .collect();
            (mc, shards)
        })
        .await;
        let (mc, shards) = checked.unwrap_or_else(|e| {
            // The blocks taken are lost with the task: the batch ends before them, and the shard blocks are
            // downloaded one by one.
            tracing::warn!(error = %e, "checking a batch ahead failed");
            (VecDeque::new(), HashMap::new())
        });
        Self { batch, mc, shards }
    }

    /// The neighbour that sent the batch.
    pub(crate) fn neighbour(&self) -> &Arc<Neighbour> {
        self.batch.neighbour()
    }

    /// The id of the batch's last mc block, as the batch names it.
    pub(crate) fn last_mc_id(&self) -> &BlockId {
        self.batch.last_mc_id()
    }

    /// The next mc block, checked (not yet linked to the last applied block nor verified).
    pub(crate) async fn next_mc(&mut self) -> Option<Result<CheckedBlock>> {
        if let Some(checked) = self.mc.pop_front() {
            return Some(checked);
        }
        let data = self.batch.next_mc().await?;
        Some(decoded(None, data))
    }

    /// Shard block `id`, checked, when the batch carries it.
    pub(crate) async fn take_shard(&mut self, id: &BlockId) -> Option<Result<CheckedBlock>> {
        if let Some(checked) = self.shards.remove(id) {
            return Some(checked);
        }
        let data = self.batch.take_shard(id).await?;
        Some(decoded(Some(id), data))
    }
}
