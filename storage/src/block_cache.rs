//! LRU cache of parsed blocks with a TTL; entry weight = data size + 1 KiB (storage.md §7.6).

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
        let weight = block.data_size as u64 + 1024;
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
