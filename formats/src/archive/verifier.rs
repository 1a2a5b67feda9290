//! The streaming archive verifier (rpc.md §7.6): a push state machine fed the decompressed archive in any
//! split. It checks the 4-byte prefix (which may arrive in pieces), every 92-byte entry header (magic, block
//! id with a valid shard, known type) and skips `data_len` bytes of data. A corrupt archive fails as soon as
//! the bad bytes arrive; [`ArchiveVerifier::finish`] requires the stream to end at an entry boundary.
//! Hashes are not checked here.

use super::index::{ArchiveIndex, ArchiveLimits, IndexedEntry};
use super::reader::parse_entry_header;
use super::{ArchiveError, ArchiveErrorKind, ARCHIVE_PREFIX, ENTRY_HEADER_LEN};
use crate::BlockId;

/// Decompressed archive bytes this process has framed, for tests that count framing passes.
#[cfg(feature = "test-utils")]
static BYTES_FRAMED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many decompressed archive bytes every [`ArchiveVerifier`] of this process has been fed: a test
/// counts that a downloaded archive is framed once.
#[cfg(feature = "test-utils")]
pub fn bytes_framed() -> u64 {
    BYTES_FRAMED.load(std::sync::atomic::Ordering::Relaxed)
}

#[derive(Debug, Clone, Copy)]
enum State {
    Prefix { have: usize },
    Header { have: usize },
    Data { left: u64, block_id: BlockId },
    Failed,
}

/// Verifies an archive as it streams by.
#[derive(Debug)]
pub struct ArchiveVerifier {
    state: State,
    buf: [u8; ENTRY_HEADER_LEN],
    /// Offset of the next byte of the decompressed stream.
    offset: u64,
    /// Offset of the current header.
    header_offset: u64,
    entries: u64,
    limits: ArchiveLimits,
    /// The index being built, when asked for.
    index: Option<ArchiveIndex>,
}

impl Default for ArchiveVerifier {
    fn default() -> Self {
        Self::new()
    }
}

impl ArchiveVerifier {
    /// A verifier at the start of a stream.
    pub fn new() -> Self {
        Self::with_limits(ArchiveLimits::UNBOUNDED)
    }

    /// A verifier that also refuses entries and entry counts beyond `limits`.
    pub fn with_limits(limits: ArchiveLimits) -> Self {
        Self {
            state: State::Prefix { have: 0 },
            buf: [0; ENTRY_HEADER_LEN],
            offset: 0,
            header_offset: 0,
            entries: 0,
            limits,
            index: None,
        }
    }

    /// A verifier within `limits` that indexes the entries as they go by (a second entry of one type of a
    /// block is refused); [`Self::finish_index`] returns the index.
    pub fn indexing(limits: ArchiveLimits) -> Self {
        Self {
            index: Some(ArchiveIndex::default()),
            ..Self::with_limits(limits)
        }
    }

    /// Entries whose header has been checked.
    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// Bytes seen.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    fn fail(
        &mut self,
        offset: u64,
        block_id: Option<BlockId>,
        kind: ArchiveErrorKind,
    ) -> Box<ArchiveError> {
        self.state = State::Failed;
        Box::new(ArchiveError {
            offset,
            block_id,
            kind,
        })
    }

    /// Feeds the next bytes of the decompressed stream.
    pub fn write(&mut self, mut bytes: &[u8]) -> Result<(), Box<ArchiveError>> {
        #[cfg(feature = "test-utils")]
        BYTES_FRAMED.fetch_add(bytes.len() as u64, std::sync::atomic::Ordering::Relaxed);
        while !bytes.is_empty() {
            match self.state {
                State::Failed => {
                    return Err(self.fail(
                        self.offset,
                        None,
                        ArchiveErrorKind::Io(std::io::Error::other(
                            "the archive already failed verification",
                        )),
                    ))
                }
                State::Prefix { have } => {
                    let n = (4 - have).min(bytes.len());
                    self.buf[have..have + n].copy_from_slice(&bytes[..n]);
                    bytes = &bytes[n..];
                    self.offset += n as u64;
                    let have = have + n;
                    if self.buf[..have] != ARCHIVE_PREFIX[..have] {
                        let mut prefix = [0u8; 4];
                        prefix[..have].copy_from_slice(&self.buf[..have]);
                        return Err(self.fail(0, None, ArchiveErrorKind::BadPrefix(prefix)));
                    }
                    self.state = if have == 4 {
                        self.header_offset = self.offset;
                        State::Header { have: 0 }
                    } else {
                        State::Prefix { have }
                    };
                }
                State::Header { have } => {
                    let n = (ENTRY_HEADER_LEN - have).min(bytes.len());
                    self.buf[have..have + n].copy_from_slice(&bytes[..n]);
                    bytes = &bytes[n..];
                    self.offset += n as u64;
                    let have = have + n;
                    if have < ENTRY_HEADER_LEN {
                        self.state = State::Header { have };
                        continue;
                    }
                    match parse_entry_header(&self.buf) {
                        Ok((block_id, ty, data_len)) => {
                            let at = self.header_offset;
                            if data_len > self.limits.max_entry_len {
                                let max = self.limits.max_entry_len;
                                return Err(self.fail(
                                    at,
                                    Some(block_id),
                                    ArchiveErrorKind::EntryTooLarge {
                                        block_id,
                                        ty,
                                        len: data_len,
                                        max,
                                    },
                                ));
                            }
                            if self.entries >= self.limits.max_entries {
                                let max = self.limits.max_entries;
                                return Err(self.fail(
                                    at,
                                    Some(block_id),
                                    ArchiveErrorKind::TooManyEntries(max),
                                ));
                            }
                            if let Some(index) = &mut self.index {
                                let entry = IndexedEntry {
                                    block_id,
                                    ty,
                                    header_offset: at,
                                    len: data_len,
                                };
                                if !index.push(entry) {
                                    return Err(self.fail(
                                        at,
                                        Some(block_id),
                                        ArchiveErrorKind::DuplicateEntry { block_id, ty },
                                    ));
                                }
                            }
                            self.entries += 1;
                            self.state = State::Data {
                                left: u64::from(data_len),
                                block_id,
                            };
                        }
                        Err(e) => {
                            let (block_id, kind) = *e;
                            return Err(self.fail(self.header_offset, block_id, kind));
                        }
                    }
                    if let State::Data { left: 0, .. } = self.state {
                        self.header_offset = self.offset;
                        self.state = State::Header { have: 0 };
                    }
                }
                State::Data { left, block_id } => {
                    let n = left.min(bytes.len() as u64);
                    bytes = &bytes[n as usize..];
                    self.offset += n;
                    let left = left - n;
                    self.state = if left == 0 {
                        self.header_offset = self.offset;
                        State::Header { have: 0 }
                    } else {
                        State::Data { left, block_id }
                    };
                }
            }
        }
        Ok(())
    }

    /// The stream ended: it must end at an entry boundary, after the prefix. Returns the index of an
    /// indexing verifier (an empty one otherwise).
    pub fn finish_index(mut self) -> Result<ArchiveIndex, Box<ArchiveError>> {
        let mut index = self.index.take().unwrap_or_default();
        index.set_decompressed_len(self.offset);
        self.finish().map(|_| index)
    }

    /// The stream ended, possibly cut short or after an error: the index of the entries whose data lies
    /// whole within the first `kept` bytes of the stream (what reached a spill file), and the error that ends
    /// the stream, if it does not end cleanly.
    pub fn finish_partial(mut self, kept: u64) -> (ArchiveIndex, Option<Box<ArchiveError>>) {
        let mut index = self.index.take().unwrap_or_default();
        index.retain_within(kept.min(self.offset));
        (index, self.finish().err())
    }

    /// The stream ended: it must end at an entry boundary, after the prefix.
    pub fn finish(mut self) -> Result<u64, Box<ArchiveError>> {
        match self.state {
            State::Header { have: 0 } => Ok(self.entries),
            State::Prefix { have } => {
                let mut prefix = [0u8; 4];
                prefix[..have].copy_from_slice(&self.buf[..have]);
                Err(self.fail(0, None, ArchiveErrorKind::BadPrefix(prefix)))
            }
            State::Header { have } => {
                let at = self.header_offset;
                Err(self.fail(at, None, ArchiveErrorKind::TruncatedHeader(have)))
            }
            State::Data { left, block_id } => {
                let at = self.header_offset;
                let ty = super::ArchiveEntryType::from_tl_id(u32::from_le_bytes([
                    self.buf[84],
                    self.buf[85],
                    self.buf[86],
                    self.buf[87],
                ]))
                .unwrap_or(super::ArchiveEntryType::Block);
                let expected =
                    u32::from_le_bytes([self.buf[88], self.buf[89], self.buf[90], self.buf[91]]);
                Err(self.fail(
                    at,
                    Some(block_id),
                    ArchiveErrorKind::TruncatedData {
                        block_id,
                        ty,
                        read: u64::from(expected) - left,
                        expected,
                    },
                ))
            }
            State::Failed => Err(self.fail(
                self.offset,
                None,
                ArchiveErrorKind::Io(std::io::Error::other(
                    "the archive already failed verification",
                )),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::{ArchiveEntryType, ArchiveWriter};
    use crate::ShardIdent;

    fn archive() -> Vec<u8> {
        let mut w = ArchiveWriter::new(Vec::new()).unwrap();
        for seqno in 1..=3u32 {
            let id = BlockId {
                shard: ShardIdent::MASTERCHAIN,
                seqno,
                root_hash: crate::HashBytes([seqno as u8; 32]),
                file_hash: crate::HashBytes([9; 32]),
            };
            for ty in ArchiveEntryType::ALL {
                w.write_entry(&id, ty, &vec![seqno as u8; seqno as usize * 7])
                    .unwrap();
            }
        }
        w.finish()
    }

    #[test]
    fn any_split_of_a_valid_archive_passes() {
        let bytes = archive();
        for split in [1usize, 2, 3, 5, 91, 92, 93, 1000] {
            let mut v = ArchiveVerifier::new();
            for piece in bytes.chunks(split) {
                v.write(piece).unwrap();
            }
            assert_eq!(v.finish().unwrap(), 9, "split {split}");
        }
        // only the prefix: an empty archive
        let mut v = ArchiveVerifier::new();
        v.write(&ARCHIVE_PREFIX).unwrap();
        assert_eq!(v.finish().unwrap(), 0);
    }

    #[test]
    fn corruption_fails_as_soon_as_it_arrives() {
        let bytes = archive();
        // a bad prefix fails at its first byte
        let mut v = ArchiveVerifier::new();
        assert!(v.write(&[0x00]).is_err());
        // a bad header magic fails when the header is complete, before the rest arrives
        let mut bad = bytes.clone();
        bad[4] ^= 0xff;
        let mut v = ArchiveVerifier::new();
        v.write(&bad[..4 + 91]).unwrap();
        let err = v.write(&bad[95..96]).unwrap_err();
        assert_eq!(err.offset, 4);
        // an unknown type names the block
        let mut bad = bytes.clone();
        bad[4 + 84] ^= 0x01;
        let err = {
            let mut v = ArchiveVerifier::new();
            v.write(&bad).unwrap_err()
        };
        assert!(err.block_id.is_some());
        // an invalid shard in the block id
        let mut bad = bytes.clone();
        bad[4 + 4 + 4..4 + 4 + 12].copy_from_slice(&0u64.to_le_bytes());
        assert!(ArchiveVerifier::new().write(&bad).is_err());
        // truncation: inside a header and inside data
        for cut in [bytes.len() - 1, 4 + 50] {
            let mut v = ArchiveVerifier::new();
            v.write(&bytes[..cut]).unwrap();
            assert!(v.finish().is_err(), "cut at {cut}");
        }
        let mut v = ArchiveVerifier::new();
        v.write(&ARCHIVE_PREFIX[..2]).unwrap();
        assert!(v.finish().is_err(), "a partial prefix");
    }
}
