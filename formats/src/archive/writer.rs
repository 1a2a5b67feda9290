//! Archive writer: the decompressed byte stream, identical to the reference for the same entries.

use std::io::Write;

use super::{encode_entry_header, ArchiveEntryType, ARCHIVE_PREFIX};
use crate::BlockId;

/// Writes an archive (prefix, then entries) into any writer; wrap the writer in a zstd encoder to compress.
pub struct ArchiveWriter<W> {
    inner: W,
    written: u64,
}

impl<W: Write> ArchiveWriter<W> {
    /// Writes the archive prefix and returns the writer.
    pub fn new(mut inner: W) -> std::io::Result<Self> {
        inner.write_all(&ARCHIVE_PREFIX)?;
        Ok(Self { inner, written: 4 })
    }

    /// Appends one entry. Payloads over 4 GiB cannot be represented and are rejected.
    pub fn write_entry(
        &mut self,
        block_id: &BlockId,
        ty: ArchiveEntryType,
        data: &[u8],
    ) -> std::io::Result<()> {
        let len = u32::try_from(data.len()).map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{ty} of block {block_id} is too large for an archive entry"),
            )
        })?;
        self.inner
            .write_all(&encode_entry_header(block_id, ty, len))?;
        self.inner.write_all(data)?;
        self.written += super::ENTRY_HEADER_LEN as u64 + data.len() as u64;
        Ok(())
    }

    /// Decompressed bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Returns the inner writer.
    pub fn finish(self) -> W {
        self.inner
    }
}
