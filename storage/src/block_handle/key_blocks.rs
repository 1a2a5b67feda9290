//! The key-block index (`key_blocks`: seqno BE → id) and its lookups (storage.md §5.5).

use regolith_formats::BlockId;

use super::handle::BlockHandle;
use super::storage::BlockHandleStorage;
use crate::error::{Result, StorageError};
use crate::tables::{KeyBlocks, KeyRange, SeqnoKey, StoredBlockId};

/// Persistent window: 2^17 seconds.
pub(super) const PERSISTENT_WINDOW_SHIFT: u32 = 17;

/// Direction of a key-block iteration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyBlocksDirection {
    /// Ascending from the first seqno ≥ the given one (inclusive).
    ForwardFrom(u32),
    /// Descending from the last entry.
    Backward,
}

/// Whether a key block with time `t` is persistent relative to the preceding key block with time `p`.
pub(super) fn is_persistent_key_block(t: u32, p: u32) -> bool {
    (t >> PERSISTENT_WINDOW_SHIFT) != (p >> PERSISTENT_WINDOW_SHIFT)
}

impl BlockHandleStorage {
    fn handle_for_indexed(&self, id: BlockId) -> Result<BlockHandle> {
        self.load_handle(&id)?.ok_or_else(|| {
            StorageError::Inconsistent(format!(
                "key block {id} is indexed but its handle rows are missing"
            ))
        })
    }

    /// Checks an index row: it must hold the mc block with its own seqno.
    fn checked_entry(row: regolith_kv::Result<(SeqnoKey, StoredBlockId)>) -> Result<BlockId> {
        let (seqno, StoredBlockId(id)) = row?;
        if id.seqno != seqno.0 || !id.is_masterchain() {
            return Err(StorageError::corruption(
                "key block index",
                format!("entry {} holds {id}", seqno.0),
            ));
        }
        Ok(id)
    }

    /// The key block with exactly this seqno.
    pub fn load_key_block_handle(&self, seqno: u32) -> Result<Option<BlockHandle>> {
        match self.db.get::<KeyBlocks>(&SeqnoKey(seqno))? {
            Some(StoredBlockId(id)) => self.handle_for_indexed(id).map(Some),
            None => Ok(None),
        }
    }

    fn find_prev_key_block_id(&self, seqno: u32) -> Result<Option<BlockId>> {
        if seqno == 0 {
            return Ok(None);
        }
        self.db
            .iter_rev::<KeyBlocks>(KeyRange::until(&SeqnoKey(seqno)))
            .next()
            .map(Self::checked_entry)
            .transpose()
    }

    /// The last key block.
    pub fn find_last_key_block(&self) -> Result<Option<BlockHandle>> {
        let last = self.db.iter_rev::<KeyBlocks>(KeyRange::all()).next();
        match last.map(Self::checked_entry).transpose()? {
            Some(id) => self.handle_for_indexed(id).map(Some),
            None => Ok(None),
        }
    }

    /// The key block with the greatest seqno strictly below `seqno`.
    pub fn find_prev_key_block(&self, seqno: u32) -> Result<Option<BlockHandle>> {
        match self.find_prev_key_block_id(seqno)? {
            Some(id) => self.handle_for_indexed(id).map(Some),
            None => Ok(None),
        }
    }

    /// Whether the key block `seqno` with time `gen_utime` is persistent: its 2^17 s window differs from that
    /// of the key block before it (the zerostate is the first key block), or every key block is with
    /// `each_key_block_is_persistent`. The oldest key block is never persistent.
    pub fn is_persistent_key_block_at(&self, seqno: u32, gen_utime: u32) -> Result<bool> {
        if self.each_key_block_is_persistent {
            return Ok(true);
        }
        Ok(self
            .find_prev_key_block(seqno)?
            .is_some_and(|prev| is_persistent_key_block(gen_utime, prev.gen_utime())))
    }

    /// The persistent key block strictly below `seqno` (the oldest key block is never returned).
    pub fn find_prev_persistent_key_block(&self, seqno: u32) -> Result<Option<BlockHandle>> {
        let Some(mut current) = self.find_prev_key_block(seqno)? else {
            return Ok(None);
        };
        loop {
            let Some(prev) = self.find_prev_key_block(current.id().seqno)? else {
                return Ok(None);
            };
            if self.each_key_block_is_persistent
                || is_persistent_key_block(current.gen_utime(), prev.gen_utime())
            {
                return Ok(Some(current));
            }
            current = prev;
        }
    }

    /// Key-block ids in the given direction; DB errors are surfaced as items. No handles are loaded.
    pub fn key_blocks_iter(
        &self,
        direction: KeyBlocksDirection,
    ) -> impl Iterator<Item = Result<BlockId>> + '_ {
        let rows = match direction {
            KeyBlocksDirection::ForwardFrom(s) => {
                self.db.iter::<KeyBlocks>(KeyRange::from(&SeqnoKey(s)))
            }
            KeyBlocksDirection::Backward => self.db.iter_rev::<KeyBlocks>(KeyRange::all()),
        };
        let mut done = false;
        rows.map(Self::checked_entry).take_while(move |item| {
            // An error is the last item.
            let take = !done;
            done = item.is_err();
            take
        })
    }
}
