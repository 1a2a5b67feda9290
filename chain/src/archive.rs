//! Archive files as a node writes them (storage.md §8): an archive id is the seqno of its first mc block, an
//! archive spans at most `mc_blocks_per_archive` mc seqnos, and a key block ends its archive. Inside, the
//! blocks are in apply order (each mc block after its shard blocks), written Block, Proof, QueueDiff pass by
//! pass, zstd-compressed; a file is written to a temp file, synced and renamed.

use std::io::Write;
use std::path::{Path, PathBuf};

use regolith_formats::archive::{ArchiveEntryType, ArchiveWriter};
use tycho_types::models::BlockId;

use crate::error::{io_err, ChainError};

/// zstd level of the archives (the node's).
const ARCHIVE_ZSTD_LEVEL: i32 = 3;

/// One block's parts, as an archive holds them.
#[derive(Clone)]
pub struct ArchivedBlock {
    /// The block id.
    pub id: BlockId,
    /// Block BOC.
    pub data: Vec<u8>,
    /// Proof BOC.
    pub proof: Vec<u8>,
    /// TL queue diff.
    pub queue_diff: Vec<u8>,
}

/// Groups blocks into archives and writes each when it is complete.
pub struct ArchiveSplitter {
    dir: PathBuf,
    per_archive: u32,
    current: Option<(u32, Vec<ArchivedBlock>)>,
    /// Written archives: (id, path).
    pub written: Vec<(u32, PathBuf)>,
}

impl ArchiveSplitter {
    /// Writes archives into `dir`.
    pub fn new(dir: &Path, per_archive: u32) -> Result<Self, ChainError> {
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        Ok(Self {
            dir: dir.to_path_buf(),
            per_archive: per_archive.max(1),
            current: None,
            written: Vec::new(),
        })
    }

    /// Adds the blocks of mc block `mc_seqno` (its shard blocks, then itself); a key block closes the archive.
    pub fn push_group(
        &mut self,
        mc_seqno: u32,
        is_key_block: bool,
        blocks: Vec<ArchivedBlock>,
    ) -> Result<(), ChainError> {
        let full = self
            .current
            .as_ref()
            .is_some_and(|(id, _)| mc_seqno - id >= self.per_archive);
        if full {
            self.flush()?;
        }
        let (_, list) = self.current.get_or_insert_with(|| (mc_seqno, Vec::new()));
        list.extend(blocks);
        if is_key_block {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes the open archive, if any.
    pub fn flush(&mut self) -> Result<(), ChainError> {
        let Some((id, blocks)) = self.current.take() else {
            return Ok(());
        };
        let path = self.dir.join(format!("{id:010}.archive"));
        write_archive(&path, &blocks)?;
        self.written.push((id, path));
        Ok(())
    }
}

/// Writes one archive file (temp file, fsync, rename).
pub fn write_archive(path: &Path, blocks: &[ArchivedBlock]) -> Result<(), ChainError> {
    let tmp = path.with_extension("archive.tmp");
    let file = std::fs::File::create(&tmp).map_err(io_err(&tmp))?;
    let encoder =
        zstd::stream::write::Encoder::new(std::io::BufWriter::new(file), ARCHIVE_ZSTD_LEVEL)
            .map_err(io_err(&tmp))?;
    let mut writer = ArchiveWriter::new(encoder).map_err(io_err(&tmp))?;
    for ty in ArchiveEntryType::ALL {
        for block in blocks {
            let data = match ty {
                ArchiveEntryType::Block => &block.data,
                ArchiveEntryType::Proof => &block.proof,
                ArchiveEntryType::QueueDiff => &block.queue_diff,
            };
            writer
                .write_entry(&block.id, ty, data)
                .map_err(io_err(&tmp))?;
        }
    }
    let buffered = writer.finish().finish().map_err(io_err(&tmp))?;
    let file = buffered
        .into_inner()
        .map_err(|e| io_err(&tmp)(e.into_error()))?;
    file.sync_all().map_err(io_err(&tmp))?;
    drop(file);
    std::fs::rename(&tmp, path).map_err(io_err(path))?;
    Ok(())
}

/// Writes `bytes` to `path` through a temp file, fsync and rename; `mode` sets the permissions (unix).
pub fn write_file(path: &Path, bytes: &[u8], mode: Option<u32>) -> Result<(), ChainError> {
    let tmp = path.with_extension("tmp");
    {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        if let Some(mode) = mode {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(mode);
        }
        #[cfg(not(unix))]
        let _ = mode;
        let mut file = options.open(&tmp).map_err(io_err(&tmp))?;
        file.write_all(bytes).map_err(io_err(&tmp))?;
        file.sync_all().map_err(io_err(&tmp))?;
    }
    std::fs::rename(&tmp, path).map_err(io_err(path))?;
    Ok(())
}
