//! The startup consistency check (storage.md §7.7): flags of bits 0–2 recomputed from component presence;
//! id rows without a handle are reported, not deleted (a deviation from §7.7 item 4, issue #18).

use regolith_formats::archive::ArchiveEntryType;
use regolith_kv::Batch;

use crate::block_meta::BlockFlags;
use crate::db::CoreDb;
use crate::error::Result;
use crate::tables::{
    BlockComponents, BlockHandles, BlockIds, KeyRange, StoredBlockKey, StoredHash,
};

const CHECK_BATCH_BLOCKS: usize = 10_000;
/// Dangling id rows logged one by one; the rest are only counted.
const REPORTED_DANGLING_IDS: usize = 10;

/// Counts of the startup check.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ConsistencyStats {
    /// Blocks whose flag claimed a missing component (flag cleared).
    pub orphaned_flags_count: usize,
    /// Blocks with a component but no flag (flag restored).
    pub restored_flags_count: usize,
    /// Id rows without a meta row: blocks whose handle is gone while their id row and possibly components
    /// remain. Reported (logged with the first ids, counted on `/metrics`), never deleted (issue #18).
    pub dangling_ids_count: usize,
    /// Blocks checked.
    pub blocks_checked: usize,
}

fn presence_flag(ty: ArchiveEntryType) -> u32 {
    1 << ty.as_byte()
}

/// Runs the check over the whole database.
/// With `repair` off (read-only opens) the counts are computed and nothing is written.
pub(crate) fn check(db: &CoreDb, repair: bool) -> Result<ConsistencyStats> {
    let mut stats = ConsistencyStats::default();
    let mut components = db.keys::<BlockComponents>(KeyRange::all());
    let mut next_component = components.next().transpose()?;
    let mut batch = Batch::new();
    let mut in_batch = 0;

    for id_key in db.keys::<BlockIds>(KeyRange::all()) {
        let StoredBlockKey(key) = id_key?;
        // Merge-join: advance the component cursor to this block and collect what is present.
        let mut present = 0u32;
        while let Some(ck) = next_component {
            match ck.0.cmp(&key) {
                std::cmp::Ordering::Less => {}
                std::cmp::Ordering::Equal => present |= presence_flag(ck.1),
                std::cmp::Ordering::Greater => break,
            }
            next_component = components.next().transpose()?;
        }
        stats.blocks_checked += 1;

        let meta = crate::db::handle_row(db, &key)?;
        match meta {
            None => {
                stats.dangling_ids_count += 1;
                if stats.dangling_ids_count <= REPORTED_DANGLING_IDS {
                    tracing::error!(
                        block_key = %hex::encode(key.as_bytes()),
                        components = format!("{present:#05b}"),
                        "a block id row has no handle: kept as it is for an operator to look at"
                    );
                }
            }
            Some(mut row) => {
                let stored = row.meta.flags.0 & BlockFlags::HAS_ALL_BLOCK_PARTS.0;
                if stored != present {
                    if stored & !present != 0 {
                        stats.orphaned_flags_count += 1;
                    }
                    if present & !stored != 0 {
                        stats.restored_flags_count += 1;
                    }
                    row.meta.flags = BlockFlags(
                        (row.meta.flags.0 & !BlockFlags::HAS_ALL_BLOCK_PARTS.0) | present,
                    );
                    db.batch_put::<BlockHandles>(&mut batch, &StoredHash(key.root_hash()), &row);
                    in_batch += 1;
                }
            }
        }
        if !repair {
            batch = Batch::new();
            in_batch = 0;
        }
        if in_batch >= CHECK_BATCH_BLOCKS {
            db.write(std::mem::take(&mut batch), "writing startup check repairs")?;
            in_batch = 0;
        }
    }
    if in_batch > 0 {
        db.write(batch, "writing startup check repairs")?;
    }
    if repair && stats.orphaned_flags_count + stats.restored_flags_count > 0 {
        tracing::warn!(
            orphaned = stats.orphaned_flags_count,
            restored = stats.restored_flags_count,
            "startup consistency check repaired block flags"
        );
    }
    if stats.dangling_ids_count > 0 {
        tracing::error!(
            dangling = stats.dangling_ids_count,
            "startup consistency check: block id rows without a handle (kept, not deleted)"
        );
    }
    metrics::gauge!("regolith_storage_dangling_block_ids").set(stats.dangling_ids_count as f64);
    Ok(stats)
}
