//! `regolith import`: archive files into the node through the apply pipeline ([`crate::apply`]). Each file is
//! decompressed once into a spill file under the data directory (framed and indexed as it goes), then applied
//! group by group, so memory stays bounded by one group whatever the archive's size.

use std::path::Path;

use anyhow::Result;
use regolith_formats::archive::ArchiveLimits;
use regolith_storage::Storage;

use crate::apply::{ArchiveGroups, Pipeline, Source, SpilledArchive};
pub use crate::apply::{ImportOptions, ImportReport};
use crate::progress::Progress;
use crate::queue_sync::NodeQueue;

/// Bounds on a local archive file: entries up to 1 GiB (a format allows 4), at most 10 million of them.
pub const LOCAL_ARCHIVE_LIMITS: ArchiveLimits = ArchiveLimits {
    max_entry_len: 1 << 30,
    max_entries: 10_000_000,
};

/// Imports one archive file. Groups are applied in order (each mc block with the shard blocks it brings);
/// everything applied before a bad group stays.
pub async fn import_archive(
    storage: &Storage,
    queue: &NodeQueue,
    path: &Path,
    progress: &Progress,
) -> Result<ImportReport> {
    import_archive_with(storage, queue, path, progress, &ImportOptions::default()).await
}

/// [`import_archive`] with options.
pub async fn import_archive_with(
    storage: &Storage,
    queue: &NodeQueue,
    path: &Path,
    progress: &Progress,
    options: &ImportOptions,
) -> Result<ImportReport> {
    let mut pipeline = Pipeline::new(storage, queue, options)?;
    import_archive_into(&mut pipeline, storage, path, progress).await
}

/// Imports one archive file through an existing pipeline (the CLI imports several files with one).
pub async fn import_archive_into(
    pipeline: &mut Pipeline,
    storage: &Storage,
    path: &Path,
    progress: &Progress,
) -> Result<ImportReport> {
    let spill_dir = storage.config().root_dir.join(crate::sync::SYNC_DIR);
    std::fs::create_dir_all(&spill_dir)?;
    let spill = spill_dir.join(format!("import-{}.spill", std::process::id()));
    let path_owned = path.to_path_buf();
    let archive = tokio::task::spawn_blocking(move || {
        SpilledArchive::from_compressed_file(&path_owned, &spill, LOCAL_ARCHIVE_LIMITS)
    })
    .await??;
    // The file becomes the archive's own file at its commit if it holds exactly what the commit would write.
    if let (Some(id), Ok(file)) = (archive.archive_id(), std::path::absolute(path)) {
        storage.archives().offer_archive_file(id, file, false);
    }
    let mut groups = ArchiveGroups::new(archive);
    let name = groups.name().to_string();
    pipeline
        .apply(Source::Archive(&mut groups), &name, progress)
        .await
        .map_err(crate::apply::ApplyError::into_inner)
}
