//! Persistent states: files in `<data>/states/` (zstd-compressed, named like the S3 keys of rpc.md §4.3.2),
//! recorded in the `persistent_states` index table. A state exists for readers only once it is recorded:
//! a file is written to a temp file, synced and renamed, and only then recorded, in one batch with its
//! handle flag. At open, temp files of writes that never finished are removed, and state files without a
//! record (left by a crash between the rename and the record, or by a data dir older than the index) are
//! indexed.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use regolith_formats::persistent_state::{
    manifest_object_name, parse_state_object_name, state_object_name, SplitManifest, StateKind,
    StateObject, StatePart,
};
use regolith_formats::{BlockId, BlockKey, BLOCK_KEY_LEN};
use regolith_kv::{Batch, Codec, DecodeError};

use crate::archive::fsync_dir;
use crate::block_handle::BlockHandleStorage;
use crate::block_meta::BlockFlags;
use crate::db::CoreDb;
use crate::error::{Result, StorageError};
use crate::tables::{BlockHandles, KeyRange, PersistentStates, StoredHash};

/// The directory of state files under the data directory.
pub const STATES_DIR: &str = "states";

/// Chunk size of persistent states served from local files: 1 MiB.
pub const STATE_CHUNK_SIZE: u64 = 1 << 20;

/// One part of a split state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatePartRecord {
    /// Shard prefix of the part.
    pub prefix: u64,
    /// Size of the part's file.
    pub size: u64,
}

/// What the index records of one persistent state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PersistentStateRecord {
    /// The block of the state.
    pub block: BlockId,
    /// Shard or queue state.
    pub kind: StateKind,
    /// The file name under `states/` (the split root for a split state).
    pub file: String,
    /// Size of that file (compressed bytes as served).
    pub size: u64,
    /// Chunk size readers must use.
    pub chunk_size: u64,
    /// 0 for an unsplit state.
    pub split_depth: u8,
    /// The parts of a split state, sorted by prefix.
    pub parts: Vec<StatePartRecord>,
}

/// Key of `persistent_states`: block key (48) ‖ kind (1: shard 0, queue 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PersistentStateKey(pub BlockKey, pub StateKind);

fn kind_byte(kind: StateKind) -> u8 {
    match kind {
        StateKind::Shard => 0,
        StateKind::Queue => 1,
    }
}

impl Codec for PersistentStateKey {
    type Encoded<'a> = [u8; BLOCK_KEY_LEN + 1];
    fn encode(&self) -> [u8; BLOCK_KEY_LEN + 1] {
        let mut out = [0u8; BLOCK_KEY_LEN + 1];
        out[..BLOCK_KEY_LEN].copy_from_slice(self.0.as_bytes());
        out[BLOCK_KEY_LEN] = kind_byte(self.1);
        out
    }
    fn decode(bytes: &[u8]) -> std::result::Result<Self, DecodeError> {
        DecodeError::check_len("persistent state key", bytes, BLOCK_KEY_LEN + 1)?;
        let kind = match bytes[BLOCK_KEY_LEN] {
            0 => StateKind::Shard,
            1 => StateKind::Queue,
            other => {
                return Err(DecodeError::new(format!(
                    "persistent state key: kind {other}"
                )))
            }
        };
        let key = BlockKey::from_slice(&bytes[..BLOCK_KEY_LEN])
            .map_err(|e| DecodeError::new(format!("persistent state key: {e}")))?;
        Ok(Self(key, kind))
    }
}

/// Value of `persistent_states` (version 1): version (1) ‖ file hash (32) ‖ size (u64 LE) ‖ chunk size
/// (u64 LE) ‖ split depth (1) ‖ part count (1) ‖ parts (prefix u64 LE, size u64 LE) ‖ file name length
/// (u16 LE) ‖ file name (UTF-8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PersistentStateValue {
    /// File hash of the block (the key holds the rest of the id).
    pub file_hash: regolith_formats::HashBytes,
    /// The file name.
    pub file: String,
    /// File size.
    pub size: u64,
    /// Chunk size.
    pub chunk_size: u64,
    /// Split depth.
    pub split_depth: u8,
    /// Parts.
    pub parts: Vec<StatePartRecord>,
}

const VALUE_VERSION: u8 = 1;

impl Codec for PersistentStateValue {
    type Encoded<'a> = Vec<u8>;
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(55 + 16 * self.parts.len() + self.file.len());
        out.push(VALUE_VERSION);
        out.extend_from_slice(&self.file_hash.0);
        out.extend_from_slice(&self.size.to_le_bytes());
        out.extend_from_slice(&self.chunk_size.to_le_bytes());
        out.push(self.split_depth);
        out.push(self.parts.len() as u8);
        for part in &self.parts {
            out.extend_from_slice(&part.prefix.to_le_bytes());
            out.extend_from_slice(&part.size.to_le_bytes());
        }
        out.extend_from_slice(&(self.file.len() as u16).to_le_bytes());
        out.extend_from_slice(self.file.as_bytes());
        out
    }

    fn decode(bytes: &[u8]) -> std::result::Result<Self, DecodeError> {
        let bad = |reason: String| DecodeError::new(format!("persistent state record: {reason}"));
        let mut reader = Reader { bytes, pos: 0 };
        let version = reader.u8()?;
        if version != VALUE_VERSION {
            return Err(bad(format!("unknown version {version}")));
        }
        let file_hash = regolith_formats::HashBytes(reader.take::<32>()?);
        let size = u64::from_le_bytes(reader.take::<8>()?);
        let chunk_size = u64::from_le_bytes(reader.take::<8>()?);
        let split_depth = reader.u8()?;
        let count = reader.u8()?;
        let mut parts = Vec::with_capacity(usize::from(count));
        for _ in 0..count {
            parts.push(StatePartRecord {
                prefix: u64::from_le_bytes(reader.take::<8>()?),
                size: u64::from_le_bytes(reader.take::<8>()?),
            });
        }
        let name_len = usize::from(u16::from_le_bytes(reader.take::<2>()?));
        let name = reader.slice(name_len)?;
        if reader.pos != bytes.len() {
            return Err(bad(format!("{} trailing bytes", bytes.len() - reader.pos)));
        }
        let file = std::str::from_utf8(name)
            .map_err(|e| bad(format!("file name: {e}")))?
            .to_owned();
        if !is_plain_file_name(&file) {
            return Err(bad(format!(
                "file name {file:?} is not a plain file name in {STATES_DIR}/"
            )));
        }
        Ok(Self {
            file_hash,
            file,
            size,
            chunk_size,
            split_depth,
            parts,
        })
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn slice(&mut self, n: usize) -> std::result::Result<&'a [u8], DecodeError> {
        let end = self.pos.checked_add(n).filter(|e| *e <= self.bytes.len());
        let Some(end) = end else {
            return Err(DecodeError::new(format!(
                "persistent state record: truncated at byte {}",
                self.pos
            )));
        };
        let out = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(out)
    }
    fn take<const N: usize>(&mut self) -> std::result::Result<[u8; N], DecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.slice(N)?);
        Ok(out)
    }
    fn u8(&mut self) -> std::result::Result<u8, DecodeError> {
        Ok(self.take::<1>()?[0])
    }
}

/// What the index found at open.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct StatesOpenStats {
    /// Records in the index.
    pub recorded: usize,
    /// State files that had no record and were indexed now.
    pub indexed_files: usize,
    /// Temp files of unfinished writes that were removed.
    pub removed_temp_files: usize,
    /// Unrecorded split states whose manifest is invalid: not indexed, not served, left on disk.
    pub rejected_files: usize,
}

/// The persistent-state index and its files.
pub struct PersistentStateStorage {
    db: Arc<CoreDb>,
    handles: Arc<BlockHandleStorage>,
    dir: PathBuf,
}

fn flag_of(kind: StateKind) -> BlockFlags {
    match kind {
        StateKind::Shard => BlockFlags::HAS_PERSISTENT_SHARD_STATE,
        StateKind::Queue => BlockFlags::HAS_PERSISTENT_QUEUE_STATE,
    }
}

/// A name that stays inside `states/` when joined to it: one path component, not hidden, no separator, no
/// NUL. Names read from the database are checked, so a tampered record cannot make the node serve or
/// overwrite a file elsewhere.
fn is_plain_file_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && !name.starts_with('.')
        && !name.contains(['/', '\\', '\0'])
        && Path::new(name).file_name() == Some(std::ffi::OsStr::new(name))
}

fn temp_name(name: &str) -> String {
    format!(".{name}.tmp")
}

impl PersistentStateStorage {
    pub(crate) fn open(
        db: Arc<CoreDb>,
        handles: Arc<BlockHandleStorage>,
        root: &Path,
        read_only: bool,
    ) -> Result<(Self, StatesOpenStats)> {
        let this = Self {
            db,
            handles,
            dir: root.join(STATES_DIR),
        };
        let mut stats = StatesOpenStats::default();
        if !read_only {
            this.recover(&mut stats)?;
        }
        stats.recorded = this.list()?.len();
        Ok((this, stats))
    }

    /// The directory of the state files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The path of a recorded state's file, or of one of its parts.
    pub fn file_path(&self, record: &PersistentStateRecord, part: StatePart) -> Option<PathBuf> {
        match (part, record.split_depth) {
            (StatePart::Unsplit, 0) | (StatePart::SplitRoot, 1..) => {
                Some(self.dir.join(&record.file))
            }
            (StatePart::SplitPart(prefix), 1..)
                if record.parts.iter().any(|p| p.prefix == prefix) =>
            {
                state_object_name(&record.block, record.kind, part).map(|n| self.dir.join(n))
            }
            _ => None,
        }
    }

    /// The record of a state, if any.
    pub fn get(&self, block: &BlockId, kind: StateKind) -> Result<Option<PersistentStateRecord>> {
        let key = PersistentStateKey(BlockKey::of(block), kind);
        match self.db.get::<PersistentStates>(&key)? {
            Some(value) if value.file_hash == block.file_hash => {
                Ok(Some(record_of(*block, kind, value)))
            }
            _ => Ok(None),
        }
    }

    /// Every record, in block key order.
    pub fn list(&self) -> Result<Vec<PersistentStateRecord>> {
        let mut out = Vec::new();
        for row in self.db.iter::<PersistentStates>(KeyRange::all()) {
            let (key, value) = row?;
            let block = key.0.to_block_id(value.file_hash)?;
            out.push(record_of(block, key.1, value));
        }
        Ok(out)
    }

    /// Writes an unsplit state file (already in its served form: zstd-compressed) and records it: temp
    /// file, fsync, rename, fsync of the directory, then the record and the handle's persistent-state flag
    /// in one batch. Re-storing a recorded state replaces it.
    pub fn store(
        &self,
        block: &BlockId,
        kind: StateKind,
        bytes: &[u8],
    ) -> Result<PersistentStateRecord> {
        let name = state_object_name(block, kind, StatePart::Unsplit).ok_or_else(|| {
            StorageError::Inconsistent(format!("no unsplit {kind:?} state name for {block}"))
        })?;
        self.write_file(&name, bytes)?;
        let record = PersistentStateRecord {
            block: *block,
            kind,
            file: name,
            size: bytes.len() as u64,
            chunk_size: STATE_CHUNK_SIZE,
            split_depth: 0,
            parts: Vec::new(),
        };
        self.record(&record)?;
        Ok(record)
    }

    /// Writes a split shard state (every file already zstd-compressed) and records it: the parts, then the
    /// manifest, then the root, each through a synced temp file and a rename (a crash before the root leaves
    /// files that are not a state: an unrecorded root is indexed only with its manifest and every part), then
    /// the record and the handle flag in one batch. `parts` are (prefix, file), valid per §7.8.
    pub fn store_split(
        &self,
        block: &BlockId,
        split_depth: u8,
        root: &[u8],
        parts: &[(u64, &[u8])],
    ) -> Result<PersistentStateRecord> {
        let mut prefixes: Vec<u64> = parts.iter().map(|(p, _)| *p).collect();
        prefixes.sort_unstable();
        regolith_formats::persistent_state::validate_split_parts(
            block,
            StateKind::Shard,
            split_depth,
            &prefixes,
        )
        .map_err(|reason| {
            StorageError::Inconsistent(format!("the split state of {block}: {reason}"))
        })?;
        let mut records = Vec::with_capacity(parts.len());
        for (prefix, bytes) in parts {
            let name = state_object_name(block, StateKind::Shard, StatePart::SplitPart(*prefix))
                .unwrap_or_default();
            self.write_file(&name, bytes)?;
            records.push(StatePartRecord {
                prefix: *prefix,
                size: bytes.len() as u64,
            });
        }
        records.sort_unstable_by_key(|p| p.prefix);
        let listed: Vec<String> = prefixes.iter().map(|p| format!("\"{p:016x}\"")).collect();
        let manifest = format!(
            r#"{{"version":1,"split_depth":{split_depth},"parts":[{}]}}"#,
            listed.join(",")
        );
        self.write_file(&manifest_object_name(block), manifest.as_bytes())?;
        let name =
            state_object_name(block, StateKind::Shard, StatePart::SplitRoot).unwrap_or_default();
        self.write_file(&name, root)?;
        let record = PersistentStateRecord {
            block: *block,
            kind: StateKind::Shard,
            file: name,
            size: root.len() as u64,
            chunk_size: STATE_CHUNK_SIZE,
            split_depth,
            parts: records,
        };
        self.record(&record)?;
        Ok(record)
    }

    /// Removes a recorded state (rotation): its record first, then its files. A crash in between leaves files
    /// without a record, which the next open indexes again, so the state is served again until a later
    /// removal; a record never outlives its files. The handle's flags stay (flags are never cleared).
    pub fn remove(&self, record: &PersistentStateRecord) -> Result<()> {
        let key = PersistentStateKey(BlockKey::of(&record.block), record.kind);
        self.db.delete::<PersistentStates>(&key)?;
        let mut names = vec![record.file.clone()];
        if record.split_depth > 0 {
            names.push(manifest_object_name(&record.block));
            for part in &record.parts {
                if let Some(name) = state_object_name(
                    &record.block,
                    record.kind,
                    StatePart::SplitPart(part.prefix),
                ) {
                    names.push(name);
                }
            }
        }
        for name in names {
            let path = self.dir.join(&name);
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(StorageError::Io {
                        context: format!("removing {}", path.display()),
                        source: e,
                    })
                }
            }
        }
        fsync_dir(&self.dir)
    }

    /// `states/<name>` ← `bytes`: temp file, fsync, rename, fsync of the directory.
    fn write_file(&self, name: &str, bytes: &[u8]) -> Result<()> {
        std::fs::create_dir_all(&self.dir)
            .map_err(StorageError::io(format!("creating {}", self.dir.display())))?;
        let tmp = self.dir.join(temp_name(name));
        let path = self.dir.join(name);
        {
            let io = |what: &str| StorageError::io(format!("{what} {}", tmp.display()));
            let mut file = std::fs::File::create(&tmp).map_err(io("creating"))?;
            file.write_all(bytes).map_err(io("writing"))?;
            file.sync_all().map_err(io("syncing"))?;
        }
        self.db
            .fail_points
            .state_after_tmp
            .check("persistent state after the temp file")?;
        std::fs::rename(&tmp, &path).map_err(StorageError::io(format!(
            "renaming {} to {}",
            tmp.display(),
            path.display()
        )))?;
        fsync_dir(&self.dir)?;
        self.db
            .fail_points
            .state_after_rename
            .check("persistent state after the rename")?;
        Ok(())
    }

    /// Writes the record and sets the handle flag (when the block has a handle) in one batch.
    fn record(&self, record: &PersistentStateRecord) -> Result<()> {
        let mut batch = Batch::new();
        let key = PersistentStateKey(BlockKey::of(&record.block), record.kind);
        let value = PersistentStateValue {
            file_hash: record.block.file_hash,
            file: record.file.clone(),
            size: record.size,
            chunk_size: record.chunk_size,
            split_depth: record.split_depth,
            parts: record.parts.clone(),
        };
        self.db
            .batch_put::<PersistentStates>(&mut batch, &key, &value);
        let handle = self.handles.load_handle(&record.block)?;
        let flag = flag_of(record.kind);
        let mut flagged = None;
        if let Some(handle) = &handle {
            if !handle.is_removed() && !handle.meta().load().flags.contains(flag) {
                let mut meta = handle.meta().load();
                meta.flags = meta.flags | flag;
                self.db.batch_merge::<BlockHandles>(
                    &mut batch,
                    &StoredHash(record.block.root_hash),
                    &meta.into(),
                );
                flagged = Some(handle);
            }
        }
        self.db.write(
            batch,
            format_args!("recording the {:?} state of {}", record.kind, record.block),
        )?;
        if let Some(handle) = flagged {
            handle.meta().add_flags(flag);
        }
        Ok(())
    }

    /// Removes temp files of unfinished writes and indexes state files without a record.
    fn recover(&self, stats: &mut StatesOpenStats) -> Result<()> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => {
                return Err(StorageError::Io {
                    context: format!("listing {}", self.dir.display()),
                    source: e,
                })
            }
        };
        let mut names = Vec::new();
        for entry in entries {
            let entry =
                entry.map_err(StorageError::io(format!("listing {}", self.dir.display())))?;
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            names.push(name);
        }
        names.sort();
        let mut removed_any = false;
        for name in &names {
            let Some(target) = name.strip_prefix('.').and_then(|n| n.strip_suffix(".tmp")) else {
                continue;
            };
            if parse_state_object_name(target).is_none() {
                continue;
            }
            let path = self.dir.join(name);
            std::fs::remove_file(&path)
                .map_err(StorageError::io(format!("removing {}", path.display())))?;
            tracing::info!(file = %path.display(), "removed the temp file of an unfinished state write");
            stats.removed_temp_files += 1;
            removed_any = true;
        }
        if removed_any {
            fsync_dir(&self.dir)?;
        }
        for name in &names {
            let Some(object) = parse_state_object_name(name) else {
                continue;
            };
            let (block, kind) = match object {
                StateObject::State(block, kind, StatePart::Unsplit) => (block, kind),
                StateObject::State(block, StateKind::Shard, StatePart::SplitRoot) => {
                    (block, StateKind::Shard)
                }
                // Parts and manifests belong to a split root.
                _ => continue,
            };
            if self.get(&block, kind)?.is_some() {
                continue;
            }
            match self.describe_file(&block, kind, name) {
                Ok(Some(record)) => {
                    self.record(&record)?;
                    tracing::info!(block = %block, kind = ?kind, file = name, "indexed a state file");
                    stats.indexed_files += 1;
                }
                Ok(None) => {}
                Err(StorageError::Corruption { what, reason }) => {
                    tracing::error!(
                        file = name,
                        manifest = what,
                        reason,
                        "a split state with an invalid manifest is not indexed"
                    );
                    stats.rejected_files += 1;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Describes an unrecorded file: an unsplit state, or a split root with its manifest and every part.
    /// An empty file or an incomplete split state is not a state (it is left as it is and logged).
    fn describe_file(
        &self,
        block: &BlockId,
        kind: StateKind,
        name: &str,
    ) -> Result<Option<PersistentStateRecord>> {
        let size = self.file_len(name)?;
        if size == 0 {
            tracing::warn!(file = name, "an empty state file is not indexed");
            return Ok(None);
        }
        let mut record = PersistentStateRecord {
            block: *block,
            kind,
            file: name.to_owned(),
            size,
            chunk_size: STATE_CHUNK_SIZE,
            split_depth: 0,
            parts: Vec::new(),
        };
        if !name.ends_with(".boc.split") {
            return Ok(Some(record));
        }
        let manifest_name = manifest_object_name(block);
        let manifest_path = self.dir.join(&manifest_name);
        let manifest = match std::fs::read(&manifest_path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                tracing::warn!(
                    file = name,
                    "a split state root without a manifest is not indexed"
                );
                return Ok(None);
            }
            Err(e) => {
                return Err(StorageError::Io {
                    context: format!("reading {}", manifest_path.display()),
                    source: e,
                })
            }
        };
        let (split_depth, prefixes) =
            SplitManifest::parse(&manifest, block).map_err(|reason| StorageError::Corruption {
                what: manifest_name.clone(),
                reason,
            })?;
        record.split_depth = split_depth;
        let mut prefixes = prefixes;
        prefixes.sort_unstable();
        for prefix in prefixes {
            let part_name =
                state_object_name(block, kind, StatePart::SplitPart(prefix)).unwrap_or_default();
            let part_size = match std::fs::metadata(self.dir.join(&part_name)) {
                Ok(m) if m.len() > 0 => m.len(),
                _ => {
                    tracing::warn!(
                        file = name,
                        part = part_name,
                        "a split state with a missing part is not indexed"
                    );
                    return Ok(None);
                }
            };
            record.parts.push(StatePartRecord {
                prefix,
                size: part_size,
            });
        }
        Ok(Some(record))
    }

    fn file_len(&self, name: &str) -> Result<u64> {
        let path = self.dir.join(name);
        std::fs::metadata(&path)
            .map(|m| m.len())
            .map_err(StorageError::io(format!(
                "reading the size of {}",
                path.display()
            )))
    }
}

fn record_of(
    block: BlockId,
    kind: StateKind,
    value: PersistentStateValue,
) -> PersistentStateRecord {
    PersistentStateRecord {
        block,
        kind,
        file: value.file,
        size: value.size,
        chunk_size: value.chunk_size,
        split_depth: value.split_depth,
        parts: value.parts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_round_trip_and_corruption() {
        let value = PersistentStateValue {
            file_hash: regolith_formats::HashBytes([9; 32]),
            file: "x.boc.split".into(),
            size: 77,
            chunk_size: STATE_CHUNK_SIZE,
            split_depth: 1,
            parts: vec![
                StatePartRecord {
                    prefix: 0x4000000000000000,
                    size: 5,
                },
                StatePartRecord {
                    prefix: 0xc000000000000000,
                    size: 6,
                },
            ],
        };
        let bytes = value.encode();
        assert_eq!(PersistentStateValue::decode(&bytes).unwrap(), value);
        for n in 0..bytes.len() {
            assert!(PersistentStateValue::decode(&bytes[..n]).is_err(), "{n}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(PersistentStateValue::decode(&longer).is_err());
        let mut other_version = bytes;
        other_version[0] = 2;
        assert!(PersistentStateValue::decode(&other_version).is_err());
    }
}

#[cfg(test)]
mod name_tests {
    use super::*;

    fn with_name(file: &str) -> Vec<u8> {
        PersistentStateValue {
            file_hash: regolith_formats::HashBytes([9; 32]),
            file: file.into(),
            size: 1,
            chunk_size: STATE_CHUNK_SIZE,
            split_depth: 0,
            parts: Vec::new(),
        }
        .encode()
    }

    #[test]
    fn a_record_whose_file_is_not_a_plain_name_in_states_is_refused() {
        for name in [
            "../node.json",
            "/etc/passwd",
            "a/b.boc",
            "..",
            ".",
            "",
            ".hidden.boc",
            "a\\b.boc",
            "a\0b.boc",
        ] {
            let err = PersistentStateValue::decode(&with_name(name))
                .expect_err(&format!("{name:?} is refused"));
            assert!(
                err.to_string().contains("plain file name"),
                "{name:?}: {err}"
            );
        }
        let ok = "0000000000000000_-1_8000000000000000_5_00ff.boc";
        assert_eq!(
            PersistentStateValue::decode(&with_name(ok)).unwrap().file,
            ok
        );
    }
}
