//! The queue's input: a diff with message bodies ([`QueueDiffWithMessages`]) and its [`DiffStatistics`].

use std::collections::BTreeMap;
use std::sync::Arc;

use regolith_formats::ShardIdent;

use crate::key::{full_shard, PartitionIdx, QueueKey};
use crate::message::MessageValue;
use crate::router::{PartitionRouter, RouterAddr};

/// Per partition, per destination, a message count.
pub type PartitionCounts = BTreeMap<PartitionIdx, BTreeMap<RouterAddr, u64>>;

/// A block's queue diff with its messages: the queue's input (§2).
#[derive(Debug, Clone)]
pub struct QueueDiffWithMessages<V> {
    /// Messages sorted by key.
    pub messages: BTreeMap<QueueKey, Arc<V>>,
    /// Source shard → how far this block's collator processed its queue (inclusive).
    pub processed_to: BTreeMap<ShardIdent, QueueKey>,
    /// The router used to build the diff.
    pub router: PartitionRouter,
}

impl<V> Default for QueueDiffWithMessages<V> {
    fn default() -> Self {
        Self {
            messages: BTreeMap::new(),
            processed_to: BTreeMap::new(),
            router: PartitionRouter::new(),
        }
    }
}

impl<V: MessageValue> QueueDiffWithMessages<V> {
    /// Builds a diff from messages (keyed by their own keys).
    pub fn new(
        messages: impl IntoIterator<Item = V>,
        processed_to: BTreeMap<ShardIdent, QueueKey>,
        router: PartitionRouter,
    ) -> Self {
        Self {
            messages: messages
                .into_iter()
                .map(|m| (m.key(), Arc::new(m)))
                .collect(),
            processed_to,
            router,
        }
    }
}

impl<V> QueueDiffWithMessages<V> {
    /// Key of the first message, if any.
    pub fn min_message(&self) -> Option<QueueKey> {
        self.messages.keys().next().copied()
    }

    /// Key of the last message, if any.
    pub fn max_message(&self) -> Option<QueueKey> {
        self.messages.keys().next_back().copied()
    }
}

/// Statistics given with a diff (§2).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DiffStatistics {
    /// Shard of the diff's block.
    pub shard: ShardIdent,
    /// Lower bound of the diff (given, not derived).
    pub min_message: QueueKey,
    /// Upper bound of the diff (given, not derived); the diff's statistics rows and tail entry use it.
    pub max_message: QueueKey,
    /// Partition → destination → count.
    pub counts: PartitionCounts,
    /// Destination shard (coarse: the full shard of its workchain) → count.
    pub shards_messages_count: BTreeMap<ShardIdent, u64>,
}

impl DiffStatistics {
    /// Counts a diff's messages with its own router. Messages without a std destination are not counted.
    pub fn from_diff<V: MessageValue>(
        diff: &QueueDiffWithMessages<V>,
        shard: ShardIdent,
        min_message: QueueKey,
        max_message: QueueKey,
    ) -> Self {
        let mut counts = PartitionCounts::new();
        let mut shards_messages_count = BTreeMap::new();
        for message in diff.messages.values() {
            let Some(dst) = RouterAddr::from_int_addr(message.destination()) else {
                continue;
            };
            let partition = diff.router.lookup(message.source(), message.destination());
            *counts.entry(partition).or_default().entry(dst).or_default() += 1;
            *shards_messages_count
                .entry(full_shard(i32::from(dst.workchain)))
                .or_default() += 1;
        }
        Self {
            shard,
            min_message,
            max_message,
            counts,
            shards_messages_count,
        }
    }

    /// Statistics of a collated diff: bounds are the first/last key, or `min_for_lt(start_lt)` /
    /// `max_for_lt(end_lt)` when the diff is empty.
    pub fn for_collated<V: MessageValue>(
        diff: &QueueDiffWithMessages<V>,
        shard: ShardIdent,
        start_lt: u64,
        end_lt: u64,
    ) -> Self {
        let min = diff.min_message().unwrap_or(QueueKey::min_for_lt(start_lt));
        let max = diff.max_message().unwrap_or(QueueKey::max_for_lt(end_lt));
        Self::from_diff(diff, shard, min, max)
    }

    /// Total number of counted messages.
    pub fn total(&self) -> u64 {
        self.counts.values().flat_map(|m| m.values()).sum()
    }
}

/// A shard's commit pointer: the `max_message` and seqno of its last committed diff.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitPointer {
    /// `max_message` of the last committed diff.
    pub queue_key: QueueKey,
    /// Its seqno.
    pub seqno: u32,
}

/// One entry of a commit: a top shard block of the mc block, or the mc block itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopBlock {
    /// The block.
    pub block_id: regolith_formats::BlockId,
    /// The mc seqno that registered the block.
    pub ref_by_mc_seqno: u32,
    /// The shard's "updated in this mc block" flag.
    pub updated: bool,
}
