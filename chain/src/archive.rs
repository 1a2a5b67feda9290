//! Archive files as a node writes them (storage.md §8): an archive id is the seqno of its first mc block, an
//! archive spans at most `mc_blocks_per_archive` mc seqnos, and a key block ends its archive. Inside, the
//! blocks are in apply order (each mc block after its shard blocks), written Block, Proof, QueueDiff pass by
//! pass, zstd-compressed; a file is written to a temp file, synced and renamed.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use regolith_formats::archive::{ArchiveEntryType, ArchiveReader, ArchiveWriter};
use tycho_types::models::BlockId;

use crate::error::{input_err, io_err, read_err, ChainError};

/// zstd level of the archives (the node's).
const ARCHIVE_ZSTD_LEVEL: i32 = 3;

/// One block's parts, as an archive holds them.
#[derive(Clone, PartialEq, Eq)]
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

impl std::fmt::Debug for ArchivedBlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArchivedBlock")
            .field("id", &self.id)
            .field("data_len", &self.data.len())
            .field("proof_len", &self.proof.len())
            .field("queue_diff_len", &self.queue_diff.len())
            .finish()
    }
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

/// Reads one archive file back ([`write_archive`]'s inverse): its blocks in the order their first entries
/// come (the apply order of a written archive), each with its block, proof and queue diff. An entry given
/// twice or a block without one of its three parts is an error.
pub fn read_archive(path: &Path) -> Result<Vec<ArchivedBlock>, ChainError> {
    let file = std::fs::File::open(path).map_err(read_err(path))?;
    let reader = ArchiveReader::new_compressed(file).map_err(read_err(path))?;
    let mut order = Vec::new();
    let mut parts: HashMap<BlockId, [Option<Vec<u8>>; 3]> = HashMap::new();
    for entry in reader {
        let entry = entry.map_err(|e| input_err(path, e))?;
        let slot = parts.entry(entry.block_id).or_insert_with(|| {
            order.push(entry.block_id);
            Default::default()
        });
        let part = &mut slot[usize::from(entry.ty.as_byte())];
        if part.is_some() {
            return Err(input_err(
                path,
                format!(
                    "the {} of block {} is given twice",
                    entry.ty, entry.block_id
                ),
            ));
        }
        *part = Some(entry.data);
    }
    order
        .into_iter()
        .map(|id| {
            let [data, proof, queue_diff] = parts.remove(&id).unwrap_or_default();
            let missing = |ty: ArchiveEntryType| input_err(path, format!("block {id} has no {ty}"));
            Ok(ArchivedBlock {
                id,
                data: data.ok_or_else(|| missing(ArchiveEntryType::Block))?,
                proof: proof.ok_or_else(|| missing(ArchiveEntryType::Proof))?,
                queue_diff: queue_diff.ok_or_else(|| missing(ArchiveEntryType::QueueDiff))?,
            })
        })
        .collect()
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

#[cfg(test)]
mod tests {
    use tycho_types::models::ShardIdent;
    use tycho_types::prelude::HashBytes;

    use super::*;

    fn block(seqno: u32) -> ArchivedBlock {
        ArchivedBlock {
            id: BlockId {
                shard: ShardIdent::MASTERCHAIN,
                seqno,
                root_hash: HashBytes([seqno as u8; 32]),
                file_hash: HashBytes([!(seqno as u8); 32]),
            },
            data: vec![1, seqno as u8],
            proof: vec![2, seqno as u8],
            queue_diff: vec![3, seqno as u8],
        }
    }

    /// Writes the given entries, in order, as a compressed archive at `path`.
    fn write_entries(path: &Path, entries: &[(BlockId, ArchiveEntryType)]) {
        let file = std::fs::File::create(path).unwrap();
        let encoder = zstd::stream::write::Encoder::new(file, 3).unwrap();
        let mut writer = ArchiveWriter::new(encoder).unwrap();
        for (id, ty) in entries {
            writer.write_entry(id, *ty, b"x").unwrap();
        }
        writer.finish().finish().unwrap();
    }

    #[test]
    fn an_archive_reads_back_as_written_and_a_missing_or_repeated_part_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0000000001.archive");
        let blocks = vec![block(1), block(2), block(3)];
        write_archive(&path, &blocks).unwrap();
        assert_eq!(read_archive(&path).unwrap(), blocks);

        let (one, two) = (block(1).id, block(2).id);
        let missing = [
            (one, ArchiveEntryType::Block),
            (two, ArchiveEntryType::Block),
            (one, ArchiveEntryType::Proof),
            (one, ArchiveEntryType::QueueDiff),
            (two, ArchiveEntryType::QueueDiff),
        ];
        write_entries(&path, &missing);
        match read_archive(&path) {
            Err(ChainError::Input { reason, .. }) => {
                assert_eq!(reason, format!("block {two} has no proof"));
            }
            other => panic!("{other:?}"),
        }
        let repeated = [
            (one, ArchiveEntryType::Block),
            (one, ArchiveEntryType::Proof),
            (one, ArchiveEntryType::Proof),
        ];
        write_entries(&path, &repeated);
        match read_archive(&path) {
            Err(ChainError::Input { reason, .. }) => {
                assert_eq!(reason, format!("the proof of block {one} is given twice"));
            }
            other => panic!("{other:?}"),
        }
        std::fs::write(&path, b"not zstd").unwrap();
        assert!(matches!(
            read_archive(&path),
            Err(ChainError::Input { .. } | ChainError::Read { .. })
        ));
    }
}
