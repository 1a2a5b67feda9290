//! The blockchain RPC service (rpc.md §3): dispatch on the body's first u32, the handlers, the answer
//! codes of §2.6 and the metrics; plus broadcast receiving (§5.3) on `on_message`.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use futures_util::future::BoxFuture;
use tl_proto::TlWrite;
use tycho_network::{InboundRequestMeta, Response, Service, ServiceRequest};
use tycho_types::models::BlockId;

use crate::answer_cache::AnswerCache;
use crate::broadcast::{self, BroadcastListener, INLINE_VALIDATION_LIMIT};
use crate::config::BlockchainRpcServiceConfig;
use crate::proto::{self, rpc, Method, OverlayResponse, RpcRequest, BLOCK_CHUNK_SIZE};
use crate::providers::{ArchiveLookup, RpcDataProvider, StateChunkRequest, StateKind, StatePart};
use crate::view::BlockStorageView;

/// Error code: bad request (§2.6).
pub const ERR_BAD_REQUEST: u32 = 1;
/// Error code: internal failure.
pub const ERR_INTERNAL: u32 = 2;
/// Error code: not found.
pub const ERR_NOT_FOUND: u32 = 3;

/// The default network frame limit (8 MiB).
pub const DEFAULT_MAX_FRAME_SIZE: usize = 8 << 20;

/// What a handler answers.
enum Answer {
    /// A bare pong.
    Pong,
    /// `overlay.response.ok ‖ value`, already serialized.
    Ok(Bytes),
    /// `overlay.response.err ‖ code`.
    Err(u32),
}

fn ok<T: TlWrite<Repr = tl_proto::Boxed>>(value: T) -> Answer {
    Answer::Ok(Bytes::from(tl_proto::serialize(OverlayResponse::Ok(value))))
}

impl Answer {
    fn label(&self) -> &'static str {
        match self {
            Self::Pong => "pong",
            Self::Ok(_) => "ok",
            Self::Err(ERR_BAD_REQUEST) => "err1",
            Self::Err(ERR_INTERNAL) => "err2",
            Self::Err(ERR_NOT_FOUND) => "err3",
            Self::Err(_) => "err",
        }
    }

    fn into_bytes(self) -> Bytes {
        match self {
            Self::Pong => Bytes::from(tl_proto::serialize(proto::Pong)),
            Self::Ok(bytes) => bytes,
            Self::Err(code) => Bytes::from(tl_proto::serialize(
                OverlayResponse::<proto::Data>::Err(code),
            )),
        }
    }
}

struct Inner {
    storage: Arc<dyn BlockStorageView>,
    provider: Arc<dyn RpcDataProvider>,
    listener: Option<Arc<dyn BroadcastListener>>,
    config: BlockchainRpcServiceConfig,
    max_frame_size: usize,
    /// Recent getBlockFull answers (`block_full_cache_size`); `None` when off.
    block_full_cache: Option<AnswerCache>,
}

/// The service installed in the `blockchain_rpc` public overlay. Cheap to clone.
#[derive(Clone)]
pub struct BlockchainRpcService {
    inner: Arc<Inner>,
}

/// Builder step: the storage view.
pub struct ServiceBuilder(());
/// Builder step: the provider.
pub struct ServiceBuilderWithStorage(Arc<dyn BlockStorageView>);
/// Builder step: the broadcast listener.
pub struct ServiceBuilderWithProvider(Arc<dyn BlockStorageView>, Arc<dyn RpcDataProvider>);
/// Final builder step: config and frame limit.
pub struct ServiceBuilderReady {
    storage: Arc<dyn BlockStorageView>,
    provider: Arc<dyn RpcDataProvider>,
    listener: Option<Arc<dyn BroadcastListener>>,
    config: BlockchainRpcServiceConfig,
    max_frame_size: usize,
}

impl BlockchainRpcService {
    /// Starts a builder.
    pub fn builder() -> ServiceBuilder {
        ServiceBuilder(())
    }
}

impl ServiceBuilder {
    /// The storage the blocks come from.
    pub fn with_storage(self, view: impl BlockStorageView) -> ServiceBuilderWithStorage {
        ServiceBuilderWithStorage(Arc::new(view))
    }
}

impl ServiceBuilderWithStorage {
    /// The archive and state provider.
    pub fn with_provider(self, provider: impl RpcDataProvider) -> ServiceBuilderWithProvider {
        ServiceBuilderWithProvider(self.0, Arc::new(provider))
    }
}

impl ServiceBuilderWithProvider {
    /// The network listener of valid external messages.
    pub fn with_broadcast_listener(self, listener: impl BroadcastListener) -> ServiceBuilderReady {
        self.ready(Some(Arc::new(listener)))
    }

    /// Drops every broadcast after validation.
    pub fn without_broadcast_listener(self) -> ServiceBuilderReady {
        self.ready(None)
    }

    fn ready(self, listener: Option<Arc<dyn BroadcastListener>>) -> ServiceBuilderReady {
        ServiceBuilderReady {
            storage: self.0,
            provider: self.1,
            listener,
            config: BlockchainRpcServiceConfig::default(),
            max_frame_size: DEFAULT_MAX_FRAME_SIZE,
        }
    }
}

impl ServiceBuilderReady {
    /// The `blockchain_rpc_service` section.
    pub fn with_config(mut self, config: BlockchainRpcServiceConfig) -> Self {
        self.config = config;
        self
    }

    /// The network frame limit (for the chunk cap of §4.5).
    pub fn with_max_frame_size(mut self, max_frame_size: usize) -> Self {
        self.max_frame_size = max_frame_size;
        self
    }

    /// Builds the service.
    pub fn build(self) -> BlockchainRpcService {
        BlockchainRpcService {
            inner: Arc::new(Inner {
                storage: self.storage,
                provider: self.provider,
                listener: self.listener,
                block_full_cache: AnswerCache::new(
                    usize::try_from(self.config.block_full_cache_size.as_u64())
                        .unwrap_or(usize::MAX),
                ),
                config: self.config,
                max_frame_size: self.max_frame_size,
            }),
        }
    }
}

impl BlockchainRpcService {
    /// Answers one query body; `None` = no answer (unknown or undecodable, §2.2 item 5).
    pub async fn handle_query(&self, body: &[u8]) -> Option<Bytes> {
        let Some(method) = Method::of_body(body) else {
            metrics::counter!("regolith_rpc_unknown_queries_total").increment(1);
            return None;
        };
        if method.is_extension() && !self.inner.config.serve_next_blocks_batch {
            // Switched off: the query goes unanswered, exactly as a stock node treats it.
            metrics::counter!("regolith_rpc_unknown_queries_total").increment(1);
            return None;
        }
        let started = Instant::now();
        metrics::counter!("regolith_rpc_requests_total", "method" => method.name()).increment(1);
        let request = match RpcRequest::decode(body) {
            Ok(request) => request,
            Err(e) => {
                tracing::debug!(method = method.name(), error = ?e, "undecodable query");
                metrics::counter!("regolith_rpc_answers_total", "method" => method.name(), "code" => "none")
                    .increment(1);
                return None;
            }
        };
        let answer = self.inner.dispatch(request).await;
        metrics::histogram!("regolith_rpc_request_seconds", "method" => method.name())
            .record(started.elapsed().as_secs_f64());
        metrics::counter!("regolith_rpc_answers_total", "method" => method.name(), "code" => answer.label())
            .increment(1);
        let bytes = answer.into_bytes();
        metrics::counter!("regolith_rpc_bytes_served_total", "method" => method.name())
            .increment(bytes.len() as u64);
        Some(bytes)
    }

    /// Receives one broadcast body (§5.3); returns whether it reached the listener stage.
    pub async fn handle_message(&self, meta: Arc<InboundRequestMeta>, body: Bytes) -> bool {
        let boc = match broadcast::unwrap_broadcast(&body) {
            Ok(boc) => body.slice_ref(boc),
            Err(e) => {
                tracing::debug!(peer = %meta.peer_id, error = %e, "broadcast dropped");
                metrics::counter!("regolith_rpc_broadcasts_rejected_total", "reason" => "framing")
                    .increment(1);
                return false;
            }
        };
        metrics::counter!("regolith_rpc_broadcast_bytes_total").increment(boc.len() as u64);
        let validity = if boc.len() > INLINE_VALIDATION_LIMIT {
            let boc = boc.clone();
            tokio::task::spawn_blocking(move || broadcast::validate_external_message(&boc))
                .await
                .unwrap_or_else(|e| {
                    Err(broadcast::BroadcastError::Invalid(format!(
                        "validation task failed: {e}"
                    )))
                })
        } else {
            broadcast::validate_external_message(&boc)
        };
        if let Err(e) = validity {
            tracing::debug!(peer = %meta.peer_id, error = %e, "broadcast dropped");
            metrics::counter!("regolith_rpc_broadcasts_rejected_total", "reason" => "invalid")
                .increment(1);
            return false;
        }
        metrics::counter!("regolith_rpc_broadcasts_received_total").increment(1);
        if let Some(listener) = &self.inner.listener {
            listener.handle_message(meta, boc).await;
        }
        true
    }
}

impl Inner {
    async fn dispatch(&self, request: RpcRequest) -> Answer {
        match request {
            RpcRequest::Ping(_) => Answer::Pong,
            RpcRequest::GetNextKeyBlockIds(r) => self.next_key_block_ids(r).await,
            RpcRequest::GetBlockFull(r) => self.block_full(&r.block_id).await,
            RpcRequest::GetNextBlockFull(r) => self.next_block_full(&r.prev_block_id).await,
            RpcRequest::GetBlockDataChunk(r) => self.block_data_chunk(r).await,
            RpcRequest::GetKeyBlockProof(r) => self.key_block_proof(&r.block_id).await,
            RpcRequest::GetZerostateProof(_) => match self.storage.zerostate_proof().await {
                Ok(Some(proof)) => ok(proto::ZerostateProof::Found { proof }),
                Ok(None) => ok(proto::ZerostateProof::NotFound),
                Err(e) => internal("getZerostateProof", e),
            },
            RpcRequest::GetArchiveInfo(r) => self.archive_info(r.mc_seqno).await,
            RpcRequest::GetArchiveChunk(r) => self.archive_chunk(r).await,
            RpcRequest::GetPersistentShardStateInfo(r) => {
                self.state_info(&r.block_id, StateKind::Shard).await
            }
            RpcRequest::GetPersistentQueueStateInfo(r) => {
                self.state_info(&r.block_id, StateKind::Queue).await
            }
            RpcRequest::GetPersistentShardStateChunk(r) => {
                self.state_chunk(&StateChunkRequest::new(
                    &r.block_id,
                    r.offset,
                    StateKind::Shard,
                    StatePart::Unsplit,
                ))
                .await
            }
            RpcRequest::GetPersistentShardStateRootChunk(r) => {
                self.state_chunk(&StateChunkRequest::new(
                    &r.block_id,
                    r.offset,
                    StateKind::Shard,
                    StatePart::SplitRoot,
                ))
                .await
            }
            RpcRequest::GetPersistentShardStatePartChunk(r) => {
                self.state_chunk(&StateChunkRequest::new(
                    &r.block_id,
                    r.offset,
                    StateKind::Shard,
                    StatePart::SplitPart(r.prefix),
                ))
                .await
            }
            RpcRequest::GetPersistentQueueStateChunk(r) => {
                self.state_chunk(&StateChunkRequest::new(
                    &r.block_id,
                    r.offset,
                    StateKind::Queue,
                    StatePart::Unsplit,
                ))
                .await
            }
            RpcRequest::GetNextBlocksFull(r) => self.next_blocks_full(r).await,
        }
    }

    /// The largest chunk a provider may announce (§4.5).
    fn max_chunk(&self) -> u64 {
        (self.max_frame_size as u64).saturating_sub(crate::providers::FRAME_RESERVE)
    }

    async fn next_key_block_ids(&self, r: rpc::GetNextKeyBlockIds) -> Answer {
        let limit = (r.max_size as usize).min(self.config.max_key_blocks_list_len);
        if !r.block_id.is_masterchain() {
            return Answer::Err(ERR_INTERNAL);
        }
        let items = match self
            .storage
            .key_blocks_from(r.block_id.seqno, limit.saturating_add(1))
            .await
        {
            Ok(items) => items,
            Err(e) => return internal("getNextKeyBlockIds", e),
        };
        let mut items = items.into_iter();
        if let Some(first) = items.next() {
            if first.root_hash != r.block_id.root_hash || first.file_hash != r.block_id.file_hash {
                return Answer::Err(ERR_INTERNAL);
            }
        }
        let block_ids: Vec<BlockId> = items.take(limit).collect();
        let incomplete = block_ids.len() < limit;
        ok(proto::KeyBlockIds {
            block_ids,
            incomplete,
        })
    }

    async fn block_full(&self, id: &BlockId) -> Answer {
        if let Some(cache) = &self.block_full_cache {
            if let Some(answer) = cache.get(id) {
                // Stored parts never change, but GC may have removed the block since.
                match self.storage.handle(id).await {
                    Ok(Some(flags)) if flags.has_all_parts() => {
                        metrics::counter!("regolith_rpc_block_full_cache_hits_total").increment(1);
                        metrics::counter!("regolith_rpc_blocks_served_total").increment(1);
                        return Answer::Ok(answer);
                    }
                    Ok(_) => cache.remove(id),
                    Err(e) => return internal("getBlockFull", e),
                }
            }
        }
        let (answer, found) = self.read_block_full(id).await;
        if let (Some(cache), Answer::Ok(bytes), true) = (&self.block_full_cache, &answer, found) {
            cache.insert(*id, bytes.clone());
        }
        answer
    }

    /// getBlockFull from storage: every part read, the answer serialized; whether the block was found.
    async fn read_block_full(&self, id: &BlockId) -> (Answer, bool) {
        let parts = match self
            .storage
            .block_full(id, u64::from(BLOCK_CHUNK_SIZE))
            .await
        {
            Ok(Some(parts)) if parts.size > 0 => parts,
            Ok(_) => return (ok(proto::BlockFull::NotFound), false),
            Err(e) => return (internal("getBlockFull", e), false),
        };
        let Ok(size) = u32::try_from(parts.size) else {
            tracing::warn!(block = %id, size = parts.size, "compressed block does not fit the u32 size field");
            return (Answer::Err(ERR_INTERNAL), false);
        };
        metrics::counter!("regolith_rpc_blocks_served_total").increment(1);
        let answer = ok(proto::BlockFull::Found {
            block_id: *id,
            block: proto::BlockData {
                data: parts.first_chunk,
                size,
                chunk_size: BLOCK_CHUNK_SIZE,
            },
            proof: parts.proof,
            queue_diff: parts.queue_diff,
        });
        (answer, true)
    }

    async fn next_block_full(&self, prev: &BlockId) -> Answer {
        match self.storage.handle(prev).await {
            Ok(Some(flags)) if flags.has_next1 => {}
            Ok(_) => return ok(proto::BlockFull::NotFound),
            Err(e) => return internal("getNextBlockFull", e),
        }
        match self.storage.next1(prev).await {
            Ok(Some(next)) => self.block_full(&next).await,
            Ok(None) => Answer::Err(ERR_INTERNAL),
            Err(e) => internal("getNextBlockFull", e),
        }
    }

    /// `regolith.getNextBlocksFull`: the mc blocks after `prev` by next1, each followed by the shard
    /// blocks it is the first to reference, every block whole, until the count or the byte budget (the
    /// asked one, 4 MiB and the frame) would be passed. A block that does not fit ends the answer, so a
    /// client misses at most the shard blocks of the last mc block, which it asks for one by one. A
    /// failure after the first block ends the answer with what it has.
    async fn next_blocks_full(&self, r: rpc::GetNextBlocksFull) -> Answer {
        if !r.prev_block_id.is_masterchain() {
            return Answer::Err(ERR_BAD_REQUEST);
        }
        let max_mc = r.max_mc_blocks.min(proto::MAX_BATCH_MC_BLOCKS);
        let budget = (r.max_bytes.min(proto::MAX_BATCH_BYTES) as usize)
            .min(self.max_chunk().try_into().unwrap_or(usize::MAX));
        // `overlay.response.ok`, the answer's id and its count.
        let mut used = 12usize;
        let mut blocks = Vec::new();
        let mut prev = r.prev_block_id;
        'mc: for _ in 0..max_mc {
            let next = match self.next_of(&prev).await {
                Ok(Some(next)) => next,
                Ok(None) => break,
                Err(e) if blocks.is_empty() => return internal("getNextBlocksFull", e),
                Err(_) => break,
            };
            match self.whole_block(&next, budget.saturating_sub(used)).await {
                Ok(Some(entry)) => {
                    used += entry.max_size_hint();
                    blocks.push(entry);
                }
                Ok(None) => break,
                Err(e) if blocks.is_empty() => return internal("getNextBlocksFull", e),
                Err(_) => break,
            }
            prev = next;
            let Ok(shards) = self
                .storage
                .shard_blocks_of(&next, proto::MAX_BATCH_SHARD_BLOCKS)
                .await
            else {
                break;
            };
            for id in shards {
                match self.whole_block(&id, budget.saturating_sub(used)).await {
                    Ok(Some(entry)) => {
                        used += entry.max_size_hint();
                        blocks.push(entry);
                    }
                    Ok(None) | Err(_) => break 'mc,
                }
            }
        }
        metrics::counter!("regolith_rpc_blocks_served_total").increment(blocks.len() as u64);
        ok(proto::NextBlocks { blocks })
    }

    /// The block after mc block `prev` by its next1 connection.
    async fn next_of(
        &self,
        prev: &BlockId,
    ) -> Result<Option<BlockId>, crate::error::ProviderError> {
        match self.storage.handle(prev).await? {
            Some(flags) if flags.has_next1 => self.storage.next1(prev).await,
            _ => Ok(None),
        }
    }

    /// A block with every part, when all of it fits in `room` bytes of a batch answer.
    async fn whole_block(
        &self,
        id: &BlockId,
        room: usize,
    ) -> Result<Option<proto::NextBlock>, crate::error::ProviderError> {
        let Some(parts) = self.storage.block_full(id, room as u64).await? else {
            return Ok(None);
        };
        if parts.size == 0 || parts.size > parts.first_chunk.len() as u64 {
            return Ok(None);
        }
        let entry = proto::NextBlock {
            block_id: *id,
            data: parts.first_chunk,
            proof: parts.proof,
            queue_diff: parts.queue_diff,
        };
        Ok((entry.max_size_hint() <= room).then_some(entry))
    }

    async fn block_data_chunk(&self, r: rpc::GetBlockDataChunk) -> Answer {
        match self.storage.handle(&r.block_id).await {
            Ok(Some(flags)) if flags.has_data => {}
            Ok(_) => return Answer::Err(ERR_NOT_FOUND),
            Err(e) => return internal("getBlockDataChunk", e),
        }
        match self
            .storage
            .block_data_range(
                &r.block_id,
                u64::from(r.offset),
                u64::from(BLOCK_CHUNK_SIZE),
            )
            .await
        {
            Ok(Some(data)) if !data.is_empty() => ok(proto::Data { data }),
            Ok(_) => Answer::Err(ERR_NOT_FOUND),
            Err(e) => internal("getBlockDataChunk", e),
        }
    }

    async fn key_block_proof(&self, id: &BlockId) -> Answer {
        match self.storage.handle(id).await {
            Ok(Some(flags)) if flags.has_proof && !flags.is_removed => {}
            Ok(_) => return ok(proto::KeyBlockProof::NotFound),
            Err(e) => return internal("getKeyBlockProof", e),
        }
        match self.storage.proof(id).await {
            Ok(Some(proof)) => ok(proto::KeyBlockProof::Found { proof }),
            Ok(None) => ok(proto::KeyBlockProof::NotFound),
            Err(e) => internal("getKeyBlockProof", e),
        }
    }

    async fn archive_info(&self, mc_seqno: u32) -> Answer {
        match self.provider.archive_info(mc_seqno).await {
            Ok(ArchiveLookup::Found {
                id,
                size,
                chunk_size,
            }) => {
                if chunk_size == 0 || chunk_size > self.max_chunk() {
                    tracing::warn!(
                        archive_id = id,
                        chunk_size,
                        "provider announced a chunk larger than the frame"
                    );
                    return Answer::Err(ERR_INTERNAL);
                }
                if size == 0 {
                    return ok(proto::ArchiveInfo::NotFound);
                }
                ok(proto::ArchiveInfo::Found {
                    id: u64::from(id),
                    size,
                    chunk_size: chunk_size as u32,
                })
            }
            Ok(ArchiveLookup::TooNew) => ok(proto::ArchiveInfo::TooNew),
            Ok(ArchiveLookup::NotFound) => ok(proto::ArchiveInfo::NotFound),
            Err(e) => internal("getArchiveInfo", e),
        }
    }

    async fn archive_chunk(&self, r: rpc::GetArchiveChunk) -> Answer {
        // [deviation] the reference truncates a 64-bit id; we refuse it.
        let Ok(archive_id) = u32::try_from(r.archive_id) else {
            return Answer::Err(ERR_INTERNAL);
        };
        match self.provider.archive_chunk(archive_id, r.offset).await {
            Ok(data) => ok(proto::Data { data }),
            Err(e) => internal("getArchiveChunk", e),
        }
    }

    async fn state_info(&self, block: &BlockId, kind: StateKind) -> Answer {
        if !self.config.serve_persistent_states {
            return ok(proto::PersistentStateInfo::NotFound);
        }
        let info = match self.provider.state_info(block, kind).await {
            Ok(Some(info)) => info,
            Ok(None) => return ok(proto::PersistentStateInfo::NotFound),
            Err(e) => return internal("getPersistentStateInfo", e),
        };
        if info.chunk_size == 0 || info.chunk_size > self.max_chunk() {
            tracing::warn!(%block, chunk_size = info.chunk_size, "provider announced a chunk larger than the frame");
            return Answer::Err(ERR_INTERNAL);
        }
        if info.size == 0 {
            return ok(proto::PersistentStateInfo::NotFound);
        }
        let chunk_size = info.chunk_size as u32;
        if kind == StateKind::Shard && info.split_depth > 0 {
            if info.parts.len() > proto::codec::part_vec::MAX_PARTS
                || info.parts.iter().any(|p| p.size == 0)
            {
                return Answer::Err(ERR_INTERNAL);
            }
            ok(proto::PersistentStateInfo::FoundWithParts {
                size: info.size,
                chunk_size,
                split_depth: u32::from(info.split_depth),
                parts: info
                    .parts
                    .iter()
                    .map(|p| proto::PersistentStatePartInfo {
                        prefix: p.prefix,
                        size: p.size,
                    })
                    .collect(),
            })
        } else {
            ok(proto::PersistentStateInfo::Found {
                size: info.size,
                chunk_size,
            })
        }
    }

    async fn state_chunk(&self, request: &StateChunkRequest) -> Answer {
        if !self.config.serve_persistent_states {
            return Answer::Err(ERR_BAD_REQUEST);
        }
        match self.provider.state_chunk(request).await {
            Ok(Some(data)) => ok(proto::Data { data }),
            Ok(None) => Answer::Err(ERR_NOT_FOUND),
            Err(e) => internal("getPersistentStateChunk", e),
        }
    }
}

fn internal(method: &'static str, error: crate::error::ProviderError) -> Answer {
    tracing::warn!(method, error = %error, "request failed");
    Answer::Err(ERR_INTERNAL)
}

impl Service<ServiceRequest> for BlockchainRpcService {
    type QueryResponse = Response;
    type OnQueryFuture = BoxFuture<'static, Option<Response>>;
    type OnMessageFuture = BoxFuture<'static, ()>;

    fn on_query(&self, req: ServiceRequest) -> Self::OnQueryFuture {
        let this = self.clone();
        Box::pin(async move {
            let body = this.handle_query(&req.body).await?;
            Some(Response {
                version: Default::default(),
                body,
            })
        })
    }

    fn on_message(&self, req: ServiceRequest) -> Self::OnMessageFuture {
        let this = self.clone();
        Box::pin(async move {
            this.handle_message(req.metadata, req.body).await;
        })
    }
}
