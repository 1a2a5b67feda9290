//! The handle cache: `BlockId → WeakBlockHandle`, no capacity limit, never holding strong references.

use std::sync::Arc;

use dashmap::DashMap;
use regolith_formats::{BlockId, ShardIdent};

use super::handle::{BlockHandle, WeakBlockHandle};
use crate::block_meta::{BlockFlags, BlockMeta, MetaSnapshot};

/// The map of the cache. A cached `load_handle` is little more than this lookup, so the key hashes only
/// what tells blocks apart, the root hash and the seqno (equality still compares the whole id), with aHash
/// instead of SipHash. aHash is keyed per process: crafted ids cannot aim at one bucket.
pub(crate) type CacheMap = DashMap<CacheKey, WeakBlockHandle, ahash::RandomState>;

/// A block id as a key of the cache.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct CacheKey(pub(crate) BlockId);

impl std::hash::Hash for CacheKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        let root = &self.0.root_hash.0;
        let head = u64::from_le_bytes(root[..8].try_into().expect("8 of 32 bytes"));
        let tail = u64::from_le_bytes(root[24..].try_into().expect("8 of 32 bytes"));
        state.write_u64(head ^ tail.rotate_left(32) ^ u64::from(self.0.seqno));
    }
}

/// Concurrent weak-ref cache of block handles.
#[derive(Clone, Default)]
pub struct HandleCache {
    pub(crate) map: Arc<CacheMap>,
}

impl HandleCache {
    /// Number of slots (live or dead).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether the cache has no slots.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The live instance for `id`, if any.
    pub fn get(&self, id: &BlockId) -> Option<BlockHandle> {
        self.map.get(&CacheKey(*id)).and_then(|weak| weak.upgrade())
    }

    /// Whether the slot of `id` holds exactly `handle`.
    pub fn slot_is(&self, id: &BlockId, handle: &BlockHandle) -> bool {
        self.map
            .get(&CacheKey(*id))
            .is_some_and(|weak| std::ptr::eq(weak.0.as_ptr(), Arc::as_ptr(&handle.0)))
    }

    /// Returns the live instance, or builds one from `meta` and stores a weak ref to it.
    pub(crate) fn fill(&self, id: &BlockId, meta: MetaSnapshot) -> BlockHandle {
        use dashmap::mapref::entry::Entry;
        // The fresh instance is only built inside the vacant/dead branches, so nothing strong is dropped while
        // the shard lock is held (Drop re-enters the map).
        match self.map.entry(CacheKey(*id)) {
            Entry::Occupied(mut slot) => {
                if let Some(live) = slot.get().upgrade() {
                    return live;
                }
                let handle =
                    BlockHandle::new(*id, BlockMeta::from_snapshot(meta), self.map.clone());
                slot.insert(handle.downgrade());
                handle
            }
            Entry::Vacant(slot) => {
                let handle =
                    BlockHandle::new(*id, BlockMeta::from_snapshot(meta), self.map.clone());
                slot.insert(handle.downgrade());
                handle
            }
        }
    }

    /// Forced removal by height (storage.md §4 rule 5); returns how many entries were removed.
    pub fn gc_handles_cache(
        &self,
        target_mc_seqno: u32,
        shard_heights: &[(ShardIdent, u32)],
    ) -> usize {
        // Snapshot outside any lock decision; upgrade and decide without holding a map lock.
        let snapshot: Vec<(BlockId, WeakBlockHandle)> = self
            .map
            .iter()
            .map(|e| (e.key().0, e.value().clone()))
            .collect();
        let mut removed = 0;
        for (id, weak) in snapshot {
            let Some(handle) = weak.upgrade() else {
                if self
                    .map
                    .remove_if(&CacheKey(id), |_, w| w.0.ptr_eq(&weak.0))
                    .is_some()
                {
                    removed += 1;
                }
                continue;
            };
            if crate::gc::keeps_block(
                &id.shard,
                id.seqno,
                Some(handle.flags()),
                target_mc_seqno,
                shard_heights,
            ) {
                continue;
            }
            handle.meta().add_flags(BlockFlags::IS_REMOVED);
            let ptr = Arc::as_ptr(&handle.0);
            let removed_slot = self
                .map
                .remove_if(&CacheKey(id), |_, w| std::ptr::eq(w.0.as_ptr(), ptr));
            if removed_slot.is_some() {
                removed += 1;
            }
            // The weak ref from the slot and our strong handle are dropped here, after the lock is released.
            drop(removed_slot);
            drop(handle);
        }
        removed
    }

    /// Marks live instances of the given ids as removed and evicts them (the GC sweep after deletion).
    pub(crate) fn evict_removed(&self, ids: &[BlockId]) {
        for id in ids {
            let handle = self.get(id);
            if let Some(h) = &handle {
                h.meta().add_flags(BlockFlags::IS_REMOVED);
                let ptr = Arc::as_ptr(&h.0);
                let slot = self
                    .map
                    .remove_if(&CacheKey(*id), |_, w| std::ptr::eq(w.0.as_ptr(), ptr));
                drop(slot);
            }
            drop(handle);
        }
    }
}
