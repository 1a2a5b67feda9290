//! Data-dir layout migrations, run when storage opens, before the startup check or anything else reads the
//! tables.
//!
//! 0.1 → 0.2: a `block_handles` value gains the rest of the block's id (12-byte meta → meta ‖ workchain,
//! prefix, seqno ‖ file hash, see [`crate::tables::StoredHandle`]), so that a handle load reads one row
//! instead of two. Each run of rows is
//! one WriteBatch and the new version is written after the last one: a crash in between leaves a 0.1 data dir,
//! partly migrated, whose next open goes on (a migrated row is skipped). Until then a 0.1 row still loads,
//! through `block_ids`, so a read-only open of a 0.1 data dir works without migrating it.

use std::time::Instant;

use regolith_kv::Batch;

use crate::db::{handle_row, CoreDb};
use crate::error::Result;
use crate::tables::{
    BlockHandles, BlockIds, HandleIdentity, KeyRange, StoredBlockKey, StoredHandle, StoredHash,
};

/// Rows per WriteBatch.
const BATCH_ROWS: usize = 10_000;
/// A progress line every this many blocks.
const PROGRESS_ROWS: u64 = 200_000;

/// What a migration did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct MigrationStats {
    /// Blocks looked at (rows of `block_ids`).
    pub blocks: u64,
    /// Handle rows rewritten.
    pub migrated: u64,
}

/// Brings a data dir of layout `from` (major.minor `[0, 1]`) to the current one.
pub(crate) fn migrate(db: &CoreDb, from: [u8; 3]) -> Result<MigrationStats> {
    let started = Instant::now();
    tracing::info!(
        from = %format_args!("{}.{}.{}", from[0], from[1], from[2]),
        "migrating the data dir: block handles carry their whole id"
    );
    let stats = handles_with_file_hash(db)?;
    tracing::info!(
        blocks = stats.blocks,
        migrated = stats.migrated,
        elapsed = ?started.elapsed(),
        "data dir migrated"
    );
    Ok(stats)
}

/// 0.1 → 0.2: every handle row without the rest of its id gets it from its `block_ids` row. A block id without a
/// handle row is left for the startup check to report.
fn handles_with_file_hash(db: &CoreDb) -> Result<MigrationStats> {
    let mut stats = MigrationStats::default();
    let mut batch = Batch::new();
    let mut in_batch = 0;
    for row in db.iter::<BlockIds>(KeyRange::all()) {
        let (StoredBlockKey(key), StoredHash(file_hash)) = row?;
        stats.blocks += 1;
        if stats.blocks.is_multiple_of(PROGRESS_ROWS) {
            tracing::info!(
                blocks = stats.blocks,
                migrated = stats.migrated,
                "migrating block handles"
            );
        }
        let Some(handle) = handle_row(db, &key)? else {
            continue;
        };
        if handle.id.is_some() {
            continue;
        }
        db.batch_put::<BlockHandles>(
            &mut batch,
            &StoredHash(key.root_hash()),
            &StoredHandle {
                meta: handle.meta,
                id: Some(HandleIdentity::from_key(&key, file_hash)),
            },
        );
        stats.migrated += 1;
        in_batch += 1;
        if in_batch >= BATCH_ROWS {
            db.write(std::mem::take(&mut batch), "migrating block handles")?;
            in_batch = 0;
        }
    }
    if in_batch > 0 {
        db.write(batch, "migrating block handles")?;
    }
    Ok(stats)
}
