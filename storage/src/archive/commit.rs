//! Archive commit (storage.md §8.3): stream the blocks of an archive into `<id:010>.archive` and record it.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use regolith_formats::archive::{ArchiveEntryType, ArchiveWriter};
use regolith_formats::{decode_block_id, BlockId, BlockKey, BLOCK_ID_LEN};
use regolith_kv::Batch;

use super::{archive_path, event_key, EVENT_COMMITTED};
use crate::block_components::decompress;
use crate::block_meta::BlockFlags;
use crate::db::CoreDb;
use crate::error::{Result, StorageError};
use crate::tables::{
    ArchiveBlockIds, ArchiveEvents, BlockComponents, BlockHandles, ComponentKey, RawBytes,
    SeqnoKey, StoredHash,
};

/// Path of the temp file of an archive being written.
pub(crate) fn tmp_path(dir: &Path, id: u32) -> PathBuf {
    dir.join(format!("{id:010}.archive.tmp"))
}

pub(crate) fn fsync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)
        .and_then(|f| f.sync_all())
        .map_err(StorageError::io(format!(
            "syncing directory {}",
            dir.display()
        )))
}

/// Loads the id list of an archive being built.
pub(crate) fn load_block_ids(db: &CoreDb, id: u32) -> Result<Vec<BlockId>> {
    let raw = db
        .get::<ArchiveBlockIds>(&SeqnoKey(id))?
        .ok_or(StorageError::ArchiveNotFound(id))?;
    if raw.0.is_empty() {
        return Err(StorageError::corruption(
            format!("block list of archive {id}"),
            "it is empty",
        ));
    }
    if raw.0.len() % BLOCK_ID_LEN != 0 {
        return Err(StorageError::corruption(
            format!("block list of archive {id}"),
            format!("length {} is not a multiple of {BLOCK_ID_LEN}", raw.0.len()),
        ));
    }
    raw.0
        .chunks_exact(BLOCK_ID_LEN)
        .map(|c| {
            decode_block_id(c)
                .map_err(|e| StorageError::corruption(format!("block list of archive {id}"), e))
        })
        .collect()
}

fn component(db: &CoreDb, id: &BlockId, ty: ArchiveEntryType) -> Result<Vec<u8>> {
    let frame = db
        .get_pinned::<BlockComponents>(&ComponentKey(BlockKey::of(id), ty))?
        .ok_or_else(|| {
            StorageError::Inconsistent(format!("block {id} has no stored {ty} for its archive"))
        })?;
    decompress(id, ty, &frame)
}

/// Writes the archive file and records the commit. Skips archives already committed with their file present.
/// `source` is a compressed archive file offered for this id: it becomes the archive file when its stream
/// decompresses to exactly the bytes §8.3 would write (see [`adopt_source`]); otherwise the archive is built.
pub(crate) fn commit_archive(
    db: &CoreDb,
    dir: &Path,
    id: u32,
    zstd_level: i32,
    source: Option<&Path>,
) -> Result<u64> {
    let path = archive_path(dir, id);
    if db.contains::<ArchiveEvents>(&event_key(id, EVENT_COMMITTED))? && path.exists() {
        return Ok(0);
    }
    let block_ids = load_block_ids(db, id)?;

    // Every block must have all parts before anything is written.
    for block_id in &block_ids {
        let flags = db
            .get::<BlockHandles>(&StoredHash(block_id.root_hash))?
            .map(|h| h.meta.flags)
            .unwrap_or_default();
        if !flags.contains(BlockFlags::HAS_ALL_BLOCK_PARTS) {
            return Err(StorageError::MissingBlockParts {
                id: *block_id,
                has_data: flags.contains(BlockFlags::HAS_DATA),
                has_proof: flags.contains(BlockFlags::HAS_PROOF),
                has_queue_diff: flags.contains(BlockFlags::HAS_QUEUE_DIFF),
            });
        }
    }

    let tmp = tmp_path(dir, id);
    let io_err = |what: &str| StorageError::io(format!("{what} {}", tmp.display()));
    let adopted = match source {
        Some(source) => adopt_source(db, id, &block_ids, source, &tmp)?,
        None => None,
    };
    let decompressed = match adopted {
        Some(decompressed) => decompressed,
        None => {
            let file = std::fs::File::create(&tmp).map_err(io_err("creating"))?;
            let mut encoder =
                zstd::stream::write::Encoder::new(std::io::BufWriter::new(file), zstd_level)
                    .map_err(io_err("starting zstd for"))?;
            let workers =
                (std::thread::available_parallelism().map_or(1, std::num::NonZero::get) / 4).max(1);
            if workers > 1 {
                // Multithreading is an optimisation; a build without it still writes a valid archive.
                let _ = encoder.multithread(workers as u32);
            }
            let mut writer = ArchiveWriter::new(encoder).map_err(io_err("writing"))?;
            write_entries(db, &block_ids, &mut writer)?.map_err(io_err("writing"))?;
            let decompressed = writer.written();
            let buffered = writer
                .finish()
                .finish()
                .map_err(io_err("finishing zstd for"))?;
            let file = buffered.into_inner().map_err(|e| StorageError::Io {
                context: format!("flushing {}", tmp.display()),
                source: e.into_error(),
            })?;
            file.sync_all().map_err(io_err("syncing"))?;
            decompressed
        }
    };

    db.fail_points
        .archive_commit_after_tmp
        .check("archive commit after the temp file")?;

    std::fs::rename(&tmp, &path).map_err(StorageError::io(format!(
        "renaming {} to {}",
        tmp.display(),
        path.display()
    )))?;
    fsync_dir(dir)?;

    let mut batch = Batch::new();
    db.batch_put::<ArchiveEvents>(
        &mut batch,
        &event_key(id, EVENT_COMMITTED),
        &RawBytes::default(),
    );
    db.batch_delete::<ArchiveBlockIds>(&mut batch, &SeqnoKey(id));
    db.write(batch, format_args!("recording the commit of archive {id}"))?;
    Ok(decompressed)
}

/// Writes the entries of §8.3 step 3 (every type, then every id in list order, a duplicate id once per
/// type) into `writer`. The outer error is the storage's, the inner one the writer's.
fn write_entries<W: Write>(
    db: &CoreDb,
    block_ids: &[BlockId],
    writer: &mut ArchiveWriter<W>,
) -> Result<std::io::Result<()>> {
    for ty in ArchiveEntryType::ALL {
        let mut written = HashSet::with_capacity(block_ids.len());
        for block_id in block_ids {
            if !written.insert(*block_id) {
                continue;
            }
            let data = component(db, block_id, ty)?;
            if let Err(e) = writer.write_entry(block_id, ty, &data) {
                return Ok(Err(e));
            }
        }
    }
    Ok(Ok(()))
}

/// A sink that takes the bytes an archive build would write and checks them against a decompressed stream.
struct Matcher<R> {
    source: R,
    buf: Vec<u8>,
}

impl<R: Read> Write for Matcher<R> {
    fn write(&mut self, expected: &[u8]) -> std::io::Result<usize> {
        self.buf.resize(expected.len(), 0);
        self.source.read_exact(&mut self.buf)?;
        if self.buf != expected {
            return Err(std::io::Error::other("its bytes differ"));
        }
        Ok(expected.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Copies `source` into `tmp` and keeps the copy (synced) when its zstd stream, read by a default streaming
/// decoder, holds exactly the decompressed bytes §8.3 would write for `block_ids`, and its compressed size is
/// at most the decompressed one. The copy is what is checked, so a source changed meanwhile cannot slip
/// through. Returns the decompressed size, or `None` (the reason logged) when the archive is to be built
/// instead, over the copy. A failure to read the stored components is an error.
fn adopt_source(
    db: &CoreDb,
    id: u32,
    block_ids: &[BlockId],
    source: &Path,
    tmp: &Path,
) -> Result<Option<u64>> {
    let refuse = |reason: &dyn std::fmt::Display| {
        tracing::debug!(archive_id = id, source = %source.display(), %reason, "the offered archive file is not adopted");
        Ok(None)
    };
    if let Err(e) = std::fs::copy(source, tmp) {
        return refuse(&format_args!("copying it to {}: {e}", tmp.display()));
    }
    let file = match std::fs::File::open(tmp) {
        Ok(file) => file,
        Err(e) => return refuse(&e),
    };
    let compressed = match file.metadata() {
        Ok(m) => m.len(),
        Err(e) => return refuse(&e),
    };
    let decoder = match zstd::stream::read::Decoder::new(&file) {
        Ok(decoder) => decoder,
        Err(e) => return refuse(&e),
    };
    let mut writer = match ArchiveWriter::new(Matcher {
        source: decoder,
        buf: Vec::new(),
    }) {
        Ok(writer) => writer,
        Err(e) => return refuse(&e),
    };
    if let Err(e) = write_entries(db, block_ids, &mut writer)? {
        return refuse(&e);
    }
    let decompressed = writer.written();
    let mut rest = writer.finish().source;
    match rest.read(&mut [0u8; 1]) {
        Ok(0) => {}
        Ok(_) => return refuse(&"it holds more than the archive's entries"),
        Err(e) => return refuse(&e),
    }
    if compressed > decompressed {
        return refuse(&format_args!(
            "its {compressed} compressed bytes exceed the {decompressed} decompressed ones"
        ));
    }
    if let Err(e) = file.sync_all() {
        return refuse(&format_args!("syncing {}: {e}", tmp.display()));
    }
    metrics::counter!("regolith_archives_adopted_total").increment(1);
    tracing::debug!(archive_id = id, source = %source.display(), "the offered archive file is adopted");
    Ok(Some(decompressed))
}
