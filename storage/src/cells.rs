//! The rows of the stored shard states (state.md §7.1): cells by representation hash, the reference counts of
//! cells counted more than once, the `shard_states` roots, and the state checkpoint.
//!
//! This module only reads and writes rows; what a count means and how a state is walked is the
//! `regolith-state` crate's. Every change it makes is one [`CellBatch`], written at once, so that a state's
//! cells, its root row, its counts and its handle flags become visible together or not at all.

use std::sync::Arc;

use regolith_formats::{BlockId, BlockKey, HashBytes};
use regolith_kv::{Batch, KeyRange, NameKey, RawBytes};

use crate::block_handle::BlockHandle;
use crate::block_handle::BlockHandleStorage;
use crate::block_meta::BlockFlags;
use crate::db::CoreDb;
use crate::error::{Result, StorageError};
use crate::node_state::{id_value, load_id, LAST_MC_BLOCK};
use crate::tables::{
    CellRefs, Cells, CoreTables, RefCount, ShardStates, State, StateRoot, StoredBlockKey,
    StoredHash,
};

/// The mc block whose states the last checkpoint stored (state.md §7.3).
const STATE_CHECKPOINT: NameKey = NameKey("state_checkpoint");
/// The persistent key block whose persistent states are being written (state.md §7.4).
const PENDING_PERSISTENT: NameKey = NameKey("pending_persistent");
/// The journal of a state import in progress (state.md §7.6); its bytes are the state crate's.
const STATE_IMPORT: NameKey = NameKey("state_import");

/// Typed access to the cell rows of the `core` database.
#[derive(Clone)]
pub struct CellStorage {
    db: Arc<CoreDb>,
    handles: Arc<BlockHandleStorage>,
}

impl CellStorage {
    pub(crate) fn new(db: Arc<CoreDb>, handles: Arc<BlockHandleStorage>) -> Self {
        Self { db, handles }
    }

    /// Reads the body of the cell `hash` and hands it to `read` without copying it; `None` if no such row.
    pub fn with_cell<R>(
        &self,
        hash: &HashBytes,
        read: impl FnOnce(&[u8]) -> R,
    ) -> Result<Option<R>> {
        Ok(self
            .db
            .get_pinned::<Cells>(&StoredHash(*hash))?
            .map(|body| read(&body)))
    }

    /// Whether the cell `hash` is stored.
    pub fn contains_cell(&self, hash: &HashBytes) -> Result<bool> {
        Ok(self.db.contains::<Cells>(&StoredHash(*hash))?)
    }

    /// The `cell_refs` row of `hash`: `None` when there is none (a stored cell's count is then 1).
    pub fn ref_count_row(&self, hash: &HashBytes) -> Result<Option<u64>> {
        Ok(self.db.get::<CellRefs>(&StoredHash(*hash))?.map(|c| c.0))
    }

    /// The root of the stored state of block `id`, if it is stored.
    pub fn state_root(&self, id: &BlockId) -> Result<Option<HashBytes>> {
        Ok(self
            .db
            .get::<ShardStates>(&StoredBlockKey(BlockKey::of(id)))?
            .map(|h| h.root))
    }

    /// Every stored state: its block and root, in key order (workchain, shard, seqno).
    pub fn state_roots(&self) -> Result<Vec<(BlockId, HashBytes)>> {
        self.db
            .iter::<ShardStates>(KeyRange::all())
            .map(|row| {
                let (key, value) = row?;
                let id = key.0.to_block_id(value.file_hash).map_err(|e| {
                    StorageError::corruption(format!("the shard_states row {key:?}"), e)
                })?;
                Ok((id, value.root))
            })
            .collect()
    }

    /// Visits every stored cell (hash, body) in hash order; `visit` returns `false` to stop.
    pub fn for_each_cell(
        &self,
        mut visit: impl FnMut(&HashBytes, &[u8]) -> Result<bool>,
    ) -> Result<()> {
        for row in self.db.iter::<Cells>(KeyRange::all().readahead(4 << 20)) {
            let (key, body) = row?;
            if !visit(&key.0, &body.0)? {
                break;
            }
        }
        Ok(())
    }

    /// Every `cell_refs` row (hash, count) in hash order.
    pub fn ref_count_rows(&self) -> Result<Vec<(HashBytes, u64)>> {
        self.db
            .iter::<CellRefs>(KeyRange::all())
            .map(|row| row.map(|(k, v)| (k.0, v.0)).map_err(Into::into))
            .collect()
    }

    /// The mc block whose states the last checkpoint stored.
    pub fn checkpoint(&self) -> Result<Option<BlockId>> {
        self.get_id(STATE_CHECKPOINT)
    }

    /// The persistent key block whose persistent states are being written, if a save is pending.
    pub fn pending_persistent(&self) -> Result<Option<BlockId>> {
        self.get_id(PENDING_PERSISTENT)
    }

    /// The journal of a state import in progress, if one is open.
    pub fn import_journal(&self) -> Result<Option<Vec<u8>>> {
        Ok(self.db.get::<State>(&STATE_IMPORT)?.map(|v| v.0))
    }

    fn get_id(&self, key: NameKey) -> Result<Option<BlockId>> {
        load_id(&self.db, key)
    }

    /// An empty batch of cell-row changes.
    pub fn batch(&self) -> CellBatch {
        CellBatch {
            batch: Batch::new(),
            db: self.db.clone(),
            handles: self.handles.clone(),
            puts: 0,
            deletes: 0,
            bytes: 0,
        }
    }

    /// Writes `batch` at once; `what` names the change in an error.
    pub fn write(&self, batch: CellBatch, what: impl std::fmt::Display) -> Result<()> {
        self.db.write(batch.batch, what)?;
        Ok(())
    }
}

/// Changes to the cell rows, written at once by [`CellStorage::write`].
pub struct CellBatch {
    batch: Batch<CoreTables>,
    db: Arc<CoreDb>,
    handles: Arc<BlockHandleStorage>,
    puts: u64,
    deletes: u64,
    bytes: u64,
}

impl CellBatch {
    /// Stores the body of a new cell.
    pub fn put_cell(&mut self, hash: &HashBytes, body: &[u8]) {
        self.puts += 1;
        self.bytes += 32 + body.len() as u64;
        self.db.batch_put::<Cells>(
            &mut self.batch,
            &StoredHash(*hash),
            &RawBytes(body.to_vec()),
        );
    }

    /// Deletes a cell.
    pub fn delete_cell(&mut self, hash: &HashBytes) {
        self.deletes += 1;
        self.db
            .batch_delete::<Cells>(&mut self.batch, &StoredHash(*hash));
    }

    /// Sets the count of `hash`: a `cell_refs` row for 2 or more, none for 1. A count of 0 is the caller's
    /// [`Self::delete_cell`] (with this row gone: call this with 1).
    pub fn set_ref_count(&mut self, hash: &HashBytes, count: u64) {
        if count >= 2 {
            self.bytes += 40;
            self.db
                .batch_put::<CellRefs>(&mut self.batch, &StoredHash(*hash), &RefCount(count));
        } else {
            self.db
                .batch_delete::<CellRefs>(&mut self.batch, &StoredHash(*hash));
        }
    }

    /// Records the stored state of `handle`'s block with its root, and sets its HAS_STATE.
    pub fn put_state_root(&mut self, handle: &BlockHandle, root: &HashBytes) {
        self.db.batch_put::<ShardStates>(
            &mut self.batch,
            &StoredBlockKey(BlockKey::of(handle.id())),
            &StateRoot {
                root: *root,
                file_hash: handle.id().file_hash,
            },
        );
        handle.meta().add_flags(BlockFlags::HAS_STATE);
        self.handles.batch_store_handle(&mut self.batch, handle);
    }

    /// Removes the `shard_states` row of block `id` (HAS_STATE stays: flags are never cleared).
    pub fn delete_state_root(&mut self, id: &BlockId) {
        self.db
            .batch_delete::<ShardStates>(&mut self.batch, &StoredBlockKey(BlockKey::of(id)));
    }

    /// Records `mc` as the state checkpoint.
    pub fn put_checkpoint(&mut self, mc: &BlockId) {
        self.db
            .batch_put::<State>(&mut self.batch, &STATE_CHECKPOINT, &id_value(mc));
    }

    /// Marks the persistent states of `mc` as being written.
    pub fn put_pending_persistent(&mut self, mc: &BlockId) {
        self.db
            .batch_put::<State>(&mut self.batch, &PENDING_PERSISTENT, &id_value(mc));
    }

    /// Clears the mark of a pending persistent save.
    pub fn clear_pending_persistent(&mut self) {
        self.db
            .batch_delete::<State>(&mut self.batch, &PENDING_PERSISTENT);
    }

    /// Records the journal of a state import in progress.
    pub fn put_import_journal(&mut self, journal: &[u8]) {
        self.db
            .batch_put::<State>(&mut self.batch, &STATE_IMPORT, &RawBytes(journal.to_vec()));
    }

    /// Closes the journal of a state import.
    pub fn clear_import_journal(&mut self) {
        self.db
            .batch_delete::<State>(&mut self.batch, &STATE_IMPORT);
    }

    /// Adds `flags` to the handle, stored in this batch.
    pub fn add_flags(&mut self, handle: &BlockHandle, flags: BlockFlags) {
        handle.meta().add_flags(flags);
        self.handles.batch_store_handle(&mut self.batch, handle);
    }

    /// Records `mc` as the last applied mc block, in the same batch.
    pub fn put_last_mc_block(&mut self, mc: &BlockId) {
        self.db
            .batch_put::<State>(&mut self.batch, &LAST_MC_BLOCK, &id_value(mc));
    }

    /// Cell bodies put so far.
    pub fn cells_put(&self) -> u64 {
        self.puts
    }

    /// Cells deleted so far.
    pub fn cells_deleted(&self) -> u64 {
        self.deletes
    }

    /// Bytes of the cell and count rows put so far (keys and values).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}
