//! Ordered iteration (queue.md §5.6): one partition, one snapshot, one inner iterator per source shard,
//! merged by a min-heap so the output is strictly ascending by key across all sources. Messages addressed
//! outside `for_shard` are skipped by their 9-byte value header, without decoding the body.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::sync::Arc;

use regolith_formats::ShardIdent;

use crate::db::{OwnedIter, QueueSnapshot};
use crate::error::{QueueError, Result};
use crate::key::{shard_contains, PartitionIdx, QueueKey, ShardRange};
use crate::message::MessageValue;
use regolith_kv::{KeyRange, KvError};

use crate::tables::{MessageEntry, MessageKey, ShardIntMessages};

struct Source {
    shard: ShardIdent,
    iter: OwnedIter<ShardIntMessages>,
    /// The last key read, skipped ones included.
    position: Option<QueueKey>,
}

/// One stored row as the refill sees it.
enum Row<V> {
    /// Addressed outside `for_shard`: only its key and header were read.
    Skipped,
    /// Decoded.
    Message(V),
}

/// Iterates one partition's messages over several source ranges in ascending key order.
pub struct QueueIterator<V> {
    for_shard: ShardIdent,
    sources: Vec<Source>,
    heap: BinaryHeap<Reverse<(QueueKey, usize)>>,
    pending: Vec<Option<Arc<V>>>,
    needs_refill: Vec<usize>,
    scanned: u64,
}

impl<V: MessageValue> QueueIterator<V> {
    /// Opens the iterator on a snapshot; a source listed twice is an error.
    pub(crate) fn new(
        snapshot: Arc<QueueSnapshot>,
        partition: PartitionIdx,
        ranges: &[ShardRange],
        for_shard: ShardIdent,
    ) -> Result<Self> {
        let mut sources: Vec<Source> = Vec::with_capacity(ranges.len());
        for range in ranges {
            if sources.iter().any(|s| s.shard == range.shard) {
                return Err(QueueError::DuplicateIteratorSource(range.shard));
            }
            let key = |key| MessageKey {
                partition,
                shard: range.shard,
                key,
            };
            let rows = KeyRange::between(&key(range.from), &key(range.to)).readahead(1 << 20);
            sources.push(Source {
                shard: range.shard,
                iter: OwnedIter::new(snapshot.clone(), rows),
                position: None,
            });
        }
        let n = sources.len();
        Ok(Self {
            for_shard,
            sources,
            heap: BinaryHeap::with_capacity(n),
            pending: (0..n).map(|_| None).collect(),
            needs_refill: (0..n).collect(),
            scanned: 0,
        })
    }

    /// The next message (source shard, message), strictly ascending by key.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Option<Result<(ShardIdent, Arc<V>)>> {
        while let Some(index) = self.needs_refill.pop() {
            match self.refill(index) {
                Ok(()) => {}
                // The bad entry was passed; the source continues on the next call.
                Err(
                    e @ (QueueError::Deserialize { .. }
                    | QueueError::InvalidData { .. }
                    | QueueError::Kv(KvError::Corruption { .. })),
                ) => {
                    self.needs_refill.push(index);
                    return Some(Err(e));
                }
                Err(e) => return Some(Err(e)),
            }
        }
        let Reverse((_, index)) = self.heap.pop()?;
        let message = self.pending[index].take()?;
        self.needs_refill.push(index);
        Some(Ok((self.sources[index].shard, message)))
    }

    /// Each source's last key seen, skipped keys included.
    pub fn current_position(&self) -> BTreeMap<ShardIdent, QueueKey> {
        self.sources
            .iter()
            .filter_map(|source| Some((source.shard, source.position?)))
            .collect()
    }

    /// Number of stored messages read so far, skipped ones included.
    pub fn scanned(&self) -> u64 {
        self.scanned
    }

    /// Advances source `index` to its next message for `for_shard` and puts it in the heap. The value of a
    /// skipped row is read no further than its header, and no row's bytes are copied before decoding.
    fn refill(&mut self, index: usize) -> Result<()> {
        let for_shard = self.for_shard;
        let source = &mut self.sources[index];
        let shard = source.shard;
        loop {
            let Some(row) = source.iter.next_raw(|key, value| {
                let queue_key = key.key;
                let row = MessageEntry::split(value).and_then(|(workchain, prefix, body)| {
                    if !shard_contains(&for_shard, i32::from(workchain), prefix) {
                        return Ok(Row::Skipped);
                    }
                    V::deserialize(&queue_key, body)
                        .map(Row::Message)
                        .map_err(|reason| QueueError::Deserialize {
                            source_shard: shard,
                            key: queue_key,
                            reason,
                        })
                });
                (queue_key, row)
            }) else {
                return Ok(());
            };
            let (queue_key, row) = row?;
            self.scanned += 1;
            source.position = Some(queue_key);
            match row? {
                Row::Skipped => continue,
                Row::Message(message) => {
                    self.pending[index] = Some(Arc::new(message));
                    self.heap.push(Reverse((queue_key, index)));
                    return Ok(());
                }
            }
        }
    }
}

impl<V: MessageValue> Iterator for QueueIterator<V> {
    type Item = Result<(ShardIdent, Arc<V>)>;

    fn next(&mut self) -> Option<Self::Item> {
        QueueIterator::next(self)
    }
}
