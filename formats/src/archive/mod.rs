//! The archive format: a 4-byte `archive.prefix` then entries of {92-byte `archive.entryHeader`, data}.
//!
//! Archives travel zstd-compressed; [`ArchiveReader`] reads the decompressed stream (optionally decoding zstd
//! itself) and verifies every header, naming the byte offset of any error. [`ArchiveWriter`] produces the
//! decompressed bytes exactly as the reference does for the same entries in the same order.

mod index;
mod reader;
mod verifier;
mod writer;

pub use index::{ArchiveIndex, ArchiveLimits, IndexedEntry};
pub use reader::{ArchiveEntry, ArchiveError, ArchiveErrorKind, ArchiveReader};
#[cfg(feature = "test-utils")]
pub use verifier::bytes_framed;
pub use verifier::ArchiveVerifier;
pub use writer::ArchiveWriter;

/// TL id of `archive.prefix` (written LE: `65 8F 14 29`).
pub const ARCHIVE_PREFIX_ID: u32 = 0x2914_8f65;
/// The first four bytes of every decompressed archive.
pub const ARCHIVE_PREFIX: [u8; 4] = ARCHIVE_PREFIX_ID.to_le_bytes();
/// TL id of `archive.entryHeader`.
pub const ENTRY_HEADER_ID: u32 = 0x957f_bfac;
/// Size of an entry header.
pub const ENTRY_HEADER_LEN: usize = 92;

/// Kind of an archive entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ArchiveEntryType {
    /// Block BOC.
    Block,
    /// Block proof BOC.
    Proof,
    /// TL `block.queueDiff`.
    QueueDiff,
}

impl ArchiveEntryType {
    /// All types in archive order.
    pub const ALL: [ArchiveEntryType; 3] = [Self::Block, Self::Proof, Self::QueueDiff];

    /// The TL id written in entry headers.
    pub const fn tl_id(self) -> u32 {
        match self {
            Self::Block => 0x9fc3_268a,
            Self::Proof => 0x07da_0d39,
            Self::QueueDiff => 0xe460_a58f,
        }
    }

    /// Looks a type up by its TL id.
    pub fn from_tl_id(id: u32) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.tl_id() == id)
    }

    /// The type byte used in storage keys (Block 0, Proof 1, QueueDiff 2).
    pub const fn as_byte(self) -> u8 {
        match self {
            Self::Block => 0,
            Self::Proof => 1,
            Self::QueueDiff => 2,
        }
    }

    /// Inverse of [`Self::as_byte`].
    pub fn from_byte(b: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_byte() == b)
    }

    /// Lower-case name.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Block => "block",
            Self::Proof => "proof",
            Self::QueueDiff => "queue diff",
        }
    }
}

impl std::fmt::Display for ArchiveEntryType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Encodes an entry header for `id`, `ty` and a payload of `data_len` bytes.
pub fn encode_entry_header(
    id: &crate::BlockId,
    ty: ArchiveEntryType,
    data_len: u32,
) -> [u8; ENTRY_HEADER_LEN] {
    let mut out = [0u8; ENTRY_HEADER_LEN];
    out[0..4].copy_from_slice(&ENTRY_HEADER_ID.to_le_bytes());
    out[4..84].copy_from_slice(&crate::encode_block_id(id));
    out[84..88].copy_from_slice(&ty.tl_id().to_le_bytes());
    out[88..92].copy_from_slice(&data_len.to_le_bytes());
    out
}

#[cfg(test)]
mod tests;
