//! Handle storage: create/load of handles and the flag setters (storage.md §5.1–§5.4).

use std::sync::Arc;

use parking_lot::Mutex;
use regolith_formats::{BlockId, BlockKey};
use regolith_kv::Batch;

use super::cache::HandleCache;
use super::handle::BlockHandle;
use crate::block_meta::{BlockFlags, MetaSnapshot, NewBlockMeta};
use crate::db::CoreDb;
use crate::error::{Result, StorageError};
use crate::tables::{
    BlockHandles, BlockIds, CoreTables, HandleIdentity, KeyBlocks, KeyRange, SeqnoKey,
    ShortIdPrefix, StoredBlockId, StoredBlockKey, StoredHandle, StoredHash,
};

const CREATION_LOCK_STRIPES: usize = 256;

/// Whether `create_or_load_handle` created the block or found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandleStatus {
    /// Newly created (reported once per stored lifetime of a block).
    Created,
    /// Already known.
    Fetched,
}

/// A handle the caller already has, or the meta to create one with.
pub enum MaybeExistingHandle {
    /// Use this handle (must have the same id).
    Existing(BlockHandle),
    /// Create or load with this meta.
    New(NewBlockMeta),
}

impl From<BlockHandle> for MaybeExistingHandle {
    fn from(h: BlockHandle) -> Self {
        Self::Existing(h)
    }
}

impl From<NewBlockMeta> for MaybeExistingHandle {
    fn from(m: NewBlockMeta) -> Self {
        Self::New(m)
    }
}

/// Creates, loads and updates block handles; owns the handle cache and the key-block index.
pub struct BlockHandleStorage {
    pub(crate) db: Arc<CoreDb>,
    pub(crate) cache: HandleCache,
    creation_locks: Vec<Mutex<()>>,
    pub(crate) each_key_block_is_persistent: bool,
}

impl BlockHandleStorage {
    pub(crate) fn new(db: Arc<CoreDb>, each_key_block_is_persistent: bool) -> Self {
        Self {
            db,
            cache: HandleCache::default(),
            creation_locks: (0..CREATION_LOCK_STRIPES).map(|_| Mutex::new(())).collect(),
            each_key_block_is_persistent,
        }
    }

    /// The handle cache.
    pub fn cache(&self) -> &HandleCache {
        &self.cache
    }

    /// Reads a block's handle row; `Ok(None)` when it is missing. A row without the rest of the id (layout 0.1,
    /// in a data dir opened read-only before its migration, or a meta merged after GC deleted the block) takes
    /// the file hash from `block_ids`, and is `Ok(None)` without that row. A row of another id under the same
    /// root hash (another file hash, workchain, shard or seqno: a handle is only for the whole id) is
    /// `BlockIdMismatch`.
    fn read_rows(&self, id: &BlockId) -> Result<Option<MetaSnapshot>> {
        let Some(StoredHandle { meta, id: stored }) =
            self.db.get::<BlockHandles>(&StoredHash(id.root_hash))?
        else {
            return Ok(None);
        };
        let wanted = HandleIdentity::of(id);
        let stored = match stored {
            Some(stored) => stored,
            None => match self.db.get::<BlockIds>(&StoredBlockKey(BlockKey::of(id)))? {
                Some(StoredHash(file_hash)) => HandleIdentity {
                    file_hash,
                    ..wanted
                },
                None => return Ok(None),
            },
        };
        if stored != wanted {
            return Err(StorageError::BlockIdMismatch {
                id: *id,
                stored: stored.to_string(),
            });
        }
        Ok(Some(meta))
    }

    /// Loads a known block's handle (cache first, then the DB). `None` if unknown, if a row is missing, or if
    /// the stored file hash differs.
    pub fn load_handle(&self, id: &BlockId) -> Result<Option<BlockHandle>> {
        if let Some(h) = self.cache.get(id) {
            return Ok(Some(h));
        }
        match self.read_rows(id) {
            Ok(Some(meta)) => Ok(Some(self.cache.fill(id, meta))),
            Ok(None) | Err(StorageError::BlockIdMismatch { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Returns the block's handle, creating it with `meta` if the block is unknown.
    pub fn create_or_load_handle(
        &self,
        id: &BlockId,
        meta: NewBlockMeta,
    ) -> Result<(BlockHandle, HandleStatus)> {
        if let Some(h) = self.cache.get(id) {
            return Ok((h, HandleStatus::Fetched));
        }
        // The rows are read once, under the creation lock of the id's stripe: reading them before the lock
        // as well would cost a new block a second read for nothing, and an uncontended lock is cheaper.
        let stripe = usize::from(id.root_hash.0[0]) % CREATION_LOCK_STRIPES;
        let _guard = self.creation_locks[stripe].lock();
        if let Some(h) = self.cache.get(id) {
            return Ok((h, HandleStatus::Fetched));
        }
        if let Some(stored) = self.read_rows(id)? {
            return Ok((self.cache.fill(id, stored), HandleStatus::Fetched));
        }

        let handle = self.cache.fill(
            id,
            MetaSnapshot {
                flags: if meta.is_key_block {
                    BlockFlags::IS_KEY_BLOCK
                } else {
                    BlockFlags::EMPTY
                },
                ref_by_mc_seqno: meta.ref_by_mc_seqno,
                gen_utime: meta.gen_utime,
            },
        );
        let mut batch = Batch::new();
        self.db.batch_put::<BlockHandles>(
            &mut batch,
            &StoredHash(id.root_hash),
            &StoredHandle {
                meta: handle.meta().load(),
                id: Some(HandleIdentity::of(id)),
            },
        );
        self.db.batch_put::<BlockIds>(
            &mut batch,
            &StoredBlockKey(BlockKey::of(id)),
            &StoredHash(id.file_hash),
        );
        if handle.is_key_block() {
            self.db
                .batch_put::<KeyBlocks>(&mut batch, &SeqnoKey(id.seqno), &StoredBlockId(*id));
        }
        self.db
            .write(batch, format_args!("creating handle of {id}"))?;
        Ok((handle, HandleStatus::Created))
    }

    /// Ids of known blocks with this shard and seqno (several on forks), in key order.
    pub fn find_block_ids(
        &self,
        shard: &regolith_formats::ShardIdent,
        seqno: u32,
    ) -> Result<Vec<BlockId>> {
        let prefix = ShortIdPrefix {
            workchain: shard.workchain(),
            prefix: shard.prefix(),
            seqno,
        };
        self.block_ids(KeyRange::prefix(&prefix)).collect()
    }

    /// Every known block id in key order from `start` (inclusive); errors are surfaced as items.
    pub fn iter_block_ids_from(
        &self,
        start: BlockKey,
    ) -> impl Iterator<Item = Result<BlockId>> + '_ {
        self.block_ids(KeyRange::from(&StoredBlockKey(start)))
    }

    fn block_ids(&self, range: KeyRange) -> impl Iterator<Item = Result<BlockId>> + '_ {
        let mut done = false;
        self.db
            .iter::<BlockIds>(range)
            .map(|row| {
                let (StoredBlockKey(key), StoredHash(file_hash)) = row?;
                Ok(key.to_block_id(file_hash)?)
            })
            .take_while(move |item: &Result<BlockId>| {
                // An error is the last item.
                let take = !done;
                done = item.is_err();
                take
            })
    }

    /// Persists the handle's current flags (§5.3 rules 3–4). Removed handles are never written.
    pub(crate) fn store_handle(&self, handle: &BlockHandle) -> Result<()> {
        if handle.is_removed() {
            return Ok(());
        }
        if handle.is_key_block() {
            let mut batch = Batch::new();
            self.batch_store_handle(&mut batch, handle);
            self.db
                .write(batch, format_args!("storing handle of {}", handle.id()))?;
        } else {
            let meta = handle.meta().load();
            self.db
                .merge::<BlockHandles>(&StoredHash(handle.id().root_hash), &meta.into())?;
        }
        Ok(())
    }

    /// Adds the handle's current flags (and its key-block index row) to `batch`.
    pub(crate) fn batch_store_handle(&self, batch: &mut Batch<CoreTables>, handle: &BlockHandle) {
        let meta = handle.meta().load();
        self.db.batch_merge::<BlockHandles>(
            batch,
            &StoredHash(handle.id().root_hash),
            &meta.into(),
        );
        if handle.is_key_block() {
            self.db.batch_put::<KeyBlocks>(
                batch,
                &SeqnoKey(handle.id().seqno),
                &StoredBlockId(*handle.id()),
            );
        }
    }

    fn set_flag(&self, handle: &BlockHandle, flag: BlockFlags) -> Result<bool> {
        if handle.is_removed() {
            return Ok(false);
        }
        if handle.meta().add_flags(flag) {
            self.store_handle(handle)?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Sets SKIP_STATES_GC.
    pub fn set_skip_states_gc(&self, h: &BlockHandle) -> Result<bool> {
        self.set_flag(h, BlockFlags::SKIP_STATES_GC)
    }

    /// Sets SKIP_STATES_GC_FINISHED.
    pub fn set_skip_states_gc_finished(&self, h: &BlockHandle) -> Result<bool> {
        self.set_flag(h, BlockFlags::SKIP_STATES_GC_FINISHED)
    }

    /// Sets SKIP_BLOCKS_GC.
    pub fn set_skip_blocks_gc(&self, h: &BlockHandle) -> Result<bool> {
        self.set_flag(h, BlockFlags::SKIP_BLOCKS_GC)
    }

    /// Sets SKIP_BLOCKS_GC_FINISHED.
    pub fn set_skip_blocks_gc_finished(&self, h: &BlockHandle) -> Result<bool> {
        self.set_flag(h, BlockFlags::SKIP_BLOCKS_GC_FINISHED)
    }

    /// Sets IS_COMMITTED.
    pub fn set_block_committed(&self, h: &BlockHandle) -> Result<bool> {
        self.set_flag(h, BlockFlags::IS_COMMITTED)
    }

    /// Sets HAS_STATE.
    pub fn set_has_shard_state(&self, h: &BlockHandle) -> Result<bool> {
        self.set_flag(h, BlockFlags::HAS_STATE)
    }

    /// Sets IS_ZEROSTATE.
    pub fn set_is_zerostate(&self, h: &BlockHandle) -> Result<bool> {
        self.set_flag(h, BlockFlags::IS_ZEROSTATE)
    }

    /// Sets HAS_VIRTUAL_STATE.
    pub fn set_has_virtual_shard_state(&self, h: &BlockHandle) -> Result<bool> {
        self.set_flag(h, BlockFlags::HAS_VIRTUAL_STATE)
    }

    /// Sets IS_PERSISTENT.
    pub fn set_block_persistent(&self, h: &BlockHandle) -> Result<bool> {
        self.set_flag(h, BlockFlags::IS_PERSISTENT)
    }

    /// Sets HAS_PERSISTENT_SHARD_STATE.
    pub fn set_has_persistent_shard_state(&self, h: &BlockHandle) -> Result<bool> {
        self.set_flag(h, BlockFlags::HAS_PERSISTENT_SHARD_STATE)
    }

    /// Sets HAS_PERSISTENT_QUEUE_STATE.
    pub fn set_has_persistent_queue_state(&self, h: &BlockHandle) -> Result<bool> {
        self.set_flag(h, BlockFlags::HAS_PERSISTENT_QUEUE_STATE)
    }
}
