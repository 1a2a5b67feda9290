//! Archive recovery at startup (storage.md §8.7): temp files, events, stray files (quarantined, not deleted:
//! issue #18), pending commits.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use regolith_kv::Batch;

use super::{
    archive_events, archive_path, ArchiveShared, EVENT_COMMITTED, EVENT_OVERRIDE_NEXT,
    EVENT_STARTED, EVENT_TO_COMMIT,
};
use crate::error::{Result, StorageError};
use crate::tables::{
    ArchiveBlockIds, ArchiveEventKey, ArchiveEvents, KeyRange, RawBytes, SeqnoKey,
};

/// What archive recovery found and did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ArchiveOpenStats {
    /// Leftover temp files deleted.
    pub tmp_files_removed: usize,
    /// Committed archives whose file was missing (forgotten).
    pub archives_missing: usize,
    /// Archive files without a commit or pending commit, moved into `archives/quarantine/` by this open
    /// (never deleted: they are reported for an operator to look at).
    pub archive_files_quarantined: usize,
    /// Files in `archives/quarantine/` after recovery (also counted by read-only opens).
    pub quarantined_files: usize,
    /// Pending commits finished at startup.
    pub archives_recommitted: usize,
    /// Known archives after recovery.
    pub archive_count: usize,
    /// Smallest archive id.
    pub archive_min_id: Option<u32>,
    /// Largest archive id.
    pub archive_max_id: Option<u32>,
}

fn parse_archive_file_name(name: &str) -> Option<u32> {
    let stem = name.strip_suffix(".archive")?;
    if stem.len() != 10 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

/// The folder of archive files that recovery could not account for.
pub(crate) const QUARANTINE_DIR: &str = "quarantine";

/// Moves `path` into `dir/quarantine/` under its own name (`.N` appended if the name is taken), with the
/// rename made durable in both folders.
fn quarantine(dir: &Path, path: &Path, name: &str) -> Result<PathBuf> {
    let target_dir = dir.join(QUARANTINE_DIR);
    std::fs::create_dir_all(&target_dir).map_err(StorageError::io(format!(
        "creating {}",
        target_dir.display()
    )))?;
    let mut target = target_dir.join(name);
    let mut n = 1u32;
    while target.exists() {
        target = target_dir.join(format!("{name}.{n}"));
        n += 1;
    }
    std::fs::rename(path, &target).map_err(StorageError::io(format!(
        "moving {} to {}",
        path.display(),
        target.display()
    )))?;
    for d in [&target_dir, &dir.to_path_buf()] {
        std::fs::File::open(d)
            .and_then(|f| f.sync_all())
            .map_err(StorageError::io(format!("syncing {}", d.display())))?;
    }
    Ok(target)
}

fn count_quarantined(dir: &Path) -> Result<usize> {
    let target_dir = dir.join(QUARANTINE_DIR);
    match std::fs::read_dir(&target_dir) {
        Ok(entries) => Ok(entries.filter_map(Result::ok).count()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(StorageError::Io {
            context: format!("listing {}", target_dir.display()),
            source: e,
        }),
    }
}

/// With `read_only` the state is loaded and nothing on disk is changed.
pub(crate) fn recover(shared: &ArchiveShared, read_only: bool) -> Result<ArchiveOpenStats> {
    let mut stats = ArchiveOpenStats::default();
    let dir = &shared.dir;
    let db = &shared.db;
    let read_dir = |dir: &Path| -> Result<Vec<std::fs::DirEntry>> {
        std::fs::read_dir(dir)
            .and_then(Iterator::collect::<std::io::Result<Vec<_>>>)
            .map_err(StorageError::io(format!("listing {}", dir.display())))
    };

    // 1. Leftover temp files.
    for entry in read_dir(dir)? {
        if !read_only && entry.file_name().to_string_lossy().ends_with(".tmp") {
            std::fs::remove_file(entry.path()).map_err(StorageError::io(format!(
                "removing {}",
                entry.path().display()
            )))?;
            stats.tmp_files_removed += 1;
        }
    }

    // 2. Events in key order.
    let mut ids = BTreeSet::new();
    let mut committed = BTreeSet::new();
    let mut pending = BTreeSet::new();
    let mut override_next = None;
    let mut forget = Vec::new();
    for row in db.iter::<ArchiveEvents>(KeyRange::all()) {
        let (ArchiveEventKey { archive_id, event }, RawBytes(v)) = row?;
        match event {
            EVENT_STARTED => {
                ids.insert(archive_id);
            }
            EVENT_OVERRIDE_NEXT => {
                let n: [u8; 4] = v.as_slice().try_into().map_err(|_| {
                    StorageError::corruption(
                        format!("override event of archive {archive_id}"),
                        format!("{} bytes", v.len()),
                    )
                })?;
                override_next = Some(u32::from_le_bytes(n));
            }
            EVENT_TO_COMMIT => {
                if ids.contains(&archive_id) {
                    pending.insert(archive_id);
                } else {
                    tracing::warn!(
                        archive_id,
                        "TO_COMMIT for an archive that was never started; ignored"
                    );
                }
            }
            EVENT_COMMITTED => {
                pending.remove(&archive_id);
                if archive_path(dir, archive_id).exists() {
                    committed.insert(archive_id);
                } else {
                    tracing::warn!(
                        archive_id,
                        "committed archive file is missing; forgetting the archive"
                    );
                    stats.archives_missing += 1;
                    forget.push(archive_id);
                }
            }
            other => tracing::warn!(archive_id, event = other, "unknown archive event"),
        }
    }

    if !read_only && !forget.is_empty() {
        let mut batch = Batch::new();
        for &id in &forget {
            ids.remove(&id);
            db.batch_delete_range::<ArchiveEvents>(&mut batch, &archive_events(id));
            db.batch_delete::<ArchiveBlockIds>(&mut batch, &SeqnoKey(id));
        }
        db.write(batch, "forgetting archives with missing files")?;
    }
    if let Some(n) = override_next {
        if ids.range(n..).next().is_some() {
            override_next = None;
        }
    }

    // 3. Files that are neither committed nor pending: moved aside, never deleted.
    for entry in read_dir(dir)? {
        let name = entry.file_name();
        let Some(id) = parse_archive_file_name(&name.to_string_lossy()) else {
            continue;
        };
        if !read_only && !committed.contains(&id) && !pending.contains(&id) {
            let moved = quarantine(dir, &entry.path(), &name.to_string_lossy())?;
            tracing::error!(
                archive_id = id,
                file = %moved.display(),
                "an archive file that no commit accounts for was moved into quarantine; \
                 look at it, then delete it or keep it"
            );
            stats.archive_files_quarantined += 1;
        }
    }
    stats.quarantined_files = count_quarantined(dir)?;
    metrics::gauge!("regolith_storage_quarantined_archive_files")
        .set(stats.quarantined_files as f64);

    {
        let mut grouping = shared.grouping.lock();
        grouping.ids = ids.clone();
        grouping.override_next = override_next;
        *shared.committed.lock() = committed;
    }

    // 4. Pending commits, synchronously, in ascending order.
    for id in pending.into_iter().filter(|_| !read_only) {
        match shared.commit(id) {
            Ok(()) => stats.archives_recommitted += 1,
            Err(e) => {
                tracing::error!(archive_id = id, error = %e, "pending archive commit failed at startup");
            }
        }
    }

    stats.archive_count = ids.len();
    stats.archive_min_id = ids.first().copied();
    stats.archive_max_id = ids.last().copied();
    Ok(stats)
}
