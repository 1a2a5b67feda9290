//! `BlockHandle`: a cheap clone of one shared instance per block (identity = pointer identity).

use std::sync::{Arc, Weak};

use regolith_formats::BlockId;
use tokio::sync::RwLock;

use super::cache::{CacheKey, CacheMap};
use crate::block_meta::{BlockFlags, BlockMeta};

pub(crate) struct HandleInner {
    pub(crate) id: BlockId,
    pub(crate) meta: BlockMeta,
    pub(crate) data_lock: RwLock<()>,
    pub(crate) proof_lock: RwLock<()>,
    pub(crate) queue_diff_lock: RwLock<()>,
    cache: Arc<CacheMap>,
}

impl Drop for HandleInner {
    fn drop(&mut self) {
        // Remove the slot only if it still refers to this instance or to a dead one: a slot refilled by a
        // newer instance is left alone.
        let this = self as *const HandleInner;
        self.cache.remove_if(&CacheKey(self.id), |_, weak| {
            std::ptr::eq(weak.0.as_ptr(), this) || weak.0.strong_count() == 0
        });
    }
}

/// A handle to one block: its id, meta flags and component locks.
#[derive(Clone)]
pub struct BlockHandle(pub(crate) Arc<HandleInner>);

impl BlockHandle {
    pub(crate) fn new(id: BlockId, meta: BlockMeta, cache: Arc<CacheMap>) -> Self {
        Self(Arc::new(HandleInner {
            id,
            meta,
            data_lock: RwLock::new(()),
            proof_lock: RwLock::new(()),
            queue_diff_lock: RwLock::new(()),
            cache,
        }))
    }

    /// The block id.
    pub fn id(&self) -> &BlockId {
        &self.0.id
    }

    /// The meta.
    pub fn meta(&self) -> &BlockMeta {
        &self.0.meta
    }

    /// Current flags.
    pub fn flags(&self) -> BlockFlags {
        self.0.meta.flags()
    }

    /// Generation time.
    pub fn gen_utime(&self) -> u32 {
        self.0.meta.gen_utime()
    }

    /// Whether this is a masterchain block.
    pub fn is_masterchain(&self) -> bool {
        self.0.id.is_masterchain()
    }

    /// A weak reference.
    pub fn downgrade(&self) -> WeakBlockHandle {
        WeakBlockHandle(Arc::downgrade(&self.0))
    }

    /// Whether two handles are the same instance.
    pub fn ptr_eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    fn has(&self, f: BlockFlags) -> bool {
        self.flags().contains(f)
    }

    fn has_part(&self, f: BlockFlags) -> bool {
        self.flags().0 & (f.0 | BlockFlags::IS_REMOVED.0) == f.0
    }

    /// Key block flag, or mc seqno 0.
    pub fn is_key_block(&self) -> bool {
        self.has(BlockFlags::IS_KEY_BLOCK) || (self.is_masterchain() && self.0.id.seqno == 0)
    }

    /// Persistent flag, or seqno 0.
    pub fn is_persistent(&self) -> bool {
        self.has(BlockFlags::IS_PERSISTENT) || self.0.id.seqno == 0
    }

    /// Zerostate flag, or seqno 0.
    pub fn is_zerostate(&self) -> bool {
        self.has(BlockFlags::IS_ZEROSTATE) || self.0.id.seqno == 0
    }

    /// Whether the handle was evicted by GC (inert).
    pub fn is_removed(&self) -> bool {
        self.has(BlockFlags::IS_REMOVED)
    }

    /// Block data stored (and not removed).
    pub fn has_data(&self) -> bool {
        self.has_part(BlockFlags::HAS_DATA)
    }

    /// Proof stored (and not removed).
    pub fn has_proof(&self) -> bool {
        self.has_part(BlockFlags::HAS_PROOF)
    }

    /// Queue diff stored (and not removed).
    pub fn has_queue_diff(&self) -> bool {
        self.has_part(BlockFlags::HAS_QUEUE_DIFF)
    }

    /// All three parts stored (and not removed).
    pub fn has_all_block_parts(&self) -> bool {
        self.has_part(BlockFlags::HAS_ALL_BLOCK_PARTS)
    }

    /// Committed flag.
    pub fn is_committed(&self) -> bool {
        self.has(BlockFlags::IS_COMMITTED)
    }

    /// Shard state flag.
    pub fn has_state(&self) -> bool {
        self.has(BlockFlags::HAS_STATE)
    }

    /// Virtual state flag.
    pub fn has_virtual_state(&self) -> bool {
        self.has(BlockFlags::HAS_VIRTUAL_STATE)
    }

    /// Persistent shard state flag.
    pub fn has_persistent_shard_state(&self) -> bool {
        self.has(BlockFlags::HAS_PERSISTENT_SHARD_STATE)
    }

    /// Persistent queue state flag.
    pub fn has_persistent_queue_state(&self) -> bool {
        self.has(BlockFlags::HAS_PERSISTENT_QUEUE_STATE)
    }

    /// Next1 connection flag.
    pub fn has_next1(&self) -> bool {
        self.has(BlockFlags::HAS_NEXT_1)
    }

    /// Next2 connection flag.
    pub fn has_next2(&self) -> bool {
        self.has(BlockFlags::HAS_NEXT_2)
    }

    /// Prev1 connection flag.
    pub fn has_prev1(&self) -> bool {
        self.has(BlockFlags::HAS_PREV_1)
    }

    /// Prev2 connection flag.
    pub fn has_prev2(&self) -> bool {
        self.has(BlockFlags::HAS_PREV_2)
    }

    /// Blocks GC protection is open.
    pub fn skip_blocks_gc(&self) -> bool {
        self.flags().skip_blocks_gc()
    }

    /// States GC protection is open.
    pub fn skip_states_gc(&self) -> bool {
        self.flags().skip_states_gc()
    }

    /// The mc block that commits this block (for mc blocks: their own seqno).
    pub fn ref_by_mc_seqno(&self) -> u32 {
        if self.is_masterchain() {
            self.0.id.seqno
        } else {
            self.0.meta.load().ref_by_mc_seqno
        }
    }
}

impl std::fmt::Debug for BlockHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockHandle")
            .field("id", &self.0.id)
            .field("meta", &self.0.meta.load())
            .finish()
    }
}

/// A weak handle; does not keep the instance alive.
#[derive(Clone)]
pub struct WeakBlockHandle(pub(crate) Weak<HandleInner>);

impl WeakBlockHandle {
    /// Upgrades while a strong holder exists.
    pub fn upgrade(&self) -> Option<BlockHandle> {
        self.0.upgrade().map(BlockHandle)
    }

    /// Whether the instance is still alive.
    pub fn is_alive(&self) -> bool {
        self.0.strong_count() > 0
    }
}
