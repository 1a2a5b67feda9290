//! Archive commit (storage.md §8.3): stream the blocks of an archive into `<id:010>.archive` and record it.

use std::collections::HashSet;
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
pub(crate) fn commit_archive(db: &CoreDb, dir: &Path, id: u32, zstd_level: i32) -> Result<u64> {
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
    let file = std::fs::File::create(&tmp).map_err(io_err("creating"))?;
    let mut encoder = zstd::stream::write::Encoder::new(std::io::BufWriter::new(file), zstd_level)
        .map_err(io_err("starting zstd for"))?;
    let workers =
        (std::thread::available_parallelism().map_or(1, std::num::NonZero::get) / 4).max(1);
    if workers > 1 {
        // Multithreading is an optimisation; a build without it still writes a valid archive.
        let _ = encoder.multithread(workers as u32);
    }
    let mut writer = ArchiveWriter::new(encoder).map_err(io_err("writing"))?;
    for ty in ArchiveEntryType::ALL {
        let mut written = HashSet::with_capacity(block_ids.len());
        for block_id in &block_ids {
            if !written.insert(*block_id) {
                continue;
            }
            let data = component(db, block_id, ty)?;
            writer
                .write_entry(block_id, ty, &data)
                .map_err(io_err("writing"))?;
        }
    }
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
    drop(file);

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
