//! The storage provider (§4.2): archives from [`regolith_storage::Storage`], persistent states from a
//! directory of state files laid out like the S3 keys of §4.3.2 (`{B}.boc`, `{B}.queue`, `{B}.boc.split`,
//! `{B}_part_{prefix:016x}.boc`, `{B}.meta.json`).

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use regolith_storage::{ArchiveInfo as StoredArchiveInfo, Storage, StorageError};
use tokio::sync::Semaphore;
use tycho_types::models::BlockId;

use super::{
    manifest_object_name, state_object_name, ArchiveLookup, RpcDataProvider, SplitManifest,
    StateInfo, StateKind, StatePart, StatePartInfo,
};
use crate::error::{ProviderError, ProviderResult};

/// Chunk size of archives and states served from storage: 1 MiB.
pub const STORAGE_CHUNK_SIZE: u64 = 1 << 20;

/// Persistent-state files in a directory (the descriptors of §4.2.3).
#[derive(Clone)]
pub struct PersistentStateFiles {
    dir: PathBuf,
    reads: Arc<Semaphore>,
}

impl PersistentStateFiles {
    /// State files under `dir`; at most `max_parallel_reads` reads run at once.
    pub fn new(dir: impl Into<PathBuf>, max_parallel_reads: usize) -> Self {
        Self {
            dir: dir.into(),
            reads: Arc::new(Semaphore::new(max_parallel_reads.max(1))),
        }
    }

    fn file_len(&self, name: &str) -> ProviderResult<Option<u64>> {
        match std::fs::metadata(self.dir.join(name)) {
            Ok(m) if m.is_file() => Ok(Some(m.len())),
            Ok(_) => Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(ProviderError::Io {
                context: format!("reading the size of state file {name}"),
                source: e,
            }),
        }
    }

    fn info(&self, block: &BlockId, kind: StateKind) -> ProviderResult<Option<StateInfo>> {
        let unsplit = |size| StateInfo {
            size,
            chunk_size: STORAGE_CHUNK_SIZE,
            split_depth: 0,
            parts: Vec::new(),
        };
        if kind == StateKind::Queue {
            let name = state_object_name(block, kind, StatePart::Unsplit).unwrap_or_default();
            return Ok(self.file_len(&name)?.filter(|s| *s > 0).map(unsplit));
        }
        let manifest_name = manifest_object_name(block);
        let manifest = match std::fs::read(self.dir.join(&manifest_name)) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let name = state_object_name(block, kind, StatePart::Unsplit).unwrap_or_default();
                return Ok(self.file_len(&name)?.filter(|s| *s > 0).map(unsplit));
            }
            Err(e) => {
                return Err(ProviderError::Io {
                    context: format!("reading {manifest_name}"),
                    source: e,
                })
            }
        };
        let (split_depth, prefixes) = SplitManifest::parse(&manifest, block).map_err(|reason| {
            ProviderError::InvalidManifest {
                key: manifest_name.clone(),
                reason,
            }
        })?;
        let root = state_object_name(block, kind, StatePart::SplitRoot).unwrap_or_default();
        let Some(size) = self.file_len(&root)?.filter(|s| *s > 0) else {
            return Ok(None);
        };
        let mut parts = Vec::with_capacity(prefixes.len());
        for prefix in prefixes {
            let name =
                state_object_name(block, kind, StatePart::SplitPart(prefix)).unwrap_or_default();
            let Some(part_size) = self.file_len(&name)?.filter(|s| *s > 0) else {
                return Ok(None);
            };
            parts.push(StatePartInfo {
                prefix,
                size: part_size,
            });
        }
        Ok(Some(StateInfo {
            size,
            chunk_size: STORAGE_CHUNK_SIZE,
            split_depth,
            parts,
        }))
    }

    fn chunk(
        &self,
        block: &BlockId,
        offset: u64,
        kind: StateKind,
        part: StatePart,
    ) -> ProviderResult<Option<Bytes>> {
        use std::os::unix::fs::FileExt;
        if !offset.is_multiple_of(STORAGE_CHUNK_SIZE) {
            return Ok(None);
        }
        let Some(name) = state_object_name(block, kind, part) else {
            return Ok(None);
        };
        let path = self.dir.join(&name);
        let file = match std::fs::File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(ProviderError::Io {
                    context: format!("opening state file {name}"),
                    source: e,
                })
            }
        };
        let io = |context: String| move |source| ProviderError::Io { context, source };
        let len = file
            .metadata()
            .map_err(io(format!("reading {name}")))?
            .len();
        if offset > len {
            return Ok(None);
        }
        let n = (len - offset).min(STORAGE_CHUNK_SIZE) as usize;
        let mut buf = vec![0u8; n];
        file.read_exact_at(&mut buf, offset)
            .map_err(io(format!("reading {name} at {offset}")))?;
        Ok(Some(Bytes::from(buf)))
    }
}

/// Serves archives from the block storage and persistent states from state files (§4.2).
#[derive(Clone)]
pub struct StorageProvider {
    storage: Storage,
    states: Option<PersistentStateFiles>,
}

impl StorageProvider {
    /// A provider over `storage`; without `states` every state is absent.
    pub fn new(storage: Storage, states: Option<PersistentStateFiles>) -> Self {
        Self { storage, states }
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> ProviderResult<T> + Send + 'static,
) -> ProviderResult<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ProviderError::Internal(format!("blocking read failed: {e}")))?
}

#[async_trait]
impl RpcDataProvider for StorageProvider {
    async fn archive_info(&self, mc_seqno: u32) -> ProviderResult<ArchiveLookup> {
        let last = self
            .storage
            .node_state()
            .load_last_mc_block_id()?
            .ok_or(ProviderError::NotReady)?;
        Ok(
            match self.storage.archives().archive_info(mc_seqno, last.seqno)? {
                StoredArchiveInfo::Found {
                    id,
                    size,
                    chunk_size,
                } => ArchiveLookup::Found {
                    id,
                    size,
                    chunk_size,
                },
                StoredArchiveInfo::TooNew => ArchiveLookup::TooNew,
                StoredArchiveInfo::NotFound => ArchiveLookup::NotFound,
            },
        )
    }

    async fn archive_chunk(&self, archive_id: u32, offset: u64) -> ProviderResult<Bytes> {
        if !offset.is_multiple_of(STORAGE_CHUNK_SIZE) {
            return Err(ProviderError::MisalignedOffset {
                offset,
                chunk_size: STORAGE_CHUNK_SIZE,
            });
        }
        let storage = self.storage.clone();
        blocking(move || {
            storage
                .archives()
                .get_archive_chunk(archive_id, offset)
                .map_err(|e| match e {
                    StorageError::ArchiveNotFound(id) => ProviderError::ArchiveNotFound(id.into()),
                    e => e.into(),
                })
        })
        .await
    }

    async fn state_info(
        &self,
        block: &BlockId,
        kind: StateKind,
    ) -> ProviderResult<Option<StateInfo>> {
        let Some(states) = self.states.clone() else {
            return Ok(None);
        };
        let block = *block;
        let _permit = states.reads.clone().acquire_owned().await;
        blocking(move || states.info(&block, kind)).await
    }

    async fn state_chunk(
        &self,
        block: &BlockId,
        offset: u64,
        kind: StateKind,
        part: StatePart,
    ) -> ProviderResult<Option<Bytes>> {
        let Some(states) = self.states.clone() else {
            return Ok(None);
        };
        let block = *block;
        let _permit = states.reads.clone().acquire_owned().await;
        blocking(move || states.chunk(&block, offset, kind, part)).await
    }
}

#[cfg(test)]
mod tests {
    use tycho_types::models::ShardIdent;
    use tycho_types::prelude::HashBytes;

    use super::*;
    use crate::providers::block_key_text;

    fn block() -> BlockId {
        BlockId {
            shard: ShardIdent::new_full(0),
            seqno: 10,
            root_hash: HashBytes([1; 32]),
            file_hash: HashBytes([2; 32]),
        }
    }

    const MIB: u64 = STORAGE_CHUNK_SIZE;

    #[test]
    fn state_chunks_follow_4_2_3() {
        let dir = tempfile::tempdir().unwrap();
        let b = block_key_text(&block());
        std::fs::write(dir.path().join(format!("{b}.boc")), vec![7u8; MIB as usize]).unwrap();
        std::fs::write(dir.path().join(format!("{b}.queue")), vec![8u8; 10]).unwrap();
        let files = PersistentStateFiles::new(dir.path(), 2);
        let id = block();
        let chunk = |offset, kind, part| files.chunk(&id, offset, kind, part).unwrap();
        use StateKind::*;
        use StatePart::*;
        assert_eq!(chunk(0, Shard, Unsplit).unwrap().len() as u64, MIB);
        assert_eq!(
            chunk(MIB, Shard, Unsplit).unwrap().len(),
            0,
            "offset == len"
        );
        assert_eq!(chunk(2 * MIB, Shard, Unsplit), None, "offset > len");
        assert_eq!(chunk(5, Shard, Unsplit), None, "misaligned");
        assert_eq!(chunk(0, Queue, Unsplit).unwrap().len(), 10);
        assert_eq!(chunk(0, Queue, SplitRoot), None, "a part of a queue");
        assert_eq!(chunk(0, Shard, SplitRoot), None, "unknown state");
        assert_eq!(chunk(0, Shard, SplitPart(1 << 62)), None, "unknown part");

        let info = files.info(&id, Shard).unwrap().unwrap();
        assert_eq!(
            (info.size, info.chunk_size, info.split_depth),
            (MIB, MIB, 0)
        );
        assert_eq!(files.info(&id, Queue).unwrap().unwrap().size, 10);
    }

    #[test]
    fn split_states_need_a_valid_manifest_and_every_part() {
        let dir = tempfile::tempdir().unwrap();
        let id = block();
        let b = block_key_text(&id);
        let write =
            |name: String, data: &[u8]| std::fs::write(dir.path().join(name), data).unwrap();
        write(format!("{b}.boc.split"), b"root");
        write(format!("{b}_part_4000000000000000.boc"), b"left part");
        write(
            format!("{b}.meta.json"),
            br#"{"version":1,"split_depth":1,"parts":["4000000000000000","c000000000000000"]}"#,
        );
        let files = PersistentStateFiles::new(dir.path(), 2);
        assert_eq!(
            files.info(&id, StateKind::Shard).unwrap(),
            None,
            "a part is missing"
        );
        write(format!("{b}_part_c000000000000000.boc"), b"right");
        let info = files.info(&id, StateKind::Shard).unwrap().unwrap();
        assert_eq!(info.split_depth, 1);
        assert_eq!(info.size, 4);
        assert_eq!(
            info.parts,
            vec![
                StatePartInfo {
                    prefix: 0x4000000000000000,
                    size: 9
                },
                StatePartInfo {
                    prefix: 0xc000000000000000,
                    size: 5
                },
            ]
        );
        let part = files
            .chunk(
                &id,
                0,
                StateKind::Shard,
                StatePart::SplitPart(0xc000000000000000),
            )
            .unwrap();
        assert_eq!(part.as_deref(), Some(&b"right"[..]));

        // a prefix at the wrong depth, a duplicate or an unknown version is an error
        for manifest in [
            &br#"{"version":1,"split_depth":2,"parts":["4000000000000000"]}"#[..],
            br#"{"version":1,"split_depth":1,"parts":["4000000000000000","4000000000000000"]}"#,
            br#"{"version":2,"split_depth":1,"parts":["4000000000000000"]}"#,
            br#"{"version":1,"split_depth":7,"parts":[]}"#,
            br#"{"version":1,"split_depth":1,"parts":["40000000000000"]}"#,
            b"not json",
        ] {
            write(format!("{b}.meta.json"), manifest);
            assert!(
                files.info(&id, StateKind::Shard).is_err(),
                "{}",
                String::from_utf8_lossy(manifest)
            );
        }
    }
}
