//! The storage provider (§4.2): archives from [`regolith_storage::Storage`], persistent states from the
//! storage's persistent-state index and the files it records (laid out like the S3 keys of §4.3.2).

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use regolith_storage::{
    ArchiveInfo as StoredArchiveInfo, PersistentStateRecord, Storage, StorageError,
};
use tokio::sync::Semaphore;
use tycho_types::models::BlockId;

use super::{
    ArchiveLookup, RpcDataProvider, StateChunkRequest, StateInfo, StateKind, StatePartInfo,
};
use crate::error::{ProviderError, ProviderResult};

/// Chunk size of archives and states served from storage: 1 MiB.
pub const STORAGE_CHUNK_SIZE: u64 = regolith_storage::STATE_CHUNK_SIZE;

fn state_info(record: &PersistentStateRecord) -> StateInfo {
    StateInfo {
        size: record.size,
        chunk_size: record.chunk_size,
        split_depth: record.split_depth,
        parts: record
            .parts
            .iter()
            .map(|p| StatePartInfo {
                prefix: p.prefix,
                size: p.size,
            })
            .collect(),
    }
}

/// Reads `[offset, offset + chunk_size)` of a recorded state's file (or part): a misaligned offset, an
/// unknown part or `offset > len` → None; `offset == len` → empty.
fn read_state_chunk(
    storage: &Storage,
    request: &StateChunkRequest,
) -> ProviderResult<Option<Bytes>> {
    use std::os::unix::fs::FileExt;
    let StateChunkRequest {
        block,
        kind,
        part,
        offset,
    } = *request;
    let states = storage.persistent_states();
    let Some(record) = states.get(&block, kind)? else {
        return Ok(None);
    };
    let chunk_size = record.chunk_size.max(1);
    if !offset.is_multiple_of(chunk_size) {
        return Ok(None);
    }
    let Some(path) = states.file_path(&record, part) else {
        return Ok(None);
    };
    let name = path.display().to_string();
    let io = |context: String| move |source| ProviderError::Io { context, source };
    let file = std::fs::File::open(&path).map_err(io(format!("opening state file {name}")))?;
    let len = file
        .metadata()
        .map_err(io(format!("reading {name}")))?
        .len();
    if offset > len {
        return Ok(None);
    }
    let n = (len - offset).min(chunk_size) as usize;
    let mut buf = vec![0u8; n];
    file.read_exact_at(&mut buf, offset)
        .map_err(io(format!("reading {name} at {offset}")))?;
    Ok(Some(Bytes::from(buf)))
}

/// Serves archives from the block storage and the persistent states it records (§4.2).
#[derive(Clone)]
pub struct StorageProvider {
    storage: Storage,
    state_reads: Arc<Semaphore>,
}

impl StorageProvider {
    /// A provider over `storage`; at most `max_parallel_state_reads` state reads run at once.
    pub fn new(storage: Storage, max_parallel_state_reads: usize) -> Self {
        Self {
            storage,
            state_reads: Arc::new(Semaphore::new(max_parallel_state_reads.max(1))),
        }
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
        let _permit = self.state_reads.clone().acquire_owned().await;
        Ok(self
            .storage
            .persistent_states()
            .get(block, kind)?
            .map(|record| state_info(&record)))
    }

    async fn state_chunk(&self, request: &StateChunkRequest) -> ProviderResult<Option<Bytes>> {
        let _permit = self.state_reads.clone().acquire_owned().await;
        let storage = self.storage.clone();
        let request = *request;
        blocking(move || read_state_chunk(&storage, &request)).await
    }
}

#[cfg(test)]
mod tests {
    use regolith_storage::StorageConfig;
    use tycho_types::models::ShardIdent;
    use tycho_types::prelude::HashBytes;

    use super::*;
    use crate::providers::{block_key_text, StatePart};

    fn block() -> BlockId {
        BlockId {
            shard: ShardIdent::new_full(0),
            seqno: 10,
            root_hash: HashBytes([1; 32]),
            file_hash: HashBytes([2; 32]),
        }
    }

    const MIB: u64 = STORAGE_CHUNK_SIZE;

    fn open(dir: &std::path::Path) -> StorageProvider {
        StorageProvider::new(Storage::open(StorageConfig::new(dir)).unwrap(), 2)
    }

    #[tokio::test]
    async fn state_chunks_follow_4_2_3() {
        let dir = tempfile::tempdir().unwrap();
        let provider = open(dir.path());
        let id = block();
        let states = provider.storage.persistent_states();
        states.store(&id, Shard, &vec![7u8; MIB as usize]).unwrap();
        states.store(&id, Queue, &[8u8; 10]).unwrap();
        use StateKind::*;
        use StatePart::*;
        let chunk = |offset, kind, part| {
            let provider = provider.clone();
            async move {
                provider
                    .state_chunk(&StateChunkRequest::new(&id, offset, kind, part))
                    .await
                    .unwrap()
            }
        };
        assert_eq!(chunk(0, Shard, Unsplit).await.unwrap().len() as u64, MIB);
        assert_eq!(
            chunk(MIB, Shard, Unsplit).await.unwrap().len(),
            0,
            "offset == len"
        );
        assert_eq!(chunk(2 * MIB, Shard, Unsplit).await, None, "offset > len");
        assert_eq!(chunk(5, Shard, Unsplit).await, None, "misaligned");
        assert_eq!(chunk(0, Queue, Unsplit).await.unwrap().len(), 10);
        assert_eq!(chunk(0, Queue, SplitRoot).await, None, "a part of a queue");
        assert_eq!(chunk(0, Shard, SplitRoot).await, None, "not a split state");
        assert_eq!(
            chunk(0, Shard, SplitPart(1 << 62)).await,
            None,
            "unknown part"
        );
        let other = BlockId {
            seqno: 11,
            ..block()
        };
        assert_eq!(
            provider
                .state_chunk(&StateChunkRequest::new(&other, 0, Shard, Unsplit))
                .await
                .unwrap(),
            None,
            "unknown state"
        );

        let info = provider.state_info(&id, Shard).await.unwrap().unwrap();
        assert_eq!(
            (info.size, info.chunk_size, info.split_depth),
            (MIB, MIB, 0)
        );
        assert_eq!(
            provider.state_info(&id, Queue).await.unwrap().unwrap().size,
            10
        );
        assert_eq!(provider.state_info(&other, Shard).await.unwrap(), None);
    }

    #[tokio::test]
    async fn a_file_without_a_record_is_not_served_until_indexed_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let id = block();
        let name = format!("{}.boc", block_key_text(&id));
        {
            let provider = open(dir.path());
            std::fs::create_dir_all(dir.path().join("states")).unwrap();
            std::fs::write(dir.path().join("states").join(&name), b"state").unwrap();
            assert_eq!(
                provider.state_info(&id, StateKind::Shard).await.unwrap(),
                None,
                "a file alone is not a state"
            );
        }
        let provider = open(dir.path());
        assert_eq!(
            provider.storage.open_stats().states.indexed_files,
            1,
            "indexed at start"
        );
        let info = provider.state_info(&id, StateKind::Shard).await.unwrap();
        assert_eq!(info.map(|i| i.size), Some(5));
    }

    #[tokio::test]
    async fn split_states_need_a_valid_manifest_and_every_part() {
        let dir = tempfile::tempdir().unwrap();
        let id = block();
        let b = block_key_text(&id);
        let states_dir = dir.path().join("states");
        std::fs::create_dir_all(&states_dir).unwrap();
        let write =
            |name: String, data: &[u8]| std::fs::write(states_dir.join(name), data).unwrap();
        write(format!("{b}.boc.split"), b"root");
        write(format!("{b}_part_4000000000000000.boc"), b"left part");
        write(
            format!("{b}.meta.json"),
            br#"{"version":1,"split_depth":1,"parts":["4000000000000000","c000000000000000"]}"#,
        );
        {
            let provider = open(dir.path());
            assert_eq!(
                provider.state_info(&id, StateKind::Shard).await.unwrap(),
                None,
                "a part is missing"
            );
        }
        write(format!("{b}_part_c000000000000000.boc"), b"right");
        let provider = open(dir.path());
        let info = provider
            .state_info(&id, StateKind::Shard)
            .await
            .unwrap()
            .unwrap();
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
        let part = provider
            .state_chunk(&StateChunkRequest::new(
                &id,
                0,
                StateKind::Shard,
                StatePart::SplitPart(0xc000000000000000),
            ))
            .await
            .unwrap();
        assert_eq!(part.as_deref(), Some(&b"right"[..]));
        let root = provider
            .state_chunk(&StateChunkRequest::new(
                &id,
                0,
                StateKind::Shard,
                StatePart::SplitRoot,
            ))
            .await
            .unwrap();
        assert_eq!(root.as_deref(), Some(&b"root"[..]));
        drop(provider);

        // a prefix at the wrong depth, a duplicate or an unknown version: reported at start, not indexed
        for manifest in [
            &br#"{"version":1,"split_depth":2,"parts":["4000000000000000"]}"#[..],
            br#"{"version":1,"split_depth":1,"parts":["4000000000000000","4000000000000000"]}"#,
            br#"{"version":2,"split_depth":1,"parts":["4000000000000000"]}"#,
            br#"{"version":1,"split_depth":7,"parts":[]}"#,
            br#"{"version":1,"split_depth":1,"parts":["40000000000000"]}"#,
            b"not json",
        ] {
            let fresh = tempfile::tempdir().unwrap();
            let fresh_states = fresh.path().join("states");
            std::fs::create_dir_all(&fresh_states).unwrap();
            std::fs::write(fresh_states.join(format!("{b}.boc.split")), b"root").unwrap();
            std::fs::write(fresh_states.join(format!("{b}.meta.json")), manifest).unwrap();
            let provider = open(fresh.path());
            let what = String::from_utf8_lossy(manifest);
            assert_eq!(
                provider.storage.open_stats().states.rejected_files,
                1,
                "{what}"
            );
            assert_eq!(
                provider.state_info(&id, StateKind::Shard).await.unwrap(),
                None,
                "{what}"
            );
        }
    }
}
