//! The blockchain RPC client (rpc.md §7, §5.1–§5.2): simple queries, full-block download with parallel chunks
//! and peer fallback, archive and persistent-state search and download, and external-message broadcast with the
//! adaptive timeout and the own-message listener.

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::stream::{FuturesUnordered, StreamExt};
use parking_lot::Mutex;
use regolith_formats::archive::ArchiveIndex;
use tycho_network::PeerId;
use tycho_types::models::BlockId;

use super::broadcast_timeout::BroadcastTimeout;
use super::download::{
    decode_whole, download_chunks, ChunkedDownload, DownloadLimits, VerifyingSink,
};
use super::error::ClientError;
use super::history::RequestHistory;
use super::neighbour::{Neighbour, Punishment};
use super::neighbours::NeighbourType;
use super::overlay_client::{PublicOverlayClient, QueryResponse};
use crate::config::BlockchainRpcClientConfig;
use crate::proto::{self, rpc};
use crate::providers::{capped_chunk_size, validate_split_parts, StateKind};

/// Neighbours asked at once by the archive and state searches.
const SEARCH_PEERS: usize = 10;
/// The default frame limit (`network.max_frame_size`).
const DEFAULT_MAX_FRAME_SIZE: u64 = 8 << 20;

/// How sure the caller is that a neighbour has the data (§7.4); applied to `notFound`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataRequirement {
    /// The peer may well lack it: no score change.
    Optional,
    /// The peer should have it: −8.
    Expected,
    /// The peer must have it: punished as malicious.
    Required,
}

/// A downloaded block: the decompressed BOC, the proof and the queue diff as received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockDataFull {
    /// The block id the neighbour named.
    pub block_id: BlockId,
    /// The block BOC, decompressed.
    pub block: Bytes,
    /// The raw proof.
    pub proof: Bytes,
    /// The raw queue diff.
    pub queue_diff: Bytes,
    /// The compressed block exactly as served, when it came in one chunk: its decoding is `block`.
    pub compressed_block: Option<Bytes>,
}

/// The result of a full-block download: the block, or `None` when the neighbour did not have it.
#[derive(Debug, Clone)]
pub struct BlockDataFullWithNeighbour {
    /// The block.
    pub data: Option<BlockDataFull>,
    /// The neighbour that answered last.
    pub neighbour: Arc<Neighbour>,
}

/// Blocks after an mc block from one neighbour (`regolith.getNextBlocksFull`), checked in shape when they
/// arrived: the mc blocks consecutive from the one after the asked block, the shard blocks each once, every
/// compressed blob within `max_block_size`. A block is decompressed only when it is taken.
#[derive(Debug)]
pub struct NextBlocksBatch {
    last_mc: BlockId,
    mc: std::collections::VecDeque<proto::NextBlock>,
    shards: std::collections::HashMap<BlockId, proto::NextBlock>,
    neighbour: Arc<Neighbour>,
    max_block_size: u64,
}

impl NextBlocksBatch {
    /// The neighbour that sent the batch: the one to blame for a block in it that fails a check.
    pub fn neighbour(&self) -> &Arc<Neighbour> {
        &self.neighbour
    }

    /// The id of the batch's last mc block (as the batch names it: checked only when that block is).
    pub fn last_mc_id(&self) -> &BlockId {
        &self.last_mc
    }

    /// The mc blocks not taken yet.
    pub fn mc_blocks_left(&self) -> usize {
        self.mc.len()
    }

    /// The shard blocks not taken yet.
    pub fn shard_blocks_left(&self) -> usize {
        self.shards.len()
    }

    /// The ids of the shard blocks not taken yet, in no particular order.
    pub fn shard_block_ids(&self) -> Vec<BlockId> {
        self.shards.keys().copied().collect()
    }

    /// The next mc block of the batch, decompressed; the first is the one after the asked block.
    pub async fn next_mc(&mut self) -> Option<Result<BlockDataFull, ClientError>> {
        let entry = self.mc.pop_front()?;
        Some(decode_entry(entry, self.max_block_size).await)
    }

    /// Shard block `id`, decompressed, when the batch carries it.
    pub async fn take_shard(&mut self, id: &BlockId) -> Option<Result<BlockDataFull, ClientError>> {
        let entry = self.shards.remove(id)?;
        Some(decode_entry(entry, self.max_block_size).await)
    }
}

async fn decode_entry(entry: proto::NextBlock, max: u64) -> Result<BlockDataFull, ClientError> {
    let block = decode_whole(entry.data.clone(), max)
        .await
        .map_err(|e| ClientError::InvalidResponse(format!("block {}: {e}", entry.block_id)))?;
    Ok(BlockDataFull {
        block_id: entry.block_id,
        block: Bytes::from(block),
        proof: entry.proof,
        queue_diff: entry.queue_diff,
        compressed_block: Some(entry.data),
    })
}

/// The shape checks of a batch answer after mc block `prev`, before any of it is decompressed.
fn check_batch(
    prev: &BlockId,
    blocks: Vec<proto::NextBlock>,
    max_block_size: u64,
) -> Result<
    (
        std::collections::VecDeque<proto::NextBlock>,
        std::collections::HashMap<BlockId, proto::NextBlock>,
    ),
    String,
> {
    let mut mc = std::collections::VecDeque::new();
    let mut shards = std::collections::HashMap::new();
    for (i, entry) in blocks.into_iter().enumerate() {
        let id = entry.block_id;
        if entry.data.is_empty() || entry.data.len() as u64 > max_block_size {
            return Err(format!(
                "block {id} of {} compressed bytes (the limit is {max_block_size})",
                entry.data.len()
            ));
        }
        if id.is_masterchain() {
            let expected = prev.seqno as u64 + 1 + mc.len() as u64;
            if u64::from(id.seqno) != expected {
                return Err(format!("mc block {id} where mc seqno {expected} was due"));
            }
            mc.push_back(entry);
        } else if i == 0 {
            return Err(format!("shard block {id} before any mc block"));
        } else if shards.insert(id, entry).is_some() {
            return Err(format!("shard block {id} twice"));
        }
    }
    Ok((mc, shards))
}

/// What a neighbour is known to make of `regolith.getNextBlocksFull`.
#[derive(Debug, Clone, Copy)]
enum BatchSupport {
    /// It answered one.
    Yes,
    /// It left one unanswered (a stock node does) at this instant.
    No(Instant),
}

/// A neighbour that left the batch query unanswered is not asked it again for this long (it may be
/// updated meanwhile).
const BATCH_REPROBE: Duration = Duration::from_secs(3600);

/// An archive found by [`BlockchainRpcClient::find_archive`].
#[derive(Debug, Clone)]
pub struct PendingArchive {
    /// Archive id.
    pub id: u64,
    /// Compressed size.
    pub size: u64,
    /// Chunk size.
    pub chunk_size: u64,
    /// The neighbour that has it.
    pub neighbour: Arc<Neighbour>,
}

/// What an archive search found.
#[derive(Debug, Clone)]
pub enum ArchiveSearch {
    /// A neighbour has the archive.
    Found(PendingArchive),
    /// The archive does not exist yet.
    TooNew,
}

/// A part of a split persistent state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingStatePart {
    /// Shard prefix.
    pub prefix: u64,
    /// Compressed size.
    pub size: u64,
}

/// A persistent state found by [`BlockchainRpcClient::find_persistent_state`].
#[derive(Debug, Clone)]
pub struct PendingPersistentState {
    /// The block of the state.
    pub block_id: BlockId,
    /// Shard or queue state.
    pub kind: StateKind,
    /// Compressed size (of the root for a split state).
    pub size: u64,
    /// Chunk size.
    pub chunk_size: u64,
    /// 0 for an unsplit state.
    pub split_depth: u32,
    /// Parts sorted by prefix.
    pub parts: Vec<PendingStatePart>,
    /// The neighbour that has it.
    pub neighbour: Arc<Neighbour>,
}

/// Receives the external messages this node sends, before they go out (§5.5): the body only.
#[async_trait]
pub trait OwnMessageListener: Send + Sync + 'static {
    /// Called once per sent message.
    async fn handle_message(&self, message: Bytes);
}

#[async_trait]
impl<T: OwnMessageListener + ?Sized> OwnMessageListener for Arc<T> {
    async fn handle_message(&self, message: Bytes) {
        (**self).handle_message(message).await;
    }
}

#[async_trait]
impl OwnMessageListener for Box<dyn OwnMessageListener> {
    async fn handle_message(&self, message: Bytes) {
        (**self).handle_message(message).await;
    }
}

macro_rules! impl_own_listener_tuple {
    ($($name:ident),+) => {
        #[async_trait]
        impl<$($name: OwnMessageListener),+> OwnMessageListener for ($($name,)+) {
            #[allow(non_snake_case)]
            async fn handle_message(&self, message: Bytes) {
                let ($($name,)+) = self;
                futures_util::join!($($name.handle_message(message.clone())),+);
            }
        }
    };
}

impl_own_listener_tuple!(A, B);
impl_own_listener_tuple!(A, B, C);
impl_own_listener_tuple!(A, B, C, D);
impl_own_listener_tuple!(A, B, C, D, E);

struct Histories {
    get_block_full: Arc<RequestHistory>,
    get_next_block_full: Arc<RequestHistory>,
    get_key_block_proof: Arc<RequestHistory>,
    get_zerostate_proof: Arc<RequestHistory>,
    get_persistent_state_info: Arc<RequestHistory>,
    get_archive_info: Arc<RequestHistory>,
}

struct Inner {
    overlay: PublicOverlayClient,
    config: BlockchainRpcClientConfig,
    histories: Histories,
    own_listener: Option<Box<dyn OwnMessageListener>>,
    broadcast_timeout: Mutex<BroadcastTimeout>,
    clock: Instant,
    max_frame_size: u64,
    batch_support: Mutex<std::collections::HashMap<PeerId, BatchSupport>>,
}

/// The blockchain RPC client. Cheap to clone.
#[derive(Clone)]
pub struct BlockchainRpcClient {
    inner: Arc<Inner>,
}

/// Builds a [`BlockchainRpcClient`].
#[derive(Default)]
pub struct BlockchainRpcClientBuilder {
    overlay: Option<PublicOverlayClient>,
    config: BlockchainRpcClientConfig,
    own_listener: Option<Box<dyn OwnMessageListener>>,
    max_frame_size: Option<u64>,
}

impl BlockchainRpcClientBuilder {
    /// The overlay client (required).
    pub fn with_overlay_client(mut self, overlay: PublicOverlayClient) -> Self {
        self.overlay = Some(overlay);
        self
    }

    /// `blockchain_rpc_client`.
    pub fn with_config(mut self, config: BlockchainRpcClientConfig) -> Self {
        self.config = config;
        self
    }

    /// The own-message listener.
    pub fn with_own_message_listener(mut self, listener: impl OwnMessageListener) -> Self {
        self.own_listener = Some(Box::new(listener));
        self
    }

    /// The network's frame limit (`network.max_frame_size`, default 8 MiB): announced chunks above
    /// `limit − 1 KiB` cannot be received and are refused.
    pub fn with_max_frame_size(mut self, limit: u64) -> Self {
        self.max_frame_size = Some(limit);
        self
    }

    /// The client; `None` without an overlay client.
    pub fn build(self) -> Option<BlockchainRpcClient> {
        let overlay = self.overlay?;
        let sizes = &self.config.request_history_size;
        let history = |size: Option<usize>| Arc::new(RequestHistory::new(size));
        let histories = Histories {
            get_block_full: history(sizes.get_block_full),
            get_next_block_full: history(sizes.get_next_block_full),
            get_key_block_proof: history(sizes.get_key_block_proof),
            get_zerostate_proof: history(sizes.get_zerostate_proof),
            get_persistent_state_info: history(sizes.get_persistent_state_info),
            get_archive_info: history(sizes.get_archive_info),
        };
        let timeout = BroadcastTimeout::new(
            self.config.min_broadcast_timeout,
            overlay.config().validators.send_timeout,
        );
        Some(BlockchainRpcClient {
            inner: Arc::new(Inner {
                overlay,
                config: self.config,
                histories,
                own_listener: self.own_listener,
                broadcast_timeout: Mutex::new(timeout),
                clock: Instant::now(),
                max_frame_size: self.max_frame_size.unwrap_or(DEFAULT_MAX_FRAME_SIZE),
                batch_support: Mutex::default(),
            }),
        })
    }
}

impl BlockchainRpcClient {
    /// A builder.
    pub fn builder() -> BlockchainRpcClientBuilder {
        BlockchainRpcClientBuilder::default()
    }

    /// The overlay client.
    pub fn overlay_client(&self) -> &PublicOverlayClient {
        &self.inner.overlay
    }

    fn chunk_cap(&self) -> u64 {
        capped_chunk_size(u64::MAX, self.inner.max_frame_size)
    }

    fn download_limits(&self, max_decompressed: u64) -> DownloadLimits {
        DownloadLimits {
            max_decompressed,
            min_rate: self.inner.config.min_download_rate.as_u64(),
            window: self.inner.config.slow_download_window,
        }
    }

    /// The bounds on an archive's entries that this client's config sets (`max_block_size` per entry).
    pub fn archive_limits(&self) -> regolith_formats::archive::ArchiveLimits {
        regolith_formats::archive::ArchiveLimits {
            max_entry_len: u32::try_from(self.inner.config.max_block_size.as_u64())
                .unwrap_or(u32::MAX),
            // Three entries per block, and far more blocks than an archive of 100 mc blocks holds.
            max_entries: 3_000_000,
        }
    }

    async fn simple<R, T>(
        &self,
        history: Option<&Arc<RequestHistory>>,
        request: R,
    ) -> Result<QueryResponse<T>, ClientError>
    where
        R: tl_proto::TlWrite<Repr = tl_proto::Boxed>,
        for<'a> T: tl_proto::TlRead<'a, Repr = tl_proto::Boxed>,
    {
        let neighbour = self
            .inner
            .overlay
            .neighbours()
            .choose(history.map(|h| &**h))
            .ok_or(ClientError::NoNeighbours)?;
        self.inner
            .overlay
            .query(&neighbour, history.cloned(), request)
            .await
    }

    /// `getNextKeyBlockIds` (no history).
    pub async fn get_next_key_block_ids(
        &self,
        block: &BlockId,
        max_size: u32,
    ) -> Result<QueryResponse<proto::KeyBlockIds>, ClientError> {
        self.simple(
            None,
            rpc::GetNextKeyBlockIds {
                block_id: *block,
                max_size,
            },
        )
        .await
    }

    /// `getKeyBlockProof`.
    pub async fn get_key_block_proof(
        &self,
        block: &BlockId,
    ) -> Result<QueryResponse<proto::KeyBlockProof>, ClientError> {
        self.simple(
            Some(&self.inner.histories.get_key_block_proof),
            rpc::GetKeyBlockProof { block_id: *block },
        )
        .await
    }

    /// `getZerostateProof`.
    pub async fn get_zerostate_proof(
        &self,
    ) -> Result<QueryResponse<proto::ZerostateProof>, ClientError> {
        self.simple(
            Some(&self.inner.histories.get_zerostate_proof),
            rpc::GetZerostateProof,
        )
        .await
    }

    /// `getPersistentShardStateInfo`.
    pub async fn get_persistent_state_info(
        &self,
        block: &BlockId,
    ) -> Result<QueryResponse<proto::PersistentStateInfo>, ClientError> {
        self.simple(
            Some(&self.inner.histories.get_persistent_state_info),
            rpc::GetPersistentShardStateInfo { block_id: *block },
        )
        .await
    }

    /// Downloads a block by id (§7.3).
    pub async fn get_block_full(
        &self,
        block: &BlockId,
        requirement: DataRequirement,
    ) -> Result<BlockDataFullWithNeighbour, ClientError> {
        let body = Bytes::from(tl_proto::serialize(rpc::GetBlockFull { block_id: *block }));
        self.block_full(
            body,
            Some(*block),
            requirement,
            &self.inner.histories.get_block_full,
        )
        .await
    }

    /// Downloads the block after `prev` (§7.3).
    pub async fn get_next_block_full(
        &self,
        prev: &BlockId,
        requirement: DataRequirement,
    ) -> Result<BlockDataFullWithNeighbour, ClientError> {
        let body = Bytes::from(tl_proto::serialize(rpc::GetNextBlockFull {
            prev_block_id: *prev,
        }));
        self.block_full(
            body,
            None,
            requirement,
            &self.inner.histories.get_next_block_full,
        )
        .await
    }

    /// Up to `max_mc_blocks` mc blocks after `prev` with the shard blocks each is the first to reference,
    /// in one answer (`regolith.getNextBlocksFull`, a regolith extension), from a neighbour chosen as for
    /// getNextBlockFull among those not known to leave it unanswered. `Ok(None)` when there is no such
    /// neighbour, when the one asked does not answer it (a stock node; it is not asked again for an hour and
    /// loses no score), or when it has nothing to batch: the caller then uses getNextBlockFull. Once a
    /// neighbour has answered the query, its answers are scored like any other, and one that fails the shape
    /// checks is punished as malicious.
    pub async fn get_next_blocks_full(
        &self,
        prev: &BlockId,
        max_mc_blocks: u32,
    ) -> Result<Option<NextBlocksBatch>, ClientError> {
        let overlay = &self.inner.overlay;
        let history = &self.inner.histories.get_next_block_full;
        let excluded: Vec<PeerId> = {
            let mut support = self.inner.batch_support.lock();
            support
                .retain(|_, s| !matches!(s, BatchSupport::No(at) if at.elapsed() > BATCH_REPROBE));
            support
                .iter()
                .filter(|(_, s)| matches!(s, BatchSupport::No(_)))
                .map(|(peer, _)| *peer)
                .collect()
        };
        let Some(neighbour) = overlay
            .neighbours()
            .choose_excluding(Some(history), &excluded)
        else {
            return Ok(None);
        };
        let peer = *neighbour.peer_id();
        let known = matches!(
            self.inner.batch_support.lock().get(&peer),
            Some(BatchSupport::Yes)
        );
        let max_bytes = u64::from(proto::MAX_BATCH_BYTES).min(self.chunk_cap()) as u32;
        let body = Bytes::from(tl_proto::serialize(rpc::GetNextBlocksFull {
            prev_block_id: *prev,
            max_mc_blocks: max_mc_blocks.min(proto::MAX_BATCH_MC_BLOCKS),
            max_bytes,
        }));
        let not_supported = || {
            self.inner
                .batch_support
                .lock()
                .insert(peer, BatchSupport::No(Instant::now()));
            metrics::counter!("regolith_rpc_client_batch_unsupported_total").increment(1);
            tracing::debug!(%peer, "the neighbour does not answer the batched next-blocks query");
            Ok(None)
        };
        let (answer, rtt) = if known {
            overlay.query_raw(&neighbour, body).await?
        } else {
            // A probe: a stock node leaves the query unanswered, which is no fault of it.
            match super::overlay_client::query_untracked(overlay, &neighbour, body).await {
                Ok(answer) => answer,
                Err(_) => return not_supported(),
            }
        };
        let handle =
            super::overlay_client::QueryHandle::new(neighbour.clone(), rtt, Some(history.clone()));
        let blocks =
            match tl_proto::deserialize::<proto::OverlayResponse<proto::NextBlocks>>(&answer) {
                Ok(proto::OverlayResponse::Ok(answer)) => answer.blocks,
                Ok(proto::OverlayResponse::Err(_)) | Err(_) if !known => return not_supported(),
                Ok(proto::OverlayResponse::Err(code)) => {
                    handle.reject();
                    return Err(ClientError::RequestFailed(code));
                }
                Err(e) => {
                    handle.punish(Punishment::Malicious);
                    return Err(ClientError::InvalidResponse(format!(
                        "nextBlocks of {} bytes from {peer}: {e}",
                        answer.len()
                    )));
                }
            };
        self.inner
            .batch_support
            .lock()
            .insert(peer, BatchSupport::Yes);
        let max_block_size = self.inner.config.max_block_size.as_u64();
        let (mc, shards) = match check_batch(prev, blocks, max_block_size) {
            Ok(checked) => checked,
            Err(e) => {
                handle.punish(Punishment::Malicious);
                return Err(ClientError::InvalidResponse(format!(
                    "nextBlocks from {peer}: {e}"
                )));
            }
        };
        let Some(last_mc) = mc.back().map(|entry| entry.block_id) else {
            handle.ignore();
            return Ok(None);
        };
        handle.accept();
        metrics::counter!("regolith_rpc_client_batch_blocks_total")
            .increment((mc.len() + shards.len()) as u64);
        Ok(Some(NextBlocksBatch {
            last_mc,
            mc,
            shards,
            neighbour,
            max_block_size,
        }))
    }

    async fn block_full(
        &self,
        body: Bytes,
        expected: Option<BlockId>,
        requirement: DataRequirement,
        history: &Arc<RequestHistory>,
    ) -> Result<BlockDataFullWithNeighbour, ClientError> {
        let overlay = &self.inner.overlay;
        let mut tried: Vec<PeerId> = Vec::new();
        let mut last_error = None;
        for _ in 0..self.inner.config.max_block_download_peers.max(1) {
            let Some(neighbour) = overlay.neighbours().choose_excluding(Some(history), &tried)
            else {
                break;
            };
            tried.push(*neighbour.peer_id());
            let (answer, rtt) = match overlay.query_raw(&neighbour, body.clone()).await {
                Ok(answer) => answer,
                Err(e) => {
                    last_error = Some(e);
                    continue;
                }
            };
            let handle = super::overlay_client::QueryHandle::new(
                neighbour.clone(),
                rtt,
                Some(history.clone()),
            );
            let found =
                match tl_proto::deserialize::<proto::OverlayResponse<proto::BlockFull>>(&answer) {
                    Ok(proto::OverlayResponse::Ok(found)) => found,
                    Ok(proto::OverlayResponse::Err(code)) => {
                        handle.reject();
                        last_error = Some(ClientError::RequestFailed(code));
                        continue;
                    }
                    Err(e) => {
                        handle.reject();
                        last_error = Some(ClientError::InvalidResponse(format!("blockFull: {e}")));
                        continue;
                    }
                };
            let proto::BlockFull::Found {
                block_id,
                block,
                proof,
                queue_diff,
            } = found
            else {
                match requirement {
                    DataRequirement::Optional => handle.ignore(),
                    DataRequirement::Expected => handle.reject(),
                    DataRequirement::Required => handle.punish(Punishment::Malicious),
                }
                return Ok(BlockDataFullWithNeighbour {
                    data: None,
                    neighbour,
                });
            };
            let handle = handle.mark_useful();
            if expected.is_some_and(|e| e != block_id) {
                handle.reject();
                last_error = Some(ClientError::InvalidResponse(format!(
                    "asked for {}, got {block_id}",
                    expected.map(|e| e.to_string()).unwrap_or_default()
                )));
                continue;
            }
            let (size, chunk_size) = (u64::from(block.size), u64::from(block.chunk_size));
            let max_block = self.inner.config.max_block_size.as_u64();
            if size > max_block {
                // Compressed data larger than the largest block accepted decompressed is a lie.
                handle.punish(Punishment::Malicious);
                last_error = Some(ClientError::InvalidResponse(format!(
                    "block {block_id} of {size} bytes, more than the limit of {max_block}"
                )));
                continue;
            }
            let first = block.data.len() as u64;
            if first > chunk_size || first > size || first != size.min(chunk_size) {
                handle.reject();
                last_error = Some(ClientError::InvalidResponse(format!(
                    "first chunk of {first} bytes for size {size} and chunk size {chunk_size}"
                )));
                continue;
            }
            let compressed_block = (first == size).then(|| block.data.clone());
            let download = ChunkedDownload {
                size,
                chunk_size,
                first_chunk: Some((block.data, handle)),
                // Block sizes are u32 on the wire, so every chunk offset fits.
                request: |offset: u64| {
                    Bytes::from(tl_proto::serialize(rpc::GetBlockDataChunk {
                        block_id,
                        offset: offset as u32,
                    }))
                },
                retries: self.inner.config.download_retries,
                compressed_tee: None,
                limits: self.download_limits(max_block),
            };
            match download_chunks(
                overlay,
                &neighbour,
                download,
                Vec::with_capacity((size as usize).saturating_mul(2).min(16 << 20)),
                |_| {},
            )
            .await
            {
                Ok(decompressed) => {
                    return Ok(BlockDataFullWithNeighbour {
                        data: Some(BlockDataFull {
                            block_id,
                            block: Bytes::from(decompressed.sink),
                            proof,
                            queue_diff,
                            compressed_block,
                        }),
                        neighbour,
                    });
                }
                // The failed chunk carries the penalty (the initial answer's when the first chunk failed).
                Err(e) => last_error = Some(e),
            }
        }
        Err(last_error.unwrap_or(ClientError::NoNeighbours))
    }

    /// Searches the archive holding `mc_seqno` among up to 10 reliable neighbours (§7.6).
    pub async fn find_archive(&self, mc_seqno: u32) -> Result<ArchiveSearch, ClientError> {
        let history = &self.inner.histories.get_archive_info;
        let peers = self.inner.overlay.neighbours().choose_multiple(
            SEARCH_PEERS,
            NeighbourType::Reliable,
            Some(history),
        );
        if peers.is_empty() {
            return Err(ClientError::NoNeighbours);
        }
        let asked = peers.len();
        let mut queries: FuturesUnordered<_> = peers
            .into_iter()
            .map(|n| {
                let overlay = self.inner.overlay.clone();
                let history = history.clone();
                async move {
                    let answer = overlay
                        .query::<_, proto::ArchiveInfo>(
                            &n,
                            Some(history),
                            rpc::GetArchiveInfo { mc_seqno },
                        )
                        .await;
                    (n, answer)
                }
            })
            .collect();
        let cap = self.chunk_cap();
        let (mut too_new, mut last_error) = (0usize, None);
        while let Some((neighbour, answer)) = queries.next().await {
            match answer {
                Ok(QueryResponse { data, handle }) => match data {
                    proto::ArchiveInfo::Found {
                        id,
                        size,
                        chunk_size,
                    } => {
                        if u64::from(chunk_size) > cap {
                            handle.reject();
                            continue;
                        }
                        let max = self.inner.config.max_archive_size.as_u64();
                        if size > max {
                            // Nothing is created or downloaded for an archive beyond the limit.
                            tracing::warn!(
                                peer = %neighbour.peer_id(),
                                size,
                                max,
                                "an archive larger than max_archive_size was announced"
                            );
                            // A claim, not data: rejected (a lower score), the search goes on.
                            handle.reject();
                            last_error = Some(ClientError::InvalidResponse(format!(
                                "archive of {size} bytes, more than the limit of {max}"
                            )));
                            continue;
                        }
                        if u64::from(chunk_size) < super::download::MIN_CHUNK_SIZE
                            && size > u64::from(chunk_size)
                        {
                            handle.reject();
                            last_error = Some(ClientError::InvalidResponse(format!(
                                "archive chunk size {chunk_size}, below the minimum"
                            )));
                            continue;
                        }
                        handle.accept();
                        return Ok(ArchiveSearch::Found(PendingArchive {
                            id,
                            size,
                            chunk_size: chunk_size.into(),
                            neighbour,
                        }));
                    }
                    proto::ArchiveInfo::TooNew => {
                        too_new += 1;
                        handle.ignore();
                    }
                    proto::ArchiveInfo::NotFound => handle.ignore(),
                },
                Err(e) => last_error = Some(e),
            }
        }
        let quorum = (self.inner.config.too_new_archive_threshold.max(1)).min(asked);
        if too_new >= quorum {
            return Ok(ArchiveSearch::TooNew);
        }
        Err(last_error.unwrap_or(ClientError::NotFound))
    }

    /// Downloads a found archive into `sink` (the decompressed archive), verifying it as it streams (§7.6).
    pub async fn download_archive<W: Write + Send + 'static>(
        &self,
        archive: &PendingArchive,
        sink: W,
        on_progress: impl Fn(u64) + Send + Sync + 'static,
    ) -> Result<W, ClientError> {
        let sink = VerifyingSink::new(sink, self.archive_limits());
        self.download_verified(archive, sink, None, on_progress)
            .await
            .map(|(sink, _)| sink)
    }

    /// [`Self::download_archive`], returning with the sink the index of the archive's entries: where each
    /// entry's data lies in the decompressed stream written to `sink`, recorded by the streaming verifier as
    /// the bytes pass (the caller reads the entries from what it wrote, with no second framing pass).
    /// `compressed`, if given, also gets the archive as served (the zstd package); it is flushed and dropped
    /// when the download succeeds.
    pub async fn download_archive_indexed<W: Write + Send + 'static>(
        &self,
        archive: &PendingArchive,
        sink: W,
        compressed: Option<Box<dyn Write + Send>>,
        on_progress: impl Fn(u64) + Send + Sync + 'static,
    ) -> Result<(W, ArchiveIndex), ClientError> {
        let sink = VerifyingSink::indexing(sink, self.archive_limits());
        self.download_verified(archive, sink, compressed, on_progress)
            .await
    }

    async fn download_verified<W: Write + Send + 'static>(
        &self,
        archive: &PendingArchive,
        sink: VerifyingSink<W>,
        compressed: Option<Box<dyn Write + Send>>,
        on_progress: impl Fn(u64) + Send + Sync + 'static,
    ) -> Result<(W, ArchiveIndex), ClientError> {
        let downloaded = self
            .archive_download(archive, sink, compressed, on_progress)
            .await?;
        let (mut sink, index) = downloaded.sink.finish()?;
        sink.flush()
            .map_err(|e| ClientError::Internal(format!("flushing the archive sink: {e}")))?;
        if let Some(mut tee) = downloaded.compressed_tee {
            tee.flush()
                .map_err(|e| ClientError::Internal(format!("flushing the archive copy: {e}")))?;
        }
        Ok((sink, index))
    }

    /// Downloads a found archive as served (the zstd package) into `compressed`, verifying the decompressed
    /// stream as it goes.
    pub async fn download_archive_compressed(
        &self,
        archive: &PendingArchive,
        compressed: Box<dyn Write + Send>,
        on_progress: impl Fn(u64) + Send + Sync + 'static,
    ) -> Result<Box<dyn Write + Send>, ClientError> {
        let downloaded = self
            .archive_download(
                archive,
                VerifyingSink::new(std::io::sink(), self.archive_limits()),
                Some(compressed),
                on_progress,
            )
            .await?;
        downloaded.sink.finish()?;
        let mut tee = downloaded
            .compressed_tee
            .ok_or_else(|| ClientError::Internal("the compressed copy is gone".into()))?;
        tee.flush()
            .map_err(|e| ClientError::Internal(format!("flushing the archive copy: {e}")))?;
        Ok(tee)
    }

    async fn archive_download<W: Write + Send + 'static>(
        &self,
        archive: &PendingArchive,
        sink: VerifyingSink<W>,
        compressed_tee: Option<Box<dyn Write + Send>>,
        on_progress: impl Fn(u64) + Send + Sync + 'static,
    ) -> Result<super::download::Downloaded<VerifyingSink<W>>, ClientError> {
        let archive_id = archive.id;
        let download = ChunkedDownload {
            size: archive.size,
            chunk_size: archive.chunk_size,
            first_chunk: None,
            request: |offset| {
                Bytes::from(tl_proto::serialize(rpc::GetArchiveChunk {
                    archive_id,
                    offset,
                }))
            },
            retries: self.inner.config.download_retries,
            compressed_tee,
            limits: self.download_limits(self.inner.config.max_archive_decompressed_size.as_u64()),
        };
        download_chunks(
            &self.inner.overlay,
            &archive.neighbour,
            download,
            sink,
            on_progress,
        )
        .await
    }

    /// Searches a persistent state among up to 10 reliable neighbours (§7.7).
    pub async fn find_persistent_state(
        &self,
        block: &BlockId,
        kind: StateKind,
    ) -> Result<PendingPersistentState, ClientError> {
        let history = &self.inner.histories.get_persistent_state_info;
        let peers = self.inner.overlay.neighbours().choose_multiple(
            SEARCH_PEERS,
            NeighbourType::Reliable,
            Some(history),
        );
        if peers.is_empty() {
            return Err(ClientError::NoNeighbours);
        }
        let block_id = *block;
        let mut queries: FuturesUnordered<_> = peers
            .into_iter()
            .map(|n| {
                let overlay = self.inner.overlay.clone();
                let history = history.clone();
                async move {
                    let answer = match kind {
                        StateKind::Shard => {
                            overlay
                                .query::<_, proto::PersistentStateInfo>(
                                    &n,
                                    Some(history),
                                    rpc::GetPersistentShardStateInfo { block_id },
                                )
                                .await
                        }
                        StateKind::Queue => {
                            overlay
                                .query::<_, proto::PersistentStateInfo>(
                                    &n,
                                    Some(history),
                                    rpc::GetPersistentQueueStateInfo { block_id },
                                )
                                .await
                        }
                    };
                    (n, answer)
                }
            })
            .collect();
        let cap = self.chunk_cap();
        let mut last_error = None;
        while let Some((neighbour, answer)) = queries.next().await {
            let QueryResponse { data, handle } = match answer {
                Ok(r) => r,
                Err(e) => {
                    last_error = Some(e);
                    continue;
                }
            };
            let (size, chunk_size, split_depth, parts) = match data {
                proto::PersistentStateInfo::Found { size, chunk_size } => {
                    (size, chunk_size, 0, Vec::new())
                }
                proto::PersistentStateInfo::FoundWithParts {
                    size,
                    chunk_size,
                    split_depth,
                    parts,
                } => {
                    let mut prefixes: Vec<u64> = parts.iter().map(|p| p.prefix).collect();
                    let valid = u8::try_from(split_depth)
                        .map_err(|_| format!("split depth {split_depth}"))
                        .and_then(|d| validate_split_parts(block, kind, d, &prefixes));
                    if let Err(reason) = valid {
                        handle.reject();
                        last_error = Some(ClientError::InvalidResponse(format!(
                            "split state of {block}: {reason}"
                        )));
                        continue;
                    }
                    prefixes.sort_unstable();
                    let mut parts: Vec<PendingStatePart> = parts
                        .iter()
                        .map(|p| PendingStatePart {
                            prefix: p.prefix,
                            size: p.size,
                        })
                        .collect();
                    parts.sort_by_key(|p| p.prefix);
                    (size, chunk_size, split_depth, parts)
                }
                proto::PersistentStateInfo::NotFound => {
                    handle.ignore();
                    continue;
                }
            };
            if u64::from(chunk_size) > cap {
                handle.reject();
                continue;
            }
            let max = match kind {
                StateKind::Shard => self.inner.config.max_persistent_state_size.as_u64(),
                StateKind::Queue => self.inner.config.max_queue_state_size.as_u64(),
            };
            // The limit bounds the whole state: the root (or the unsplit state) and every part together.
            let total = parts
                .iter()
                .fold(size, |total, p| total.saturating_add(p.size));
            if total > max {
                handle.punish(Punishment::Malicious);
                last_error = Some(ClientError::InvalidResponse(format!(
                    "a state of {block} of {total} bytes in {} files, more than the limit of {max}",
                    parts.len() + 1
                )));
                continue;
            }
            handle.accept();
            return Ok(PendingPersistentState {
                block_id,
                kind,
                size,
                chunk_size: chunk_size.into(),
                split_depth,
                parts,
                neighbour,
            });
        }
        Err(last_error.unwrap_or(ClientError::NotFound))
    }

    /// Downloads one object of a found state into `sink` (decompressed): the queue state, a part by prefix,
    /// the root of a split state, or an unsplit state. Only sizes and the zstd stream are checked.
    pub async fn download_persistent_state<W: Write + Send + 'static>(
        &self,
        state: &PendingPersistentState,
        part: Option<u64>,
        sink: W,
        on_progress: impl Fn(u64) + Send + Sync + 'static,
    ) -> Result<W, ClientError> {
        let block_id = state.block_id;
        let size = match part {
            Some(prefix) => {
                state
                    .parts
                    .iter()
                    .find(|p| p.prefix == prefix)
                    .ok_or(ClientError::NotFound)?
                    .size
            }
            None => state.size,
        };
        let (kind, split) = (state.kind, state.split_depth > 0);
        let request = move |offset| -> Bytes {
            Bytes::from(match (kind, part) {
                (StateKind::Queue, _) => {
                    tl_proto::serialize(rpc::GetPersistentQueueStateChunk { block_id, offset })
                }
                (StateKind::Shard, Some(prefix)) => {
                    tl_proto::serialize(rpc::GetPersistentShardStatePartChunk {
                        block_id,
                        prefix,
                        offset,
                    })
                }
                (StateKind::Shard, None) if split => {
                    tl_proto::serialize(rpc::GetPersistentShardStateRootChunk { block_id, offset })
                }
                (StateKind::Shard, None) => {
                    tl_proto::serialize(rpc::GetPersistentShardStateChunk { block_id, offset })
                }
            })
        };
        let download = ChunkedDownload {
            size,
            chunk_size: state.chunk_size,
            first_chunk: None,
            request,
            retries: self.inner.config.download_retries,
            compressed_tee: None,
            // The decompressor stops at the kind's limit, which bounds the announced size too.
            limits: self.download_limits(match kind {
                StateKind::Shard => self.inner.config.max_persistent_state_size.as_u64(),
                StateKind::Queue => self.inner.config.max_queue_state_size.as_u64(),
            }),
        };
        let mut sink = download_chunks(
            &self.inner.overlay,
            &state.neighbour,
            download,
            sink,
            on_progress,
        )
        .await?
        .sink;
        sink.flush()
            .map_err(|e| ClientError::Internal(format!("flushing the state sink: {e}")))?;
        Ok(sink)
    }

    /// Downloads the root and then every part in prefix order into `sink`.
    pub async fn download_persistent_state_all<W: Write + Send + 'static>(
        &self,
        state: &PendingPersistentState,
        mut sink: W,
    ) -> Result<W, ClientError> {
        sink = self
            .download_persistent_state(state, None, sink, |_| {})
            .await?;
        for part in &state.parts {
            sink = self
                .download_persistent_state(state, Some(part.prefix), sink, |_| {})
                .await?;
        }
        Ok(sink)
    }

    /// The current broadcast timeout (§5.2).
    pub fn broadcast_timeout(&self) -> Duration {
        let now = self.inner.clock.elapsed().as_millis() as u64;
        self.inner.broadcast_timeout.lock().timeout(now)
    }

    /// Sends an external message to the validator broadcast targets (§5.1); returns how many got it.
    pub async fn broadcast_external_message(&self, message: &[u8]) -> usize {
        if let Some(own) = &self.inner.own_listener {
            own.handle_message(Bytes::copy_from_slice(message)).await;
        }
        let overlay = &self.inner.overlay;
        let targets = overlay.broadcast_targets();
        if targets.is_empty() {
            return 0;
        }
        let body = proto::broadcast_body(message);
        let timeout = self.broadcast_timeout();
        let mut sends: FuturesUnordered<_> = targets
            .iter()
            .map(|peer| {
                let body = body.clone();
                async move {
                    let started = Instant::now();
                    let result = overlay.send_to_validator(peer, body).await;
                    if let Err(e) = &result {
                        tracing::debug!(%peer, error = %e, "broadcast send failed");
                    }
                    let ok = result.is_ok();
                    (ok, started.elapsed())
                }
            })
            .collect();
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let (mut delivered, mut durations) = (0usize, Vec::new());
        loop {
            tokio::select! {
                next = sends.next() => match next {
                    Some((ok, elapsed)) => {
                        delivered += usize::from(ok);
                        durations.push(elapsed);
                    }
                    None => break,
                },
                _ = &mut deadline => {
                    // Aborted sends count as the whole timeout (§5.1 deviation).
                    durations.extend(std::iter::repeat_n(timeout, sends.len()));
                    break;
                }
            }
        }
        let now = self.inner.clock.elapsed().as_millis() as u64;
        let mut tracker = self.inner.broadcast_timeout.lock();
        for d in durations {
            tracker.record(now, d);
        }
        delivered
    }
}
