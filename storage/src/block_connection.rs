//! Block connections: links to chain neighbours and waiting for Next1 (storage.md §6).

use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use regolith_formats::{BlockId, BlockKey};
use regolith_kv::Batch;

use crate::block_handle::BlockHandle;
use crate::block_meta::BlockFlags;
use crate::db::CoreDb;
use crate::error::{Result, StorageError};
use crate::subscriptions::Subscriptions;
use crate::tables::{BlockConnections, BlockHandles, ConnectionKey, StoredBlockId, StoredHash};

pub use crate::tables::Direction;

impl Direction {
    /// The handle flag of this direction.
    pub const fn flag(self) -> BlockFlags {
        match self {
            Self::Prev1 => BlockFlags::HAS_PREV_1,
            Self::Prev2 => BlockFlags::HAS_PREV_2,
            Self::Next1 => BlockFlags::HAS_NEXT_1,
            Self::Next2 => BlockFlags::HAS_NEXT_2,
        }
    }
}

/// Stores and reads block connections.
pub struct BlockConnectionStorage {
    db: Arc<CoreDb>,
    /// Inverted roles: writers take the shared side, the waiter the exclusive side.
    next1_lock: RwLock<()>,
    next1_subscriptions: Subscriptions<BlockId, BlockId>,
}

impl BlockConnectionStorage {
    pub(crate) fn new(db: Arc<CoreDb>) -> Self {
        Self {
            db,
            next1_lock: RwLock::new(()),
            next1_subscriptions: Subscriptions::default(),
        }
    }

    /// Stores a connection of `handle` in `direction` (once; later calls for the same direction are no-ops).
    pub fn store_connection(
        &self,
        handle: &BlockHandle,
        direction: Direction,
        connected_id: &BlockId,
    ) -> Result<()> {
        let _guard = (direction == Direction::Next1).then(|| self.next1_lock.read());
        if handle.is_removed() {
            return Err(StorageError::HandleRemoved(*handle.id()));
        }
        let flag = direction.flag();
        if handle.flags().contains(flag) {
            return Ok(());
        }
        let mut meta = handle.meta().load();
        meta.flags = meta.flags | flag;
        let mut batch = Batch::new();
        self.db.batch_put::<BlockConnections>(
            &mut batch,
            &ConnectionKey(BlockKey::of(handle.id()), direction),
            &StoredBlockId(*connected_id),
        );
        self.db.batch_merge::<BlockHandles>(
            &mut batch,
            &StoredHash(handle.id().root_hash),
            &meta.into(),
        );
        self.db.write(
            batch,
            format_args!("storing {direction:?} connection of {}", handle.id()),
        )?;
        handle.meta().add_flags(flag);
        if direction == Direction::Next1 {
            self.next1_subscriptions.notify(handle.id(), connected_id);
        }
        Ok(())
    }

    /// The connected id in `direction`, if stored (flags are not checked).
    pub fn load_connection(&self, id: &BlockId, direction: Direction) -> Result<Option<BlockId>> {
        Ok(self
            .db
            .get::<BlockConnections>(&ConnectionKey(BlockKey::of(id), direction))?
            .map(|stored| stored.0))
    }

    /// Waits until the Next1 connection of `prev_id` is stored and returns it.
    pub async fn wait_for_next1(
        &self,
        prev_id: &BlockId,
        timeout: Option<Duration>,
    ) -> Result<BlockId> {
        let waiter = {
            let _guard = self.next1_lock.write();
            if let Some(next) = self.load_connection(prev_id, Direction::Next1)? {
                return Ok(next);
            }
            self.next1_subscriptions.subscribe(*prev_id)
        };
        waiter.wait(timeout).await
    }

    /// Number of ids with Next1 waiters (tests).
    #[cfg(feature = "test-utils")]
    pub fn next1_waiter_keys(&self) -> usize {
        self.next1_subscriptions.len()
    }
}
