//! Archives (storage.md §8): applied blocks grouped into files of up to 100 mc blocks, committed in the
//! background, served in 1 MiB chunks, removed by archive GC, recovered at startup.

mod commit;
mod grouping;
mod recovery;

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use regolith_formats::encode_block_id;
use regolith_kv::Batch;
use tokio::sync::{broadcast, oneshot};

pub use grouping::{Assignment, Grouping, MAX_MC_BLOCKS_PER_ARCHIVE};
pub use recovery::ArchiveOpenStats;

pub(crate) use commit::fsync_dir;

use crate::block_handle::{BlockHandle, BlockHandleStorage};
use crate::config::ArchivesConfig;
use crate::db::CoreDb;
use crate::error::{Result, StorageError};
use crate::tables::{
    ArchiveBlockIds, ArchiveEventKey, ArchiveEvents, KeyRange, RawBytes, SeqnoKey,
};

/// Every event row of an archive.
pub(crate) fn archive_events(archive_id: u32) -> KeyRange {
    KeyRange::inclusive(&event_key(archive_id, 0), &event_key(archive_id, u32::MAX))
}

/// Archive chunk size (= RPC block-data chunk size).
pub const ARCHIVE_CHUNK_SIZE: u64 = 1 << 20;

/// Event: the archive was opened.
pub const EVENT_STARTED: u32 = 100;
/// Event: the next archive must start at the given id (u32 LE).
pub const EVENT_OVERRIDE_NEXT: u32 = 200;
/// Event: the archive must be committed.
pub const EVENT_TO_COMMIT: u32 = 300;
/// Event: the archive file is written.
pub const EVENT_COMMITTED: u32 = 400;

pub(crate) fn event_key(archive_id: u32, event: u32) -> ArchiveEventKey {
    ArchiveEventKey { archive_id, event }
}

/// Path of a committed archive file.
pub fn archive_path(dir: &Path, id: u32) -> PathBuf {
    dir.join(format!("{id:010}.archive"))
}

/// Result of `get_archive_id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArchiveId {
    /// The archive that holds the seqno.
    Found(u32),
    /// The seqno is in (or past) the archive being built.
    TooNew,
    /// No archive holds the seqno.
    NotFound,
}

/// What RPC `getArchiveInfo` answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArchiveInfo {
    /// The archive, its compressed size and the chunk size.
    Found {
        /// Archive id.
        id: u32,
        /// Compressed size.
        size: u64,
        /// Chunk size (1 MiB).
        chunk_size: u64,
    },
    /// Not applied yet, or its archive is still being built or committed.
    TooNew,
    /// No archive holds the seqno.
    NotFound,
}

enum CommitMsg {
    Commit(u32),
    Barrier(oneshot::Sender<()>),
}

/// Shared state of the archive storage and its commit worker.
pub(crate) struct ArchiveShared {
    pub(crate) db: Arc<CoreDb>,
    pub(crate) dir: PathBuf,
    pub(crate) zstd_level: i32,
    pub(crate) grouping: Mutex<Grouping>,
    pub(crate) committed: Mutex<BTreeSet<u32>>,
    pub(crate) archive_ids_tx: broadcast::Sender<u32>,
    /// Compressed archive files offered for archives not yet committed, by archive id.
    pub(crate) sources: Mutex<BTreeMap<u32, OfferedArchive>>,
}

/// Most offered archive files kept at once: an apply has at most the one it reads and the one before it
/// waiting for their commits.
const MAX_OFFERED_ARCHIVES: usize = 4;

/// A compressed archive file offered as the file of one archive ([`ArchiveStorage::offer_archive_file`]).
pub(crate) struct OfferedArchive {
    path: PathBuf,
    /// The storage removes the file once it is no longer needed.
    owned: bool,
}

impl Drop for OfferedArchive {
    fn drop(&mut self) {
        if self.owned {
            if let Err(e) = std::fs::remove_file(&self.path) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    tracing::warn!(path = %self.path.display(), error = %e, "failed to remove an offered archive file");
                }
            }
        }
    }
}

impl ArchiveShared {
    /// Commits one archive and records it in memory; failures are logged and the TO_COMMIT stays.
    pub(crate) fn commit(&self, id: u32) -> Result<()> {
        let started = std::time::Instant::now();
        // The file offered for this archive, if any; those of older archives can no longer be used.
        let source = {
            let mut sources = self.sources.lock();
            *sources = sources.split_off(&id);
            sources.remove(&id)
        };
        let source_path = source.as_ref().map(|s| s.path.as_path());
        match commit::commit_archive(&self.db, &self.dir, id, self.zstd_level, source_path) {
            Ok(decompressed) => {
                self.committed.lock().insert(id);
                let _ = self.archive_ids_tx.send(id);
                metrics::counter!("regolith_archives_committed_total").increment(1);
                tracing::info!(archive_id = id, decompressed, elapsed = ?started.elapsed(), "archive committed");
                Ok(())
            }
            Err(e) => {
                tracing::error!(archive_id = id, error = %e, "archive commit failed");
                Err(e)
            }
        }
    }
}

/// Archive storage.
pub struct ArchiveStorage {
    shared: Arc<ArchiveShared>,
    handles: Arc<BlockHandleStorage>,
    enabled: bool,
    commit_tx: Mutex<Option<std::sync::mpsc::Sender<CommitMsg>>>,
    worker: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl ArchiveStorage {
    pub(crate) fn open(
        db: Arc<CoreDb>,
        handles: Arc<BlockHandleStorage>,
        root_dir: &Path,
        config: &ArchivesConfig,
        read_only: bool,
    ) -> Result<(Self, ArchiveOpenStats)> {
        let dir = root_dir.join("archives");
        if !read_only {
            std::fs::create_dir_all(&dir)
                .map_err(StorageError::io(format!("creating {}", dir.display())))?;
        }
        let (archive_ids_tx, _) = broadcast::channel(4);
        let shared = Arc::new(ArchiveShared {
            db,
            dir,
            zstd_level: config.zstd_level,
            grouping: Mutex::new(Grouping::new(config.mc_blocks_per_archive)),
            committed: Mutex::new(BTreeSet::new()),
            archive_ids_tx,
            sources: Mutex::new(BTreeMap::new()),
        });
        let stats = recovery::recover(&shared, read_only)?;

        let (tx, rx) = std::sync::mpsc::channel::<CommitMsg>();
        let worker_shared = shared.clone();
        let worker = std::thread::Builder::new()
            .name("archive-commit".into())
            .spawn(move || {
                for msg in rx {
                    match msg {
                        CommitMsg::Commit(id) => {
                            let _ = worker_shared.commit(id);
                        }
                        CommitMsg::Barrier(done) => {
                            let _ = done.send(());
                        }
                    }
                }
            })
            .map_err(StorageError::io("starting the archive commit thread"))?;
        Ok((
            Self {
                shared,
                handles,
                enabled: config.enabled,
                commit_tx: Mutex::new(Some(tx)),
                worker: Mutex::new(Some(worker)),
            },
            stats,
        ))
    }

    /// The archive directory.
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    fn schedule(&self, msg: CommitMsg) {
        if let Some(tx) = self.commit_tx.lock().as_ref() {
            let _ = tx.send(msg);
        }
    }

    /// Puts an applied block into its archive (called once per block, strictly in apply order).
    /// `mc_is_key_block` is about the mc block that references a shard block.
    pub fn move_into_archive(&self, handle: &BlockHandle, mc_is_key_block: bool) -> Result<()> {
        if !self.enabled {
            return Ok(());
        }
        let s = handle.ref_by_mc_seqno();
        let force = mc_is_key_block || handle.is_key_block();
        let db = &self.shared.db;

        let mut grouping = self.shared.grouping.lock();
        let mut next = grouping.clone();
        let a = next.assign(s, force);

        let mut batch = Batch::new();
        db.batch_merge::<ArchiveBlockIds>(
            &mut batch,
            &SeqnoKey(a.target),
            &RawBytes(encode_block_id(handle.id()).to_vec()),
        );
        if a.opened {
            db.batch_put::<ArchiveEvents>(
                &mut batch,
                &event_key(a.target, EVENT_STARTED),
                &RawBytes::default(),
            );
        }
        if let Some(prev) = a.commit_prev {
            db.batch_put::<ArchiveEvents>(
                &mut batch,
                &event_key(prev, EVENT_TO_COMMIT),
                &RawBytes::default(),
            );
        }
        if let Some(n) = a.override_set {
            db.batch_put::<ArchiveEvents>(
                &mut batch,
                &event_key(a.target, EVENT_OVERRIDE_NEXT),
                &RawBytes(n.to_le_bytes().to_vec()),
            );
        }
        db.write(
            batch,
            format_args!("moving block {} into archive {}", handle.id(), a.target),
        )?;
        *grouping = next;
        drop(grouping);

        if let Some(prev) = a.commit_prev {
            self.schedule(CommitMsg::Commit(prev));
        }
        Ok(())
    }

    /// Offers the compressed archive file at `path` as the file of archive `id` (storage.md §8.3, our
    /// deviation): when that archive is committed, a copy of the file becomes its archive file if its zstd
    /// stream decompresses to exactly the bytes the commit would write, instead of compressing them again.
    /// Any other file is ignored and the archive is built as usual, so the offer is safe for a file from a
    /// peer or a user. `owned`: the storage removes the file once it no longer needs it (at the commit, or
    /// when newer offers push it out). An offer is kept in memory only; after a restart the archive is built.
    pub fn offer_archive_file(&self, id: u32, path: PathBuf, owned: bool) {
        let offered = OfferedArchive { path, owned };
        if !self.enabled || self.shared.committed.lock().contains(&id) {
            return;
        }
        let mut sources = self.shared.sources.lock();
        sources.insert(id, offered);
        while sources.len() > MAX_OFFERED_ARCHIVES {
            sources.pop_first();
        }
    }

    /// Waits until every commit scheduled so far has finished.
    pub async fn wait_for_archive_commit(&self) {
        let (tx, rx) = oneshot::channel();
        self.schedule(CommitMsg::Barrier(tx));
        let _ = rx.await;
    }

    /// Ids of all known archives, including the one being built.
    pub fn list_archive_ids(&self) -> Vec<u32> {
        self.shared.grouping.lock().ids.iter().copied().collect()
    }

    /// Ids of committed archives.
    pub fn committed_archive_ids(&self) -> Vec<u32> {
        self.shared.committed.lock().iter().copied().collect()
    }

    /// Receives the id of every archive committed from now on (capacity 4; laggards miss ids).
    pub fn subscribe_to_archive_ids(&self) -> broadcast::Receiver<u32> {
        self.shared.archive_ids_tx.subscribe()
    }

    /// The smallest archive id not yet committed.
    pub fn first_uncommitted_archive_id(&self) -> Option<u32> {
        let ids = self.shared.grouping.lock().ids.clone();
        let committed = self.shared.committed.lock();
        ids.into_iter().find(|id| !committed.contains(id))
    }

    /// The archive holding mc seqno `seqno` (§8.6).
    pub fn get_archive_id(&self, seqno: u32) -> ArchiveId {
        let grouping = self.shared.grouping.lock();
        let Some(newest) = grouping.ids.last().copied() else {
            return ArchiveId::TooNew;
        };
        if seqno >= newest {
            return ArchiveId::TooNew;
        }
        match grouping.ids.range(..=seqno).next_back() {
            Some(&x) if u64::from(seqno) < u64::from(x) + u64::from(grouping.span) => {
                ArchiveId::Found(x)
            }
            _ => ArchiveId::NotFound,
        }
    }

    /// The answer to RPC `getArchiveInfo` for `seqno` given the last applied mc seqno (§8.6).
    pub fn archive_info(&self, seqno: u32, last_applied_mc_seqno: u32) -> Result<ArchiveInfo> {
        if seqno > last_applied_mc_seqno {
            return Ok(ArchiveInfo::TooNew);
        }
        Ok(match self.get_archive_id(seqno) {
            ArchiveId::TooNew => ArchiveInfo::TooNew,
            ArchiveId::NotFound => ArchiveInfo::NotFound,
            ArchiveId::Found(id) => match self.get_archive_size(id)? {
                None => ArchiveInfo::TooNew,
                Some(0) => ArchiveInfo::NotFound,
                Some(size) => ArchiveInfo::Found {
                    id,
                    size,
                    chunk_size: ARCHIVE_CHUNK_SIZE,
                },
            },
        })
    }

    /// Commits an archive now, on this thread (tests); the result is returned instead of logged.
    #[cfg(feature = "test-utils")]
    pub fn commit_archive_now(&self, id: u32) -> Result<()> {
        self.shared.commit(id)
    }

    /// An estimate of the archive id of `seqno` from the key-block index alone.
    pub fn estimate_archive_id(&self, seqno: u32) -> Result<u32> {
        let base = match self.handles.find_prev_key_block(seqno)? {
            Some(h) => h.id().seqno + 1,
            None => 1,
        };
        Ok(if base < seqno {
            seqno - ((seqno - base) % self.shared.grouping.lock().span)
        } else {
            seqno
        })
    }

    fn committed_file(&self, id: u32) -> Option<PathBuf> {
        self.shared
            .committed
            .lock()
            .contains(&id)
            .then(|| archive_path(&self.shared.dir, id))
    }

    /// Compressed size of a committed archive.
    pub fn get_archive_size(&self, id: u32) -> Result<Option<u64>> {
        let Some(path) = self.committed_file(id) else {
            return Ok(None);
        };
        match std::fs::metadata(&path) {
            Ok(m) => Ok(Some(m.len())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(StorageError::Io {
                context: format!("reading the size of {}", path.display()),
                source: e,
            }),
        }
    }

    /// Opens a committed archive file for reading.
    pub fn open_archive(&self, id: u32) -> Result<std::fs::File> {
        let path = self
            .committed_file(id)
            .ok_or(StorageError::ArchiveNotFound(id))?;
        std::fs::File::open(&path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => StorageError::ArchiveNotFound(id),
            _ => StorageError::Io {
                context: format!("opening {}", path.display()),
                source: e,
            },
        })
    }

    /// Bytes `[offset, offset + 1 MiB)` of a committed archive; `offset` must be a multiple of 1 MiB.
    pub fn get_archive_chunk(&self, id: u32, offset: u64) -> Result<Bytes> {
        if !offset.is_multiple_of(ARCHIVE_CHUNK_SIZE) {
            return Err(StorageError::InvalidOffset(offset));
        }
        let file = self.open_archive(id)?;
        let len = file
            .metadata()
            .map_err(StorageError::io(format!(
                "reading the size of archive {id}"
            )))?
            .len();
        if offset >= len {
            return Ok(Bytes::new());
        }
        let n = (len - offset).min(ARCHIVE_CHUNK_SIZE) as usize;
        let mut buf = vec![0u8; n];
        file.read_exact_at(&mut buf, offset)
            .map_err(StorageError::io(format!(
                "reading archive {id} at {offset}"
            )))?;
        Ok(Bytes::from(buf))
    }

    /// Removes every archive older than the newest one below `until` (file, events, id list). An archive
    /// whose commit is still pending is never removed, nor is anything above it.
    pub fn remove_outdated_archives(&self, until: u32) -> Result<Vec<u32>> {
        let mut grouping = self.shared.grouping.lock();
        let Some(&keep) = grouping.ids.range(..until).next_back() else {
            return Ok(Vec::new());
        };
        let victims: Vec<u32> = {
            let committed = self.shared.committed.lock();
            grouping
                .ids
                .range(..keep)
                .copied()
                .take_while(|id| committed.contains(id))
                .collect()
        };
        if victims.is_empty() {
            return Ok(victims);
        }
        let db = &self.shared.db;
        let mut batch = Batch::new();
        for &id in &victims {
            db.batch_delete_range::<ArchiveEvents>(&mut batch, &archive_events(id));
            db.batch_delete::<ArchiveBlockIds>(&mut batch, &SeqnoKey(id));
        }
        db.write(batch, "removing outdated archives")?;
        let mut committed = self.shared.committed.lock();
        for &id in &victims {
            grouping.ids.remove(&id);
            committed.remove(&id);
            let path = archive_path(&self.shared.dir, id);
            if let Err(e) = std::fs::remove_file(&path) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    tracing::warn!(path = %path.display(), error = %e, "failed to remove an archive file");
                }
            }
        }
        Ok(victims)
    }

    /// Grouping state (for inspection).
    pub fn grouping(&self) -> Grouping {
        self.shared.grouping.lock().clone()
    }

    /// Block ids of an archive that is still being built.
    pub fn pending_block_ids(&self, id: u32) -> Result<Vec<regolith_formats::BlockId>> {
        commit::load_block_ids(&self.shared.db, id)
    }
}

impl Drop for ArchiveStorage {
    fn drop(&mut self) {
        // Closing the channel ends the worker after the commits already scheduled.
        self.commit_tx.lock().take();
        if let Some(worker) = self.worker.lock().take() {
            let _ = worker.join();
        }
    }
}
