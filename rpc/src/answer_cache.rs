//! The serialized getBlockFull answers of recently served blocks, bounded by their bytes.
//!
//! Every peer that follows the tip asks for the same newest blocks within moments of each other, so the
//! service keeps the answers it built last: a repeat costs one handle check instead of three component
//! reads, two decompressions and a serialization. A stored block never changes until GC removes it, and
//! the service checks the handle on every hit, so a removed block is never served from here.

use bytes::Bytes;
use lru::LruCache;
use parking_lot::Mutex;
use tycho_types::models::BlockId;

/// An LRU map from block id to its serialized `overlay.response.ok(blockFull.found …)` answer, holding at
/// most `capacity` answer bytes. An answer larger than an eighth of the capacity is not kept, so that one
/// huge block cannot push every other answer out.
pub(crate) struct AnswerCache {
    capacity: usize,
    state: Mutex<State>,
}

struct State {
    answers: LruCache<BlockId, Bytes>,
    bytes: usize,
}

impl AnswerCache {
    /// A cache of at most `capacity` answer bytes; `None` when `capacity` is 0 (caching off).
    pub(crate) fn new(capacity: usize) -> Option<Self> {
        (capacity > 0).then(|| Self {
            capacity,
            state: Mutex::new(State {
                answers: LruCache::unbounded(),
                bytes: 0,
            }),
        })
    }

    /// The cached answer of `id`, marked as the most recently used.
    pub(crate) fn get(&self, id: &BlockId) -> Option<Bytes> {
        self.state.lock().answers.get(id).cloned()
    }

    /// Keeps `answer` for `id`, evicting the least recently used answers beyond the capacity.
    pub(crate) fn insert(&self, id: BlockId, answer: Bytes) {
        if answer.len() > self.capacity / 8 {
            return;
        }
        let mut state = self.state.lock();
        let added = answer.len();
        if let Some(old) = state.answers.put(id, answer) {
            state.bytes -= old.len();
        }
        state.bytes += added;
        while state.bytes > self.capacity {
            match state.answers.pop_lru() {
                Some((_, old)) => state.bytes -= old.len(),
                None => break,
            }
        }
    }

    /// Forgets the answer of `id`.
    pub(crate) fn remove(&self, id: &BlockId) {
        let mut state = self.state.lock();
        if let Some(old) = state.answers.pop(id) {
            state.bytes -= old.len();
        }
    }

    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.state.lock().bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tycho_types::models::ShardIdent;
    use tycho_types::prelude::HashBytes;

    fn id(n: u8) -> BlockId {
        BlockId {
            shard: ShardIdent::MASTERCHAIN,
            seqno: u32::from(n),
            root_hash: HashBytes([n; 32]),
            file_hash: HashBytes([n ^ 0xff; 32]),
        }
    }

    fn answer(len: usize, fill: u8) -> Bytes {
        Bytes::from(vec![fill; len])
    }

    #[test]
    fn zero_capacity_is_no_cache() {
        assert!(AnswerCache::new(0).is_none());
    }

    #[test]
    fn keeps_answers_within_the_capacity_and_evicts_the_least_recent() {
        let cache = AnswerCache::new(800).unwrap();
        for n in 1..=8 {
            cache.insert(id(n), answer(100, n));
        }
        assert_eq!(cache.bytes(), 800);
        // 1 becomes the most recent; 2 is now the least recent and goes first.
        assert_eq!(cache.get(&id(1)).unwrap(), answer(100, 1));
        cache.insert(id(9), answer(100, 9));
        assert_eq!(cache.bytes(), 800);
        assert!(cache.get(&id(2)).is_none());
        for n in [1, 3, 4, 5, 6, 7, 8, 9] {
            assert_eq!(cache.get(&id(n)).unwrap(), answer(100, n), "answer {n}");
        }
    }

    #[test]
    fn a_replaced_or_removed_answer_gives_its_bytes_back() {
        let cache = AnswerCache::new(800).unwrap();
        cache.insert(id(1), answer(100, 1));
        cache.insert(id(1), answer(60, 2));
        assert_eq!(cache.bytes(), 60);
        assert_eq!(cache.get(&id(1)).unwrap(), answer(60, 2));
        cache.remove(&id(1));
        assert_eq!(cache.bytes(), 0);
        assert!(cache.get(&id(1)).is_none());
        cache.remove(&id(1));
        assert_eq!(cache.bytes(), 0);
    }

    #[test]
    fn an_answer_over_an_eighth_of_the_capacity_is_not_kept() {
        let cache = AnswerCache::new(800).unwrap();
        cache.insert(id(1), answer(100, 1));
        cache.insert(id(2), answer(101, 2));
        assert!(cache.get(&id(2)).is_none());
        assert_eq!(cache.bytes(), 100);
    }
}
