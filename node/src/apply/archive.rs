//! Archives as a block source, in memory bounded by one group rather than by the archive.
//!
//! The decompressed stream is written once to a spill file under the data directory while the streaming
//! verifier frames it and indexes the entries ([`ArchiveIndex`]): for a local archive file the
//! `SpillWriter` here, for a download the RPC client's verifier
//! ([`regolith_rpc::BlockchainRpcClient::download_archive_indexed`]). Nothing of an entry is kept in
//! memory, and nothing frames the stream a second time. The groups are then read on demand: mc blocks in seqno order, each with the shard blocks it brings, walked
//! back from its top shard blocks to the applied ones. Every block is read and checked once, when its group
//! is formed.

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use bytes::Bytes;
use regolith_formats::archive::{
    ArchiveEntryType, ArchiveError, ArchiveIndex, ArchiveLimits, ArchiveVerifier,
};
use regolith_formats::{BlockId, CheckedBlock};
use regolith_storage::Storage;

use super::group::{is_applied, Group};
use super::ApplyError;

/// Writes a decompressed archive stream to a spill file, framing and indexing it as it goes.
pub struct SpillWriter {
    file: BufWriter<File>,
    path: PathBuf,
    verifier: ArchiveVerifier,
    /// Bytes written to the file: the entries below it are whole.
    written: u64,
    /// The framing error that stopped the stream.
    error: Option<Box<ArchiveError>>,
}

impl SpillWriter {
    /// A spill file at `path` (created, truncated), with entries bounded by `limits`.
    pub fn create(path: &Path, limits: ArchiveLimits) -> Result<Self> {
        let file =
            File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
        Ok(Self {
            file: BufWriter::new(file),
            path: path.to_path_buf(),
            verifier: ArchiveVerifier::indexing(limits),
            written: 0,
            error: None,
        })
    }

    /// The stream ended (or failed): the spilled archive, with the entries that arrived whole and the error
    /// that cut it short, if any.
    pub fn finish(self, name: String) -> Result<SpilledArchive> {
        let Self {
            file,
            path,
            verifier,
            written,
            error,
        } = self;
        let file = file
            .into_inner()
            .map_err(|e| anyhow!("cannot write {}: {}", path.display(), e.error()))?;
        drop(file);
        // Only entries that reached the file whole are indexed; the first error is the one reported.
        let (index, end_error) = verifier.finish_partial(written);
        let end_error = error.or(end_error);
        let file = File::open(&path).with_context(|| format!("cannot open {}", path.display()))?;
        Ok(SpilledArchive {
            name,
            file,
            path,
            index,
            read_error: end_error,
        })
    }
}

impl Write for SpillWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Some(e) = &self.error {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                e.to_string(),
            ));
        }
        if let Err(e) = self.verifier.write(buf) {
            let message = e.to_string();
            self.error = Some(e);
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                message,
            ));
        }
        self.file.write_all(buf)?;
        self.written += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

/// A decompressed archive on disk with the index of its whole entries; the file is removed when dropped.
pub struct SpilledArchive {
    /// The archive's name in messages (a file path, or "archive N from PEER").
    pub name: String,
    file: File,
    path: PathBuf,
    index: ArchiveIndex,
    /// The error that cut the stream short: the entries before it are usable.
    read_error: Option<Box<ArchiveError>>,
}

impl Drop for SpilledArchive {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl SpilledArchive {
    /// Decompresses an archive file into a spill file at `spill` (zstd; every frame of the file).
    pub fn from_compressed_file(
        archive: &Path,
        spill: &Path,
        limits: ArchiveLimits,
    ) -> Result<Self> {
        let file = File::open(archive)
            .with_context(|| format!("cannot open archive {}", archive.display()))?;
        let mut decoder = zstd::stream::read::Decoder::new(file)
            .with_context(|| format!("cannot start decoding {}", archive.display()))?;
        let mut writer = SpillWriter::create(spill, limits)?;
        if let Err(e) = std::io::copy(&mut decoder, &mut writer) {
            if writer.error.is_none() {
                // Not a framing error: the zstd stream (or the spill file) failed at this offset.
                writer.error = Some(Box::new(ArchiveError {
                    offset: writer.written,
                    block_id: None,
                    kind: regolith_formats::archive::ArchiveErrorKind::Io(e),
                }));
            }
        }
        writer.finish(archive.display().to_string())
    }

    /// A downloaded archive: `file` holds the decompressed stream at `path`, `index` its entries as the
    /// download's verifier recorded them (the stream ended at an entry boundary).
    pub fn downloaded(
        name: String,
        path: &Path,
        file: BufWriter<File>,
        index: ArchiveIndex,
    ) -> Result<Self> {
        let written = file
            .into_inner()
            .map_err(|e| anyhow!("cannot write {}: {}", path.display(), e.error()))?;
        drop(written);
        let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        Ok(Self {
            name,
            file,
            path: path.to_path_buf(),
            index,
            read_error: None,
        })
    }

    /// The archive's id as storage.md §8.1 numbers archives, the seqno of its first mc block, when the
    /// stream came whole (a cut stream cannot be any archive's file).
    pub fn archive_id(&self) -> Option<u32> {
        if self.read_error.is_some() {
            return None;
        }
        self.index
            .blocks()
            .filter(|id| id.is_masterchain())
            .map(|id| id.seqno)
            .min()
    }

    /// The index of the whole entries.
    pub fn index(&self) -> &ArchiveIndex {
        &self.index
    }

    /// Reads an entry's data from the spill file.
    pub fn read_entry(&self, entry: &regolith_formats::archive::IndexedEntry) -> Result<Vec<u8>> {
        self.index
            .read(&self.file, entry)
            .with_context(|| format!("cannot read {}", self.path.display()))
    }

    /// The error that cut the stream short, as the apply reports it.
    fn read_error(&self) -> Option<anyhow::Error> {
        self.read_error.as_ref().map(|e| {
            let block = e
                .block_id
                .map(|b| format!(", block {b}"))
                .unwrap_or_default();
            anyhow!(
                "{}: corrupted archive at offset {}{block}: {}",
                self.name,
                e.offset,
                e.kind
            )
        })
    }

    fn read(&self, id: &BlockId, ty: ArchiveEntryType) -> Result<Option<(u64, Vec<u8>)>> {
        let Some(entry) = self.index.get(id, ty) else {
            return Ok(None);
        };
        let data = self
            .index
            .read(&self.file, entry)
            .with_context(|| format!("cannot read {}", self.path.display()))?;
        Ok(Some((entry.header_offset, data)))
    }

    /// Reads and checks block `id` ([`CheckedBlock::check`]): the error names the archive, the block and the
    /// offset of its entry.
    fn check_block(&self, id: &BlockId) -> Result<CheckedBlock, ApplyError> {
        let part = |ty: ArchiveEntryType| -> Result<(u64, Vec<u8>), ApplyError> {
            self.read(id, ty)
                .map_err(ApplyError::Local)?
                .ok_or_else(|| {
                    // A part cut off by a corrupted or truncated stream: the corruption is the cause.
                    ApplyError::Invalid(self.read_error().unwrap_or_else(|| {
                        anyhow!(
                            "{}: block {id}: the archive has no {} for it",
                            self.name,
                            ty.name()
                        )
                    }))
                })
        };
        let (offset, data) = part(ArchiveEntryType::Block)?;
        let (_, proof) = part(ArchiveEntryType::Proof)?;
        let (_, diff) = part(ArchiveEntryType::QueueDiff)?;
        CheckedBlock::check(id, Bytes::from(data), Bytes::from(proof), Bytes::from(diff)).map_err(
            |e| {
                ApplyError::Invalid(
                    anyhow::Error::new(e)
                        .context(format!("{}: block {id} at offset {offset}", self.name)),
                )
            },
        )
    }
}

/// Groups a reader thread may form ahead of the one being applied: their checks (decoding and hashing every
/// block) run on another core while the apply stores the current group.
const GROUPS_AHEAD: usize = 2;

/// The groups of a spilled archive, in apply order. After [`Self::skip_applied`], the first
/// [`Self::next_group`] hands the archive to a reader thread that forms and checks the groups in order, at
/// most [`GROUPS_AHEAD`] ahead of the apply; it stops at the first error, which the apply receives in its
/// turn, so errors come in the same order as they would one group at a time.
pub struct ArchiveGroups {
    /// The archive and the walk's state while no reader runs (before the first group, after the last).
    state: Option<GroupWalk>,
    reader: Option<Reader>,
    name: String,
    blocks_in_archive: usize,
    decompressed_bytes: u64,
}

/// The reader thread and the groups it has formed.
struct Reader {
    groups: std::sync::mpsc::Receiver<Result<Group, ApplyError>>,
    thread: std::thread::JoinHandle<GroupWalk>,
}

/// The walk through an archive's groups.
struct GroupWalk {
    archive: SpilledArchive,
    /// The mc blocks of the archive, by seqno.
    mc_blocks: Vec<BlockId>,
    next: usize,
    /// Shard blocks taken into a group.
    used: HashSet<BlockId>,
}

impl ArchiveGroups {
    /// The groups of `archive`.
    pub fn new(archive: SpilledArchive) -> Self {
        let mut mc_blocks: Vec<BlockId> = archive
            .index
            .blocks()
            .filter(|id| id.is_masterchain())
            .copied()
            .collect();
        mc_blocks.sort_by_key(|id| id.seqno);
        Self {
            name: archive.name.clone(),
            blocks_in_archive: archive.index.blocks().count(),
            decompressed_bytes: archive.index.decompressed_len(),
            state: Some(GroupWalk {
                archive,
                mc_blocks,
                next: 0,
                used: HashSet::new(),
            }),
            reader: None,
        }
    }

    /// The archive's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Blocks in the archive.
    pub fn blocks_in_archive(&self) -> usize {
        self.blocks_in_archive
    }

    /// Decompressed bytes.
    pub fn decompressed_bytes(&self) -> u64 {
        self.decompressed_bytes
    }

    /// Skips the mc blocks at or below `last_applied`; returns how many blocks of the archive that leaves
    /// out as already applied: those mc blocks, and the shard blocks that are applied or lie at or below the
    /// applied top shard block of their shard (`applied_tops`; such a block may since have been removed by
    /// GC). Called before the first group.
    pub fn skip_applied(
        &mut self,
        storage: &Storage,
        last_applied: u32,
        applied_tops: &std::collections::HashMap<regolith_formats::ShardIdent, u32>,
    ) -> Result<usize> {
        let walk = self
            .state
            .as_mut()
            .ok_or_else(|| anyhow!("{}: groups were taken already", self.name))?;
        walk.skip_applied(storage, last_applied, applied_tops)
    }

    /// The next group: the next mc block of the archive and the shard blocks it needs that are not applied.
    /// `last_applied` is the last applied mc seqno when the first group is asked for: no block outside the
    /// archive becomes applied while its groups are, so the reader's answers hold for every later group. A
    /// block a group needs that is neither applied nor in the archive stops here with an error naming it (or
    /// naming where the archive was cut short).
    pub fn next_group(
        &mut self,
        storage: &Storage,
        last_applied: u32,
    ) -> Option<Result<Group, ApplyError>> {
        if self.reader.is_none() {
            let mut walk = self.state.take()?;
            let (tx, rx) = std::sync::mpsc::sync_channel(GROUPS_AHEAD);
            let storage = storage.clone();
            let spawned = std::thread::Builder::new()
                .name("archive-groups".into())
                .spawn(move || {
                    while let Some(group) = walk.next_group(&storage, last_applied) {
                        let failed = group.is_err();
                        if tx.send(group).is_err() || failed {
                            break;
                        }
                    }
                    walk
                });
            match spawned {
                Ok(thread) => self.reader = Some(Reader { groups: rx, thread }),
                Err(e) => {
                    return Some(Err(ApplyError::Local(anyhow!(
                        "{}: cannot start the group reader: {e}",
                        self.name
                    ))))
                }
            }
        }
        let reader = self.reader.as_ref()?;
        match reader.groups.recv() {
            Ok(group) => Some(group),
            // The reader ended: after the last group, or after the error it sent.
            Err(_) => match self.stop_reader() {
                Ok(()) => None,
                Err(e) => Some(Err(e)),
            },
        }
    }

    /// Ends the reader (it stops at its next group) and takes the walk back.
    fn stop_reader(&mut self) -> Result<(), ApplyError> {
        let Some(Reader { groups, thread }) = self.reader.take() else {
            return Ok(());
        };
        drop(groups);
        match thread.join() {
            Ok(walk) => {
                self.state = Some(walk);
                Ok(())
            }
            Err(_) => Err(ApplyError::Local(anyhow!(
                "{}: the group reader panicked",
                self.name
            ))),
        }
    }

    /// After the last group: the error that cut the archive short, or a shard block no mc block took.
    pub fn finish(&mut self) -> Result<(), ApplyError> {
        self.stop_reader()?;
        match &self.state {
            Some(walk) => walk.finish(),
            None => Ok(()),
        }
    }
}

impl Drop for ArchiveGroups {
    fn drop(&mut self) {
        let _ = self.stop_reader();
    }
}

impl GroupWalk {
    fn skip_applied(
        &mut self,
        storage: &Storage,
        last_applied: u32,
        applied_tops: &std::collections::HashMap<regolith_formats::ShardIdent, u32>,
    ) -> Result<usize> {
        let mut skipped = 0;
        while self
            .mc_blocks
            .get(self.next)
            .is_some_and(|id| id.seqno <= last_applied)
        {
            self.next += 1;
            skipped += 1;
        }
        for id in self.archive.index.blocks() {
            if id.is_masterchain() {
                continue;
            }
            let below_top = applied_tops
                .get(&id.shard)
                .is_some_and(|top| id.seqno <= *top);
            if below_top || is_applied(storage, id, last_applied)? {
                self.used.insert(*id);
                skipped += 1;
            }
        }
        Ok(skipped)
    }

    fn next_group(
        &mut self,
        storage: &Storage,
        last_applied: u32,
    ) -> Option<Result<Group, ApplyError>> {
        let mc_id = *self.mc_blocks.get(self.next)?;
        self.next += 1;
        Some(self.group_of(storage, &mc_id, last_applied))
    }

    fn group_of(
        &mut self,
        storage: &Storage,
        mc_id: &BlockId,
        last_applied: u32,
    ) -> Result<Group, ApplyError> {
        let mc = self.checked(storage, mc_id)?;
        let mut shards = Vec::new();
        let mut seen = HashSet::new();
        let mut pending: Vec<BlockId> = mc.top_shard_blocks().iter().map(|t| t.id).collect();
        while let Some(id) = pending.pop() {
            if id.seqno == 0 || !seen.insert(id) {
                continue;
            }
            if self
                .archive
                .index
                .get(&id, ArchiveEntryType::Block)
                .is_some()
            {
                if self.used.contains(&id) {
                    // Applied, or taken into an earlier group: the apply stops before this group unless
                    // that group was applied.
                    continue;
                }
                let block = self.checked(storage, &id)?;
                pending.extend(block.prev_ids().iter().copied());
                self.used.insert(id);
                shards.push(block);
                continue;
            }
            if is_applied(storage, &id, last_applied).map_err(ApplyError::Local)? {
                continue;
            }
            if let Some(e) = self.archive.read_error() {
                return Err(ApplyError::Invalid(e));
            }
            return Err(ApplyError::Invalid(anyhow!(
                "{}: mc block {} needs shard block {id}, which is neither applied nor in the archive; \
                 nothing of mc block {} is stored",
                self.archive.name,
                mc_id.seqno,
                mc_id.seqno
            )));
        }
        Ok(Group::new(mc, shards))
    }

    /// Block `id`, checked, with its data compressed into the stored form (on the reader's thread, so that
    /// the apply does not compress it).
    fn checked(&self, storage: &Storage, id: &BlockId) -> Result<CheckedBlock, ApplyError> {
        let block = self.archive.check_block(id)?;
        storage
            .components()
            .compress_block_data(block)
            .map_err(|e| ApplyError::Local(e.into()))
    }

    fn finish(&self) -> Result<(), ApplyError> {
        if let Some(e) = self.archive.read_error() {
            return Err(ApplyError::Invalid(e));
        }
        let unreferenced: Vec<&BlockId> = self
            .archive
            .index
            .blocks()
            .filter(|id| !id.is_masterchain() && !self.used.contains(id))
            .collect();
        if let Some(id) = unreferenced.first() {
            return Err(ApplyError::Invalid(anyhow!(
                "{}: shard block {id} is not referenced by any masterchain block of the archive ({} such blocks)",
                self.archive.name,
                unreferenced.len()
            )));
        }
        Ok(())
    }
}
