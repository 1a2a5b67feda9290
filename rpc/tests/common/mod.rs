//! Test doubles: an in-memory storage view and provider, and helpers to query a service directly.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use parking_lot::Mutex;
use regolith_rpc::proto::{self, OverlayResponse};
use regolith_rpc::{
    ArchiveLookup, BlockStorageView, BlockchainRpcService, HandleFlags, ProviderError,
    ProviderResult, RpcDataProvider, StateChunkRequest, StateInfo, StateKind, StatePart,
};
use tl_proto::{TlRead, TlWrite};
use tycho_types::models::{BlockId, ShardIdent};
use tycho_types::prelude::HashBytes;

/// One stored block.
#[derive(Clone, Default)]
pub(crate) struct StubBlock {
    pub flags: HandleFlags,
    pub data: Option<Bytes>,
    pub proof: Option<Bytes>,
    pub queue_diff: Option<Bytes>,
    pub next1: Option<BlockId>,
}

/// An in-memory storage view.
#[derive(Default)]
pub(crate) struct StubStorage {
    pub blocks: Mutex<HashMap<BlockId, StubBlock>>,
    pub key_blocks: Mutex<BTreeMap<u32, BlockId>>,
    pub zerostate_proof: Mutex<Option<Bytes>>,
    /// The shard blocks each mc block is the first to reference.
    pub shards_of: Mutex<HashMap<BlockId, Vec<BlockId>>>,
    pub fail: Mutex<bool>,
    /// How many proofs were read (each full-block read reads one).
    pub proof_reads: std::sync::atomic::AtomicUsize,
}

impl StubStorage {
    /// Links `prev` to `next` by next1.
    pub(crate) fn link(&self, prev: &BlockId, next: BlockId) {
        let mut blocks = self.blocks.lock();
        let block = blocks.get_mut(prev).expect("a stored block");
        block.flags.has_next1 = true;
        block.next1 = Some(next);
    }

    pub(crate) fn insert_full(&self, id: BlockId, data: Bytes) {
        self.blocks.lock().insert(
            id,
            StubBlock {
                flags: HandleFlags {
                    has_data: true,
                    has_proof: true,
                    has_queue_diff: true,
                    has_next1: false,
                    is_removed: false,
                },
                data: Some(data),
                proof: Some(Bytes::from_static(b"proof")),
                queue_diff: Some(Bytes::from_static(b"diff")),
                next1: None,
            },
        );
    }

    fn check(&self) -> ProviderResult<()> {
        if *self.fail.lock() {
            return Err(ProviderError::Internal("stub failure".into()));
        }
        Ok(())
    }
}

#[async_trait]
impl BlockStorageView for StubStorage {
    async fn handle(&self, id: &BlockId) -> ProviderResult<Option<HandleFlags>> {
        self.check()?;
        Ok(self.blocks.lock().get(id).map(|b| b.flags))
    }
    async fn block_data_range(
        &self,
        id: &BlockId,
        offset: u64,
        len: u64,
    ) -> ProviderResult<Option<Bytes>> {
        self.check()?;
        let blocks = self.blocks.lock();
        let Some(data) = blocks.get(id).and_then(|b| b.data.clone()) else {
            return Ok(None);
        };
        let size = data.len() as u64;
        if offset >= size {
            return Ok(Some(Bytes::new()));
        }
        let end = offset.saturating_add(len).min(size);
        Ok(Some(data.slice(offset as usize..end as usize)))
    }
    async fn block_data_size(&self, id: &BlockId) -> ProviderResult<Option<u64>> {
        self.check()?;
        Ok(self
            .blocks
            .lock()
            .get(id)
            .and_then(|b| b.data.as_ref().map(|d| d.len() as u64)))
    }
    async fn proof(&self, id: &BlockId) -> ProviderResult<Option<Bytes>> {
        self.check()?;
        self.proof_reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(self.blocks.lock().get(id).and_then(|b| b.proof.clone()))
    }
    async fn queue_diff(&self, id: &BlockId) -> ProviderResult<Option<Bytes>> {
        self.check()?;
        Ok(self
            .blocks
            .lock()
            .get(id)
            .and_then(|b| b.queue_diff.clone()))
    }
    async fn next1(&self, id: &BlockId) -> ProviderResult<Option<BlockId>> {
        self.check()?;
        Ok(self.blocks.lock().get(id).and_then(|b| b.next1))
    }
    async fn key_blocks_from(&self, seqno: u32, limit: usize) -> ProviderResult<Vec<BlockId>> {
        self.check()?;
        Ok(self
            .key_blocks
            .lock()
            .range(seqno..)
            .take(limit)
            .map(|(_, id)| *id)
            .collect())
    }
    async fn zerostate_proof(&self) -> ProviderResult<Option<Bytes>> {
        self.check()?;
        Ok(self.zerostate_proof.lock().clone())
    }
    async fn shard_blocks_of(&self, mc: &BlockId, limit: usize) -> ProviderResult<Vec<BlockId>> {
        self.check()?;
        let shards = self.shards_of.lock();
        Ok(shards
            .get(mc)
            .map(|ids| ids.iter().take(limit).copied().collect())
            .unwrap_or_default())
    }
}

/// An in-memory provider whose answers tests set directly.
#[derive(Default)]
pub(crate) struct StubProvider {
    pub archive_info: Mutex<HashMap<u32, ArchiveLookup>>,
    pub archives: Mutex<HashMap<u32, Bytes>>,
    pub states: Mutex<HashMap<(BlockId, StateKind), StateInfo>>,
    pub state_data: Mutex<HashMap<(BlockId, StateKind, u64), Bytes>>,
    pub chunk_size: u64,
    pub fail: Mutex<bool>,
}

impl StubProvider {
    pub(crate) fn new(chunk_size: u64) -> Self {
        Self {
            chunk_size,
            ..Default::default()
        }
    }
    fn check(&self) -> ProviderResult<()> {
        if *self.fail.lock() {
            return Err(ProviderError::Internal("stub failure".into()));
        }
        Ok(())
    }
}

fn part_key(part: StatePart) -> u64 {
    match part {
        StatePart::Unsplit => u64::MAX,
        StatePart::SplitRoot => u64::MAX - 1,
        StatePart::SplitPart(p) => p,
    }
}

#[async_trait]
impl RpcDataProvider for StubProvider {
    async fn archive_info(&self, mc_seqno: u32) -> ProviderResult<ArchiveLookup> {
        self.check()?;
        Ok(self
            .archive_info
            .lock()
            .get(&mc_seqno)
            .copied()
            .unwrap_or(ArchiveLookup::NotFound))
    }
    async fn archive_chunk(&self, archive_id: u32, offset: u64) -> ProviderResult<Bytes> {
        self.check()?;
        if !offset.is_multiple_of(self.chunk_size) {
            return Err(ProviderError::MisalignedOffset {
                offset,
                chunk_size: self.chunk_size,
            });
        }
        let archives = self.archives.lock();
        let data = archives
            .get(&archive_id)
            .ok_or(ProviderError::ArchiveNotFound(archive_id.into()))?;
        let start = (offset as usize).min(data.len());
        let end = (start + self.chunk_size as usize).min(data.len());
        Ok(data.slice(start..end))
    }
    async fn state_info(
        &self,
        block: &BlockId,
        kind: StateKind,
    ) -> ProviderResult<Option<StateInfo>> {
        self.check()?;
        Ok(self.states.lock().get(&(*block, kind)).cloned())
    }
    async fn state_chunk(&self, request: &StateChunkRequest) -> ProviderResult<Option<Bytes>> {
        self.check()?;
        let offset = request.offset;
        if !offset.is_multiple_of(self.chunk_size) {
            return Ok(None);
        }
        let data = self.state_data.lock();
        let key = (request.block, request.kind, part_key(request.part));
        let Some(data) = data.get(&key) else {
            return Ok(None);
        };
        if offset > data.len() as u64 {
            return Ok(None);
        }
        let end = (offset + self.chunk_size).min(data.len() as u64);
        Ok(Some(data.slice(offset as usize..end as usize)))
    }
}

/// Stores state bytes for a part.
pub(crate) fn put_state(
    p: &StubProvider,
    block: BlockId,
    kind: StateKind,
    part: StatePart,
    data: Bytes,
) {
    p.state_data
        .lock()
        .insert((block, kind, part_key(part)), data);
}

pub(crate) fn mc_block(seqno: u32, fill: u8) -> BlockId {
    BlockId {
        shard: ShardIdent::MASTERCHAIN,
        seqno,
        root_hash: HashBytes([fill; 32]),
        file_hash: HashBytes([fill.wrapping_add(1); 32]),
    }
}

pub(crate) fn shard_block(seqno: u32, fill: u8) -> BlockId {
    BlockId {
        shard: ShardIdent::new_full(0),
        seqno,
        root_hash: HashBytes([fill; 32]),
        file_hash: HashBytes([fill.wrapping_add(1); 32]),
    }
}

pub(crate) fn service(
    storage: Arc<StubStorage>,
    provider: Arc<StubProvider>,
) -> BlockchainRpcService {
    BlockchainRpcService::builder()
        .with_storage(storage)
        .with_provider(provider)
        .without_broadcast_listener()
        .build()
}

/// A chain of `n` mc blocks after mc 1, linked by next1, each with `shards` shard blocks of its own (listed
/// as the ones it is the first to reference), every blob `blob(seed)` with a seed of its own; returns the
/// mc ids from mc 1.
pub(crate) fn batch_chain(
    storage: &StubStorage,
    n: u32,
    shards: u32,
    blob: impl Fn(u64) -> Bytes,
) -> Vec<BlockId> {
    let mut mc_ids: Vec<BlockId> = Vec::new();
    for seqno in 1..=n + 1 {
        let id = mc_block(seqno, seqno as u8);
        storage.insert_full(id, blob(u64::from(seqno)));
        let mut own = Vec::new();
        for k in 0..shards {
            let shard = shard_block(seqno * 10 + k, (seqno * 10 + k) as u8);
            storage.insert_full(shard, blob(u64::from(seqno) << 8 | u64::from(k)));
            own.push(shard);
        }
        storage.shards_of.lock().insert(id, own);
        if let Some(prev) = mc_ids.last() {
            storage.link(prev, id);
        }
        mc_ids.push(id);
    }
    mc_ids
}

/// Sends a request value and decodes `overlay.response<T>`; panics on no answer.
pub(crate) async fn ask<T, R>(service: &BlockchainRpcService, request: R) -> OverlayResponse<T>
where
    R: TlWrite<Repr = tl_proto::Boxed>,
    for<'a> T: TlRead<'a, Repr = tl_proto::Boxed>,
{
    let body = tl_proto::serialize(request);
    let answer = service.handle_query(&body).await.expect("an answer");
    tl_proto::deserialize::<OverlayResponse<T>>(&answer).expect("a decodable answer")
}

pub(crate) fn data_of(r: OverlayResponse<proto::Data>) -> Bytes {
    match r {
        OverlayResponse::Ok(d) => d.data,
        OverlayResponse::Err(code) => panic!("err {code}"),
    }
}

/// `len` bytes of a xorshift stream seeded with `seed` (incompressible, the same on every run).
pub(crate) fn pseudo_random(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// The external messages of `fixtures/externals` (one base64 BOC per file), in file name order.
pub(crate) fn fixture_externals() -> Vec<Vec<u8>> {
    let mut files: Vec<_> = std::fs::read_dir(regolith_test_support::fixture_path("externals"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(!files.is_empty());
    files
        .iter()
        .map(|f| decode_base64(&std::fs::read_to_string(f).unwrap()))
        .collect()
}

fn decode_base64(text: &str) -> Vec<u8> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::new();
    let mut acc = 0u32;
    let mut bits = 0;
    for c in text
        .bytes()
        .filter(|c| !c.is_ascii_whitespace() && *c != b'=')
    {
        let v = ALPHABET.iter().position(|a| *a == c).expect("base64") as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}

pub(crate) mod net;
