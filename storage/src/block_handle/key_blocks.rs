//! The key-block index (`key_blocks`: seqno BE → id) and its lookups (storage.md §5.5).

use regolith_formats::BlockId;

use super::handle::BlockHandle;
use super::storage::BlockHandleStorage;
use crate::db::iter_status;
use crate::error::{Result, StorageError};
use crate::tables::{Codec, KeyBlocks, SeqnoKey};

/// Persistent window: 2^17 seconds.
pub const PERSISTENT_WINDOW_SHIFT: u32 = 17;

/// Direction of a key-block iteration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyBlocksDirection {
    /// Ascending from the first seqno ≥ the given one (inclusive).
    ForwardFrom(u32),
    /// Descending from the last entry.
    Backward,
}

/// Whether a key block with time `t` is persistent relative to the preceding key block with time `p`.
pub fn is_persistent_key_block(t: u32, p: u32) -> bool {
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

    fn decode_entry(key: &[u8], value: &[u8]) -> Result<BlockId> {
        let seqno = SeqnoKey::decode(key)?;
        let id = BlockId::decode(value)?;
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
            Some(id) => self.handle_for_indexed(id).map(Some),
            None => Ok(None),
        }
    }

    fn find_prev_key_block_id(&self, seqno: u32) -> Result<Option<BlockId>> {
        if seqno == 0 {
            return Ok(None);
        }
        let mut it = self.db.raw().raw_iterator_cf(self.db.cf::<KeyBlocks>());
        it.seek_for_prev(SeqnoKey(seqno - 1).encode());
        if let (Some(k), Some(v)) = (it.key(), it.value()) {
            return Self::decode_entry(k, v).map(Some);
        }
        iter_status(&it, "searching the key block index")?;
        Ok(None)
    }

    /// The last key block.
    pub fn find_last_key_block(&self) -> Result<Option<BlockHandle>> {
        let it = self.db.iter_last::<KeyBlocks>();
        if let (Some(k), Some(v)) = (it.key(), it.value()) {
            let id = Self::decode_entry(k, v)?;
            return self.handle_for_indexed(id).map(Some);
        }
        iter_status(&it, "reading the last key block")?;
        Ok(None)
    }

    /// The key block with the greatest seqno strictly below `seqno`.
    pub fn find_prev_key_block(&self, seqno: u32) -> Result<Option<BlockHandle>> {
        match self.find_prev_key_block_id(seqno)? {
            Some(id) => self.handle_for_indexed(id).map(Some),
            None => Ok(None),
        }
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
        let mut it = self.db.raw().raw_iterator_cf(self.db.cf::<KeyBlocks>());
        match direction {
            KeyBlocksDirection::ForwardFrom(s) => it.seek(SeqnoKey(s).encode()),
            KeyBlocksDirection::Backward => it.seek_to_last(),
        }
        let mut done = false;
        std::iter::from_fn(move || {
            if done {
                return None;
            }
            if let (Some(k), Some(v)) = (it.key(), it.value()) {
                let item = Self::decode_entry(k, v);
                match direction {
                    KeyBlocksDirection::ForwardFrom(_) => it.next(),
                    KeyBlocksDirection::Backward => it.prev(),
                }
                if item.is_err() {
                    done = true;
                }
                return Some(item);
            }
            done = true;
            match iter_status(&it, "iterating the key block index") {
                Ok(()) => None,
                Err(e) => Some(Err(e)),
            }
        })
    }
}
