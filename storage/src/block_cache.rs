//! LRU cache of parsed blocks with a TTL (storage.md §7.6). An entry weighs what the decoded block holds in
//! memory ([`ParsedBlock::memory_weight`]: its cells, not just its BOC) + 1 KiB, so that the configured size
//! bounds the memory the cache takes; storage.md's weight (data size + 1 KiB) let a 500 MB cache hold several
//! times that (a deviation).

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use regolith_formats::BlockId;

use crate::parsed::ParsedBlock;

struct Entry {
    block: Arc<ParsedBlock>,
    inserted: Instant,
    weight: u64,
}

struct Inner {
    lru: lru::LruCache<BlockId, Entry>,
    total_weight: u64,
}

/// Weighted LRU of parsed blocks.
pub(crate) struct BlockCache {
    inner: Mutex<Inner>,
    capacity: u64,
    ttl: Duration,
}

impl BlockCache {
    pub(crate) fn new(capacity: u64, ttl: Duration) -> Self {
        Self {
            inner: Mutex::new(Inner {
                lru: lru::LruCache::unbounded(),
                total_weight: 0,
            }),
            capacity,
            ttl,
        }
    }

    pub(crate) fn get(&self, id: &BlockId) -> Option<Arc<ParsedBlock>> {
        let mut inner = self.inner.lock();
        let expired = match inner.lru.get(id) {
            Some(e) if e.inserted.elapsed() <= self.ttl => return Some(e.block.clone()),
            Some(_) => true,
            None => false,
        };
        if expired {
            if let Some(e) = inner.lru.pop(id) {
                inner.total_weight -= e.weight;
            }
        }
        None
    }

    pub(crate) fn insert(&self, block: Arc<ParsedBlock>) {
        let weight = block.memory_weight() + 1024;
        if weight > self.capacity {
            return;
        }
        let mut inner = self.inner.lock();
        let entry = Entry {
            block: block.clone(),
            inserted: Instant::now(),
            weight,
        };
        if let Some(old) = inner.lru.put(block.id, entry) {
            inner.total_weight -= old.weight;
        }
        inner.total_weight += weight;
        while inner.total_weight > self.capacity {
            match inner.lru.pop_lru() {
                Some((_, e)) => inner.total_weight -= e.weight,
                None => break,
            }
        }
    }

    pub(crate) fn invalidate(&self, ids: &[BlockId]) {
        let mut inner = self.inner.lock();
        for id in ids {
            if let Some(e) = inner.lru.pop(id) {
                inner.total_weight -= e.weight;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use regolith_formats::archive::{ArchiveEntryType, ArchiveReader};

    fn fixture_blocks() -> Vec<Arc<ParsedBlock>> {
        let file = std::fs::File::open(regolith_test_support::archive_1_path()).unwrap();
        ArchiveReader::new_compressed(file)
            .unwrap()
            .map(Result::unwrap)
            .filter(|e| e.ty == ArchiveEntryType::Block)
            .map(|e| Arc::new(ParsedBlock::parse(&e.block_id, &e.data).unwrap()))
            .collect()
    }

    #[test]
    fn entries_weigh_their_decoded_cells_and_the_capacity_bounds_them() {
        let blocks = fixture_blocks();
        let weights: Vec<u64> = blocks.iter().map(|b| b.memory_weight() + 1024).collect();
        for (b, w) in blocks.iter().zip(&weights) {
            // A decoded block weighs more than its BOC: at least one cell's layout on top of its bytes.
            assert!(*w > b.data_size as u64 + 1024, "{}", b.id);
        }
        let capacity = weights[..10].iter().sum::<u64>();
        let cache = BlockCache::new(capacity, Duration::from_secs(3600));
        for b in &blocks {
            cache.insert(b.clone());
            assert!(cache.inner.lock().total_weight <= capacity);
        }
        let held: u64 = blocks
            .iter()
            .zip(&weights)
            .filter(|(b, _)| cache.get(&b.id).is_some())
            .map(|(_, w)| w)
            .sum();
        assert_eq!(held, cache.inner.lock().total_weight);
        // The newest block is held, the first ones were evicted.
        assert!(cache.get(&blocks.last().unwrap().id).is_some());
        assert!(cache.get(&blocks[0].id).is_none());
    }
}
