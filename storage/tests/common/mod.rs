//! Shared helpers of the storage integration tests: temp storages, synthetic ids, archive_1 ingestion.
#![allow(dead_code)]

use bytes::Bytes;
use regolith_formats::archive::{ArchiveEntryType, ArchiveReader};
use regolith_formats::{BlockId, HashBytes, ShardIdent};
use regolith_storage::{NewBlockMeta, Storage, StorageConfig};
use regolith_test_support::{archive_1_bytes, fixture_bytes};
use tempfile::TempDir;

/// The bytes of a fixture file, for `benches/storage.rs`, which includes this module and names it so.
pub(crate) fn fixture(name: &str) -> Vec<u8> {
    fixture_bytes(name)
}

/// A storage in a temp dir that can be reopened.
pub(crate) struct TempStorage {
    pub dir: TempDir,
    pub config: StorageConfig,
    pub storage: Option<Storage>,
}

impl TempStorage {
    pub(crate) fn new() -> Self {
        Self::with_config(|_| {})
    }

    pub(crate) fn with_config(f: impl FnOnce(&mut StorageConfig)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut config = StorageConfig::new(dir.path());
        f(&mut config);
        let storage = Storage::open(config.clone()).unwrap();
        Self {
            dir,
            config,
            storage: Some(storage),
        }
    }

    pub(crate) fn s(&self) -> &Storage {
        self.storage.as_ref().unwrap()
    }

    pub(crate) fn close(&mut self) {
        self.storage.take();
    }

    pub(crate) fn reopen(&mut self) -> &Storage {
        self.storage.take();
        self.storage = Some(Storage::open(self.config.clone()).unwrap());
        self.s()
    }
}

fn hash_of(parts: &[&[u8]]) -> HashBytes {
    let mut h = blake3::Hasher::new();
    for p in parts {
        h.update(p);
    }
    HashBytes(*h.finalize().as_bytes())
}

/// A synthetic id; `variant` changes the root hash (forks).
pub(crate) fn synthetic_id(shard: ShardIdent, seqno: u32, variant: u8) -> BlockId {
    let tag = [
        &shard.workchain().to_le_bytes()[..],
        &shard.prefix().to_le_bytes(),
        &seqno.to_le_bytes(),
        &[variant],
    ]
    .concat();
    BlockId {
        shard,
        seqno,
        root_hash: hash_of(&[b"root", &tag]),
        file_hash: hash_of(&[b"file", &tag]),
    }
}

pub(crate) fn mc_id(seqno: u32) -> BlockId {
    synthetic_id(ShardIdent::MASTERCHAIN, seqno, 0)
}

pub(crate) fn shard_id(seqno: u32) -> BlockId {
    synthetic_id(ShardIdent::BASECHAIN, seqno, 0)
}

pub(crate) fn meta(ref_by_mc_seqno: u32) -> NewBlockMeta {
    NewBlockMeta {
        is_key_block: false,
        gen_utime: 1000 + ref_by_mc_seqno,
        ref_by_mc_seqno,
    }
}

/// One block of archive_1 with its parts.
#[derive(Clone)]
pub(crate) struct ArchiveBlock {
    pub id: BlockId,
    pub data: Vec<u8>,
    pub proof: Vec<u8>,
    pub queue_diff: Vec<u8>,
    pub ref_by_mc_seqno: u32,
    pub gen_utime: u32,
}

/// archive_1's blocks in Block order. Each shard block is referenced by the mc block right after it.
pub(crate) fn archive_1_blocks() -> Vec<ArchiveBlock> {
    let entries: Vec<_> = ArchiveReader::new_compressed(&archive_1_bytes()[..])
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let n = entries.len() / 3;
    let mut blocks: Vec<ArchiveBlock> = (0..n)
        .map(|i| {
            assert_eq!(entries[i].ty, ArchiveEntryType::Block);
            let id = entries[i].block_id;
            let parsed = regolith_storage::ParsedBlock::parse(&id, &entries[i].data).unwrap();
            let info = parsed.block.load_info().unwrap();
            ArchiveBlock {
                id,
                data: entries[i].data.clone(),
                proof: entries[n + i].data.clone(),
                queue_diff: entries[2 * n + i].data.clone(),
                ref_by_mc_seqno: 0,
                gen_utime: info.gen_utime,
            }
        })
        .collect();
    let mut next_mc = 0;
    for b in blocks.iter_mut().rev() {
        if b.id.is_masterchain() {
            next_mc = b.id.seqno;
        }
        b.ref_by_mc_seqno = next_mc;
    }
    blocks
}

impl ArchiveBlock {
    pub(crate) fn meta(&self) -> NewBlockMeta {
        NewBlockMeta {
            is_key_block: false,
            gen_utime: self.gen_utime,
            ref_by_mc_seqno: self.ref_by_mc_seqno,
        }
    }
}

/// Stores all three parts of a block; returns the handle.
pub(crate) async fn store_parts(
    storage: &Storage,
    b: &ArchiveBlock,
) -> regolith_storage::BlockHandle {
    let c = storage.components();
    let h = c
        .store_block_data(&b.id, Bytes::from(b.data.clone()), b.meta())
        .await
        .unwrap()
        .handle;
    c.store_block_proof(&b.id, Bytes::from(b.proof.clone()), h.clone())
        .await
        .unwrap();
    c.store_queue_diff(&b.id, Bytes::from(b.queue_diff.clone()), h.clone())
        .await
        .unwrap();
    h
}

/// "Ingest archive_1" (storage.md §12).
pub(crate) async fn ingest_archive_1(storage: &Storage) -> Vec<ArchiveBlock> {
    let blocks = archive_1_blocks();
    for b in &blocks {
        let h = store_parts(storage, b).await;
        storage.archives().move_into_archive(&h, false).unwrap();
    }
    blocks
}
