//! Streaming archive reader.

use std::io::Read;

use super::{ArchiveEntryType, ARCHIVE_PREFIX, ENTRY_HEADER_ID, ENTRY_HEADER_LEN};
use crate::BlockId;

/// One archive entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchiveEntry {
    /// Block the entry belongs to.
    pub block_id: BlockId,
    /// Entry kind.
    pub ty: ArchiveEntryType,
    /// Raw payload.
    pub data: Vec<u8>,
    /// Offset of the entry header in the decompressed stream.
    pub offset: u64,
}

/// What was wrong with an archive.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveErrorKind {
    /// The stream does not start with `archive.prefix`.
    #[error("bad archive prefix {0:02x?}")]
    BadPrefix([u8; 4]),
    /// An entry header has a wrong magic.
    #[error("bad entry header magic 0x{0:08x}")]
    BadHeaderMagic(u32),
    /// An entry header has an unknown entry type.
    #[error("unknown entry type 0x{0:08x}")]
    UnknownEntryType(u32),
    /// An entry header holds an invalid block id.
    #[error("invalid block id in entry header: {0}")]
    BadBlockId(crate::FormatError),
    /// The stream ended inside a header.
    #[error("truncated entry header ({0} of 92 bytes)")]
    TruncatedHeader(usize),
    /// The stream ended inside entry data.
    #[error("truncated {ty} data of block {block_id}: {read} of {expected} bytes")]
    TruncatedData {
        /// Entry block.
        block_id: BlockId,
        /// Entry type.
        ty: ArchiveEntryType,
        /// Bytes present.
        read: u64,
        /// Bytes declared.
        expected: u32,
    },
    /// An entry is larger than the limit the reader was given.
    #[error("the {ty} entry of block {block_id} has {len} bytes, more than the limit of {max}")]
    EntryTooLarge {
        /// Entry block.
        block_id: BlockId,
        /// Entry type.
        ty: ArchiveEntryType,
        /// Bytes declared.
        len: u32,
        /// The limit.
        max: u32,
    },
    /// The archive has more entries than the limit the reader was given.
    #[error("more than {0} entries")]
    TooManyEntries(u64),
    /// A block has two entries of one type.
    #[error("a second {ty} entry of block {block_id}")]
    DuplicateEntry {
        /// Entry block.
        block_id: BlockId,
        /// Entry type.
        ty: ArchiveEntryType,
    },
    /// Reading or decompressing failed.
    #[error("read failed: {0}")]
    Io(#[from] std::io::Error),
}

/// An archive error at a byte offset of the decompressed stream.
#[derive(Debug, thiserror::Error)]
#[error("archive error at offset {offset}: {kind}")]
pub struct ArchiveError {
    /// Offset (decompressed) where the bad element starts.
    pub offset: u64,
    /// Block of the entry being read, when its header was readable.
    pub block_id: Option<BlockId>,
    /// What was wrong.
    #[source]
    pub kind: ArchiveErrorKind,
}

/// A bad entry header: the block id when it was readable, and what was wrong.
pub(crate) type HeaderError = Box<(Option<BlockId>, ArchiveErrorKind)>;

/// Parses a 92-byte entry header: the magic, the block id (a valid shard) and a known type. An error carries the
/// block id when it was readable.
pub(crate) fn parse_entry_header(
    header: &[u8; ENTRY_HEADER_LEN],
) -> Result<(BlockId, ArchiveEntryType, u32), HeaderError> {
    let word = |at: usize| {
        u32::from_le_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]])
    };
    let magic = word(0);
    if magic != ENTRY_HEADER_ID {
        return Err(Box::new((None, ArchiveErrorKind::BadHeaderMagic(magic))));
    }
    let block_id = crate::decode_block_id(&header[4..84])
        .map_err(|e| Box::new((None, ArchiveErrorKind::BadBlockId(e))))?;
    let ty_id = word(84);
    let ty = ArchiveEntryType::from_tl_id(ty_id)
        .ok_or_else(|| Box::new((Some(block_id), ArchiveErrorKind::UnknownEntryType(ty_id))))?;
    Ok((block_id, ty, word(88)))
}

/// Reads entries one by one from a decompressed archive stream.
pub struct ArchiveReader<R> {
    inner: R,
    offset: u64,
    started: bool,
    failed: bool,
}

impl<R: Read> ArchiveReader<R> {
    /// Reads a decompressed archive stream.
    pub fn new(inner: R) -> Self {
        Self {
            inner,
            offset: 0,
            started: false,
            failed: false,
        }
    }

    /// Offset of the next unread byte of the decompressed stream.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    fn err(
        &mut self,
        offset: u64,
        block_id: Option<BlockId>,
        kind: ArchiveErrorKind,
    ) -> Box<ArchiveError> {
        self.failed = true;
        Box::new(ArchiveError {
            offset,
            block_id,
            kind,
        })
    }

    /// Fills `buf` as far as the stream allows; returns how many bytes were read.
    fn read_full(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut filled = 0;
        while filled < buf.len() {
            match self.inner.read(&mut buf[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.offset += filled as u64;
        Ok(filled)
    }

    /// Reads the next entry; `Ok(None)` at a clean end of stream. After an error the reader stays failed.
    pub fn next_entry(&mut self) -> Result<Option<ArchiveEntry>, Box<ArchiveError>> {
        if self.failed {
            return Ok(None);
        }
        if !self.started {
            self.started = true;
            let mut prefix = [0u8; 4];
            let n = self
                .read_full(&mut prefix)
                .map_err(|e| self.err(0, None, e.into()))?;
            if n != 4 || prefix != ARCHIVE_PREFIX {
                return Err(self.err(0, None, ArchiveErrorKind::BadPrefix(prefix)));
            }
        }

        let header_offset = self.offset;
        let mut header = [0u8; ENTRY_HEADER_LEN];
        let n = self
            .read_full(&mut header)
            .map_err(|e| self.err(header_offset, None, e.into()))?;
        if n == 0 {
            return Ok(None);
        }
        if n < ENTRY_HEADER_LEN {
            return Err(self.err(header_offset, None, ArchiveErrorKind::TruncatedHeader(n)));
        }
        let (block_id, ty, data_len) = match parse_entry_header(&header) {
            Ok(parsed) => parsed,
            Err(e) => {
                let (block_id, kind) = *e;
                return Err(self.err(header_offset, block_id, kind));
            }
        };

        // Grow the buffer as data arrives, so a corrupt length cannot allocate gigabytes up front.
        let mut data = Vec::with_capacity((data_len as usize).min(1 << 20));
        let read = match (&mut self.inner)
            .take(u64::from(data_len))
            .read_to_end(&mut data)
        {
            Ok(n) => n as u64,
            Err(e) => return Err(self.err(header_offset, Some(block_id), e.into())),
        };
        self.offset += read;
        if read != u64::from(data_len) {
            return Err(self.err(
                header_offset,
                Some(block_id),
                ArchiveErrorKind::TruncatedData {
                    block_id,
                    ty,
                    read,
                    expected: data_len,
                },
            ));
        }
        Ok(Some(ArchiveEntry {
            block_id,
            ty,
            data,
            offset: header_offset,
        }))
    }
}

impl<R: Read> ArchiveReader<zstd::stream::read::Decoder<'static, std::io::BufReader<R>>> {
    /// Reads a zstd-compressed archive, stream-decoding it (frames without a content size are fine).
    pub fn new_compressed(inner: R) -> std::io::Result<Self> {
        Ok(Self::new(zstd::stream::read::Decoder::new(inner)?))
    }
}

impl<R: Read> Iterator for ArchiveReader<R> {
    type Item = Result<ArchiveEntry, Box<ArchiveError>>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_entry().transpose()
    }
}
