//! The index of an archive: where each entry's data lies in the decompressed stream, built by the streaming
//! verifier as the bytes go by ([`super::ArchiveVerifier::indexing`]), so that entries can be read on demand
//! from a spilled copy of the stream instead of being held in memory.

use std::collections::HashMap;
use std::os::unix::fs::FileExt;

use super::{ArchiveEntryType, ENTRY_HEADER_LEN};
use crate::BlockId;

/// Bounds on what an archive from a peer or a file may make the reader keep or allocate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArchiveLimits {
    /// The largest entry (a block, proof or queue diff) accepted, in bytes.
    pub max_entry_len: u32,
    /// The most entries an archive may have.
    pub max_entries: u64,
}

impl ArchiveLimits {
    /// No bounds beyond the format's own (u32 entry lengths).
    pub const UNBOUNDED: Self = Self {
        max_entry_len: u32::MAX,
        max_entries: u64::MAX,
    };
}

/// One entry of an indexed archive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexedEntry {
    /// The block the entry belongs to.
    pub block_id: BlockId,
    /// The entry kind.
    pub ty: ArchiveEntryType,
    /// Offset of the entry header in the decompressed stream.
    pub header_offset: u64,
    /// Length of the entry data.
    pub len: u32,
}

impl IndexedEntry {
    /// Offset of the entry data in the decompressed stream.
    pub fn data_offset(&self) -> u64 {
        self.header_offset + ENTRY_HEADER_LEN as u64
    }
}

/// Where every entry of an archive lies; each (block, type) at most once.
#[derive(Debug, Clone, Default)]
pub struct ArchiveIndex {
    entries: Vec<IndexedEntry>,
    slots: HashMap<BlockId, [Option<u32>; 3]>,
    decompressed_len: u64,
}

fn slot_of(ty: ArchiveEntryType) -> usize {
    match ty {
        ArchiveEntryType::Block => 0,
        ArchiveEntryType::Proof => 1,
        ArchiveEntryType::QueueDiff => 2,
    }
}

impl ArchiveIndex {
    /// Adds an entry; `false` if the block already has an entry of that type.
    pub(crate) fn push(&mut self, entry: IndexedEntry) -> bool {
        let at = self.entries.len() as u32;
        let slot = &mut self.slots.entry(entry.block_id).or_default()[slot_of(entry.ty)];
        if slot.is_some() {
            return false;
        }
        *slot = Some(at);
        self.entries.push(entry);
        true
    }

    pub(crate) fn set_decompressed_len(&mut self, len: u64) {
        self.decompressed_len = len;
    }

    /// Keeps the entries whose data ends within the first `len` bytes of the stream.
    pub(crate) fn retain_within(&mut self, len: u64) {
        let whole = self
            .entries
            .iter()
            .take_while(|e| e.data_offset() + u64::from(e.len) <= len)
            .count();
        for dropped in self.entries.drain(whole..) {
            if let Some(slots) = self.slots.get_mut(&dropped.block_id) {
                slots[slot_of(dropped.ty)] = None;
                if slots.iter().all(Option::is_none) {
                    self.slots.remove(&dropped.block_id);
                }
            }
        }
        self.decompressed_len = len;
    }

    /// Every entry, in archive order.
    pub fn entries(&self) -> &[IndexedEntry] {
        &self.entries
    }

    /// The blocks that have a block entry, in archive order.
    pub fn blocks(&self) -> impl Iterator<Item = &BlockId> + '_ {
        self.entries
            .iter()
            .filter(|e| e.ty == ArchiveEntryType::Block)
            .map(|e| &e.block_id)
    }

    /// The entry of `ty` of block `id`.
    pub fn get(&self, id: &BlockId, ty: ArchiveEntryType) -> Option<&IndexedEntry> {
        let at = self.slots.get(id)?[slot_of(ty)]?;
        self.entries.get(at as usize)
    }

    /// Whether the archive has any entry of block `id`.
    pub fn contains(&self, id: &BlockId) -> bool {
        self.slots.contains_key(id)
    }

    /// Length of the decompressed stream.
    pub fn decompressed_len(&self) -> u64 {
        self.decompressed_len
    }

    /// Reads an entry's data from a file that holds the decompressed stream.
    pub fn read(&self, file: &std::fs::File, entry: &IndexedEntry) -> std::io::Result<Vec<u8>> {
        let mut data = vec![0u8; entry.len as usize];
        file.read_exact_at(&mut data, entry.data_offset())?;
        Ok(data)
    }
}
