//! Block components: data, proof and queue diff, stored as zstd frames; whole and ranged reads; waiting for
//! block data; listing (storage.md §7.1–§7.4).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::RwLock;
use regolith_formats::archive::ArchiveEntryType;
use regolith_formats::queue_diff::QueueDiff;
use regolith_formats::{BlockId, BlockKey, CheckedBlock, ShardIdent};
use regolith_kv::Batch;
use tycho_types::models::BlockProof;

use crate::block_cache::BlockCache;
use crate::block_handle::{BlockHandle, BlockHandleStorage, HandleStatus, MaybeExistingHandle};
use crate::block_meta::{BlockFlags, NewBlockMeta};
use crate::db::CoreDb;
use crate::error::{Result, StorageError};
use crate::parsed::{parse_proof, ParsedBlock};
use crate::subscriptions::Subscriptions;
use crate::tables::{
    BlockComponents, BlockHandles, BlockIds, ComponentKey, KeyRange, RawBytes, ShortIdPrefix,
    StoredBlockKey, StoredHash,
};

/// Blocks of at least this size are parsed on the blocking pool.
const BLOCKING_PARSE_THRESHOLD: usize = 1 << 20;
/// Queue diffs of at least this size are parsed on the blocking pool.
const BLOCKING_DIFF_PARSE_THRESHOLD: usize = 100 << 10;
/// The parts of a checked block are compressed on the blocking pool when together at least this large;
/// smaller ones compress faster than a hand-over to another thread.
const BLOCKING_COMPRESS_THRESHOLD: usize = 256 << 10;

/// Result of a component store.
#[derive(Debug, Clone)]
pub struct StoreResult {
    /// The block's handle.
    pub handle: BlockHandle,
    /// Whether this call stored the component.
    pub updated: bool,
    /// Whether this call created the handle.
    pub new: bool,
}

fn flag_of(ty: ArchiveEntryType) -> BlockFlags {
    match ty {
        ArchiveEntryType::Block => BlockFlags::HAS_DATA,
        ArchiveEntryType::Proof => BlockFlags::HAS_PROOF,
        ArchiveEntryType::QueueDiff => BlockFlags::HAS_QUEUE_DIFF,
    }
}

fn has_component(handle: &BlockHandle, ty: ArchiveEntryType) -> bool {
    match ty {
        ArchiveEntryType::Block => handle.has_data(),
        ArchiveEntryType::Proof => handle.has_proof(),
        ArchiveEntryType::QueueDiff => handle.has_queue_diff(),
    }
}

fn component_lock(handle: &BlockHandle, ty: ArchiveEntryType) -> &tokio::sync::RwLock<()> {
    match ty {
        ArchiveEntryType::Block => &handle.0.data_lock,
        ArchiveEntryType::Proof => &handle.0.proof_lock,
        ArchiveEntryType::QueueDiff => &handle.0.queue_diff_lock,
    }
}

fn component_name(ty: ArchiveEntryType) -> &'static str {
    match ty {
        ArchiveEntryType::Block => "data",
        ArchiveEntryType::Proof => "proof",
        ArchiveEntryType::QueueDiff => "queue diff",
    }
}

/// Compresses a component into its stored frame (content size set). Each thread keeps one compression
/// context per level: creating one costs more than compressing a typical block.
fn compress(raw: &[u8], level: i32) -> std::io::Result<Vec<u8>> {
    thread_local! {
        static COMPRESSOR: std::cell::RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> =
            const { std::cell::RefCell::new(None) };
    }
    COMPRESSOR.with(|slot| {
        let mut slot = slot.borrow_mut();
        if slot.as_ref().is_none_or(|(l, _)| *l != level) {
            *slot = Some((level, zstd::bulk::Compressor::new(level)?));
        }
        let (_, compressor) = slot.as_mut().expect("set above");
        compressor.compress(raw)
    })
}

/// The largest declared size decoded in one call with the thread's reused context; a frame that declares
/// more (or nothing: a stored form of an older build) goes through the streaming decoder, which grows its
/// output only as it decodes, so a corrupt size field cannot allocate it up front.
const BULK_DECOMPRESS_MAX: u64 = 256 << 20;

/// Decompresses a stored component frame. The stored form (one frame with its content size) is decoded with
/// a decompression context each thread keeps: creating one costs more than decoding a proof or a diff.
pub(crate) fn decompress(id: &BlockId, ty: ArchiveEntryType, frame: &[u8]) -> Result<Vec<u8>> {
    use zstd::zstd_safe;
    thread_local! {
        static DECOMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
            const { std::cell::RefCell::new(None) };
    }
    let what = || format!("stored {} of block {id}", component_name(ty));
    if let Ok(Some(size)) = zstd_safe::get_frame_content_size(frame) {
        if size <= BULK_DECOMPRESS_MAX
            && zstd_safe::find_frame_compressed_size(frame) == Ok(frame.len())
        {
            let decoded = DECOMPRESSOR.with(|slot| {
                let mut slot = slot.borrow_mut();
                let decompressor = match &mut *slot {
                    Some(d) => d,
                    None => slot.insert(zstd::bulk::Decompressor::new()?),
                };
                // At most 256 MiB, checked above.
                let mut out = Vec::with_capacity(size as usize);
                decompressor.decompress_to_buffer(frame, &mut out)?;
                std::io::Result::Ok(out)
            });
            return match decoded {
                Ok(out) if out.len() as u64 == size => Ok(out),
                Ok(out) => Err(StorageError::corruption(
                    what(),
                    format!(
                        "the frame declares {size} bytes and decodes to {}",
                        out.len()
                    ),
                )),
                Err(e) => Err(StorageError::corruption(what(), e)),
            };
        }
    }
    zstd::stream::decode_all(frame).map_err(|e| StorageError::corruption(what(), e))
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    match tokio::task::spawn_blocking(f).await {
        Ok(v) => v,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}

/// Stores and reads block components.
pub struct BlockComponentStorage {
    db: Arc<CoreDb>,
    handles: Arc<BlockHandleStorage>,
    cache: BlockCache,
    zstd_level: i32,
    list_page: usize,
    /// Inverted roles: writers take the shared side, the waiter the exclusive side.
    data_wait_lock: RwLock<()>,
    data_subscriptions: Subscriptions<BlockId, (BlockHandle, Arc<ParsedBlock>)>,
}

impl BlockComponentStorage {
    pub(crate) fn new(
        db: Arc<CoreDb>,
        handles: Arc<BlockHandleStorage>,
        cache: BlockCache,
        zstd_level: i32,
        list_page: usize,
    ) -> Self {
        Self {
            db,
            handles,
            cache,
            zstd_level,
            list_page,
            data_wait_lock: RwLock::new(()),
            data_subscriptions: Subscriptions::default(),
        }
    }

    pub(crate) fn block_cache(&self) -> &BlockCache {
        &self.cache
    }

    fn resolve(&self, id: &BlockId, handle: MaybeExistingHandle) -> Result<(BlockHandle, bool)> {
        match handle {
            MaybeExistingHandle::Existing(h) => {
                if h.id() != id {
                    return Err(StorageError::BlockHandleIdMismatch {
                        expected: Box::new(*id),
                        actual: Box::new(*h.id()),
                    });
                }
                Ok((h, false))
            }
            MaybeExistingHandle::New(meta) => {
                let (h, status) = self.handles.create_or_load_handle(id, meta)?;
                Ok((h, status == HandleStatus::Created))
            }
        }
    }

    /// Stores block data; parses it first (the root hash must match the id) for validation and the cache.
    pub async fn store_block_data(
        &self,
        id: &BlockId,
        raw: Bytes,
        meta: NewBlockMeta,
    ) -> Result<StoreResult> {
        let parsed = {
            let id = *id;
            let raw = raw.clone();
            if raw.len() >= BLOCKING_PARSE_THRESHOLD {
                blocking(move || ParsedBlock::parse(&id, &raw)).await?
            } else {
                ParsedBlock::parse(&id, &raw)?
            }
        };
        let parsed = Arc::new(parsed);
        let result = self
            .store_component(
                id,
                ArchiveEntryType::Block,
                raw,
                MaybeExistingHandle::New(meta),
                Some(&parsed),
            )
            .await?;
        self.cache.insert(parsed);
        Ok(result)
    }

    /// Stores a block proof (a BOC; checked to be a proof for `id`).
    pub async fn store_block_proof(
        &self,
        id: &BlockId,
        raw: Bytes,
        handle: impl Into<MaybeExistingHandle>,
    ) -> Result<StoreResult> {
        let proof = parse_proof(id, &raw)?;
        if proof.proof_for != *id {
            return Err(StorageError::InvalidData {
                what: format!("block proof of block {id}"),
                reason: format!("the proof is for {}", proof.proof_for),
            });
        }
        self.store_component(id, ArchiveEntryType::Proof, raw, handle.into(), None)
            .await
    }

    /// Stores a queue diff (TL `block.queueDiff`; checked to belong to `id`).
    pub async fn store_queue_diff(
        &self,
        id: &BlockId,
        raw: Bytes,
        handle: impl Into<MaybeExistingHandle>,
    ) -> Result<StoreResult> {
        QueueDiff::parse_for_block(&raw, id).map_err(|e| StorageError::InvalidData {
            what: format!("queue diff of block {id}"),
            reason: e.to_string(),
        })?;
        self.store_component(id, ArchiveEntryType::QueueDiff, raw, handle.into(), None)
            .await
    }

    /// The stored form of a checked block's data (one zstd frame with its content size, at this storage's
    /// level), for [`CheckedBlock::with_data_frame`]: a caller that checks blocks on a thread of its own
    /// compresses there, and [`Self::store_checked_block`] keeps the frame instead of compressing.
    pub fn compress_block_data(&self, block: CheckedBlock) -> Result<CheckedBlock> {
        if block.data_frame().is_some() {
            return Ok(block);
        }
        let frame = compress(block.data(), self.zstd_level).map_err(StorageError::io(format!(
            "compressing the block data of {}",
            block.id()
        )))?;
        Ok(block.with_data_frame(Bytes::from(frame)))
    }

    /// Stores every part of a checked block (data, proof and queue diff) under its handle, created with the
    /// block's meta and `ref_by_mc_seqno` if the block is unknown. The parts not stored yet go into one batch
    /// with the merge that sets their flags. Nothing is parsed or hashed again: [`CheckedBlock::check`] made
    /// the checks the single-part stores make, and more. `updated` = this call stored at least one part.
    pub async fn store_checked_block(
        &self,
        block: &CheckedBlock,
        ref_by_mc_seqno: u32,
    ) -> Result<StoreResult> {
        let id = block.id();
        let meta = NewBlockMeta {
            is_key_block: block.is_key_block(),
            gen_utime: block.gen_utime(),
            ref_by_mc_seqno,
        };
        let (handle, new) = self.resolve(id, MaybeExistingHandle::New(meta))?;
        if handle.is_removed() {
            return Err(StorageError::HandleRemoved(*id));
        }
        let parts = [
            (ArchiveEntryType::Block, block.data()),
            (ArchiveEntryType::Proof, block.proof_raw()),
            (ArchiveEntryType::QueueDiff, block.queue_diff_raw()),
        ];
        let missing: Vec<(ArchiveEntryType, Bytes)> = parts
            .iter()
            .filter(|(ty, _)| !has_component(&handle, *ty))
            .map(|(ty, raw)| (*ty, Bytes::clone(raw)))
            .collect();
        let mut updated = false;
        if !missing.is_empty() {
            // A block frame as served is already the stored form (one frame with its content size).
            let served = block.data_frame().cloned();
            let (kept, to_compress): (Vec<_>, Vec<_>) = missing
                .into_iter()
                .partition(|(ty, _)| *ty == ArchiveEntryType::Block && served.is_some());
            let mut frames = self.compress_parts(id, to_compress).await?;
            if let (Some(frame), false) = (served, kept.is_empty()) {
                frames.insert(0, (ArchiveEntryType::Block, RawBytes(frame.to_vec())));
            }
            // Locks in the fixed order data, proof, queue diff, so that two stores of one block cannot deadlock.
            let mut guards = Vec::with_capacity(frames.len());
            for (ty, _) in &frames {
                guards.push(component_lock(&handle, *ty).write().await);
            }
            let frames: Vec<_> = frames
                .into_iter()
                .filter(|(ty, _)| !has_component(&handle, *ty))
                .collect();
            if handle.is_removed() {
                return Err(StorageError::HandleRemoved(*id));
            }
            if !frames.is_empty() {
                let _wait_guard = self.data_wait_lock.read();
                let flags = frames
                    .iter()
                    .fold(BlockFlags::EMPTY, |f, (ty, _)| f | flag_of(*ty));
                self.write_components(&handle, frames)?;
                updated = handle.meta().add_flags(flags);
                self.data_subscriptions
                    .notify(id, &(handle.clone(), block.parsed().clone()));
            }
            drop(guards);
        }
        if !updated {
            let _wait_guard = self.data_wait_lock.read();
            self.data_subscriptions
                .notify(id, &(handle.clone(), block.parsed().clone()));
        }
        self.cache.insert(block.parsed().clone());
        Ok(StoreResult {
            handle,
            updated,
            new,
        })
    }

    /// Compresses parts into stored frames, on the blocking pool when they are large.
    async fn compress_parts(
        &self,
        id: &BlockId,
        parts: Vec<(ArchiveEntryType, Bytes)>,
    ) -> Result<Vec<(ArchiveEntryType, RawBytes)>> {
        let level = self.zstd_level;
        let id = *id;
        let large =
            parts.iter().map(|(_, raw)| raw.len()).sum::<usize>() >= BLOCKING_COMPRESS_THRESHOLD;
        let compress = move || {
            parts
                .into_iter()
                .map(|(ty, raw)| {
                    compress(&raw, level)
                        .map(|frame| (ty, RawBytes(frame)))
                        .map_err(StorageError::io(format!(
                            "compressing {} of {id}",
                            component_name(ty)
                        )))
                })
                .collect::<Result<Vec<_>>>()
        };
        if large {
            blocking(compress).await
        } else {
            compress()
        }
    }

    async fn store_component(
        &self,
        id: &BlockId,
        ty: ArchiveEntryType,
        raw: Bytes,
        handle: MaybeExistingHandle,
        parsed: Option<&Arc<ParsedBlock>>,
    ) -> Result<StoreResult> {
        let (handle, new) = self.resolve(id, handle)?;
        if handle.is_removed() {
            return Err(StorageError::HandleRemoved(*id));
        }
        let mut updated = false;
        if !has_component(&handle, ty) {
            let level = self.zstd_level;
            let frame = blocking(move || compress(&raw, level))
                .await
                .map_err(StorageError::io(format!(
                    "compressing {} of {id}",
                    component_name(ty)
                )))?;

            let _component_guard = component_lock(&handle, ty).write().await;
            if !has_component(&handle, ty) {
                if handle.is_removed() {
                    return Err(StorageError::HandleRemoved(*id));
                }
                let _wait_guard =
                    (ty == ArchiveEntryType::Block).then(|| self.data_wait_lock.read());
                self.write_component(&handle, ty, RawBytes(frame))?;
                updated = handle.meta().add_flags(flag_of(ty));
                if let Some(parsed) = parsed {
                    self.data_subscriptions
                        .notify(id, &(handle.clone(), parsed.clone()));
                }
                return Ok(StoreResult {
                    handle: handle.clone(),
                    updated,
                    new,
                });
            }
        }
        if let Some(parsed) = parsed {
            let _wait_guard = self.data_wait_lock.read();
            self.data_subscriptions
                .notify(id, &(handle.clone(), parsed.clone()));
        }
        Ok(StoreResult {
            handle,
            updated,
            new,
        })
    }

    /// One batch: the component row and the merge that sets its flag.
    fn write_component(
        &self,
        handle: &BlockHandle,
        ty: ArchiveEntryType,
        frame: RawBytes,
    ) -> Result<()> {
        self.write_components(handle, vec![(ty, frame)])
    }

    /// One batch: the component rows and one merge that sets their flags.
    fn write_components(
        &self,
        handle: &BlockHandle,
        frames: Vec<(ArchiveEntryType, RawBytes)>,
    ) -> Result<()> {
        let mut meta = handle.meta().load();
        let mut flags = BlockFlags(meta.flags.0 & !BlockFlags::IS_REMOVED.0);
        let mut batch = Batch::new();
        let mut what = Vec::with_capacity(frames.len());
        for (ty, frame) in frames {
            self.db.batch_put::<BlockComponents>(
                &mut batch,
                &ComponentKey(BlockKey::of(handle.id()), ty),
                &frame,
            );
            flags = flags | flag_of(ty);
            what.push(component_name(ty));
        }
        meta.flags = flags;
        self.db.batch_merge::<BlockHandles>(
            &mut batch,
            &StoredHash(handle.id().root_hash),
            &meta.into(),
        );
        self.db
            .fail_points
            .component_batch
            .check("component batch")?;
        Ok(self.db.write(
            batch,
            format_args!("storing {} of {}", what.join(", "), handle.id()),
        )?)
    }

    /// Test helper: stores arbitrary component bytes with its flag, in one batch, compressing them.
    #[cfg(feature = "test-utils")]
    pub fn store_raw_component_for_tests(
        &self,
        handle: &BlockHandle,
        ty: ArchiveEntryType,
        raw: &[u8],
    ) -> Result<()> {
        let frame = compress(raw, self.zstd_level)
            .map_err(StorageError::io("compressing a test component"))?;
        self.write_component(handle, ty, RawBytes(frame))?;
        handle.meta().add_flags(flag_of(ty));
        Ok(())
    }

    fn load_frame(&self, handle: &BlockHandle, ty: ArchiveEntryType) -> Result<Vec<u8>> {
        let key = ComponentKey(BlockKey::of(handle.id()), ty);
        match self.db.get::<BlockComponents>(&key)? {
            Some(RawBytes(frame)) => Ok(frame),
            None => Err(StorageError::Inconsistent(format!(
                "block {} has the {} flag but no stored {}",
                handle.id(),
                component_name(ty),
                component_name(ty)
            ))),
        }
    }

    async fn load_raw(&self, handle: &BlockHandle, ty: ArchiveEntryType) -> Result<Vec<u8>> {
        if !has_component(handle, ty) {
            return Err(StorageError::NotFound {
                what: component_name(ty),
                id: *handle.id(),
            });
        }
        let frame = {
            let _guard = component_lock(handle, ty).read().await;
            self.load_frame(handle, ty)?
        };
        decompress(handle.id(), ty, &frame)
    }

    /// The decompressed block BOC.
    pub async fn load_block_data_raw(&self, handle: &BlockHandle) -> Result<Vec<u8>> {
        self.load_raw(handle, ArchiveEntryType::Block).await
    }

    /// The parsed block (block cache first).
    pub async fn load_block_data(&self, handle: &BlockHandle) -> Result<Arc<ParsedBlock>> {
        if !handle.has_data() {
            return Err(StorageError::NotFound {
                what: "data",
                id: *handle.id(),
            });
        }
        if let Some(b) = self.cache.get(handle.id()) {
            return Ok(b);
        }
        let raw = self.load_block_data_raw(handle).await?;
        let id = *handle.id();
        let parsed = if raw.len() >= BLOCKING_PARSE_THRESHOLD {
            blocking(move || ParsedBlock::parse(&id, &raw)).await?
        } else {
            ParsedBlock::parse(&id, &raw)?
        };
        Ok(Arc::new(parsed))
    }

    /// The raw proof BOC.
    pub async fn load_block_proof_raw(&self, handle: &BlockHandle) -> Result<Vec<u8>> {
        self.load_raw(handle, ArchiveEntryType::Proof).await
    }

    /// The parsed proof.
    pub async fn load_block_proof(&self, handle: &BlockHandle) -> Result<BlockProof> {
        let raw = self.load_block_proof_raw(handle).await?;
        parse_proof(handle.id(), &raw)
    }

    /// The raw TL queue diff.
    pub async fn load_queue_diff_raw(&self, handle: &BlockHandle) -> Result<Vec<u8>> {
        self.load_raw(handle, ArchiveEntryType::QueueDiff).await
    }

    /// The parsed queue diff.
    pub async fn load_queue_diff(&self, handle: &BlockHandle) -> Result<QueueDiff> {
        let raw = self.load_queue_diff_raw(handle).await?;
        let id = *handle.id();
        let large = raw.len() >= BLOCKING_DIFF_PARSE_THRESHOLD;
        let parse = move || {
            QueueDiff::parse_for_block(&raw, &id).map_err(|e| {
                StorageError::corruption(format!("stored queue diff of block {id}"), e)
            })
        };
        if large {
            blocking(parse).await
        } else {
            parse()
        }
    }

    /// Bytes `[offset, min(offset+len, size))` of the compressed data frame; `Some(empty)` past the end;
    /// `None` without data. Takes no lock.
    pub fn load_block_data_range(
        &self,
        handle: &BlockHandle,
        offset: u64,
        len: u64,
    ) -> Result<Option<Bytes>> {
        if !handle.has_data() {
            return Ok(None);
        }
        let key = ComponentKey(BlockKey::of(handle.id()), ArchiveEntryType::Block);
        let Some(frame) = self.db.get_pinned::<BlockComponents>(&key)? else {
            return Ok(None);
        };
        let size = frame.len() as u64;
        if offset >= size {
            return Ok(Some(Bytes::new()));
        }
        let end = offset.saturating_add(len).min(size);
        Ok(Some(Bytes::copy_from_slice(
            &frame[offset as usize..end as usize],
        )))
    }

    /// Length of the compressed data frame.
    pub fn get_compressed_block_data_size(&self, handle: &BlockHandle) -> Result<Option<u64>> {
        if !handle.has_data() {
            return Ok(None);
        }
        let key = ComponentKey(BlockKey::of(handle.id()), ArchiveEntryType::Block);
        Ok(self
            .db
            .get_pinned::<BlockComponents>(&key)?
            .map(|v| v.len() as u64))
    }

    /// The mc block with seqno `seqno` (the smallest root if several), parsed; no handle, no lock.
    pub fn find_mc_block_data(&self, seqno: u32) -> Result<Option<ParsedBlock>> {
        if seqno == u32::MAX {
            return Ok(None);
        }
        let prefix = ShortIdPrefix {
            workchain: -1,
            prefix: ShardIdent::PREFIX_FULL,
            seqno,
        };
        // Data sorts first among the components of a block (type 0).
        for row in self.db.iter::<BlockComponents>(KeyRange::prefix(&prefix)) {
            let (key, RawBytes(frame)) = row?;
            if key.1 == ArchiveEntryType::Block {
                let id = self.id_of(key.0)?;
                let raw = decompress(&id, ArchiveEntryType::Block, &frame)?;
                return Ok(Some(ParsedBlock::parse(&id, &raw)?));
            }
        }
        Ok(None)
    }

    /// The id of a block with stored data, from its id row.
    fn id_of(&self, key: BlockKey) -> Result<BlockId> {
        let StoredHash(file_hash) =
            self.db
                .get::<BlockIds>(&StoredBlockKey(key))?
                .ok_or_else(|| {
                    StorageError::Inconsistent(format!("block data of {key:?} without an id row"))
                })?;
        Ok(key.to_block_id(file_hash)?)
    }

    /// Blocks with stored data in key order from `continuation` (inclusive), one page at a time. Returns the
    /// ids and the key of the first block not returned (`None` when exhausted).
    pub fn list_blocks(
        &self,
        continuation: Option<BlockKey>,
    ) -> Result<(Vec<BlockId>, Option<BlockKey>)> {
        self.list_blocks_paged(continuation, self.list_page)
    }

    /// [`Self::list_blocks`] with an explicit page size.
    pub fn list_blocks_paged(
        &self,
        continuation: Option<BlockKey>,
        page: usize,
    ) -> Result<(Vec<BlockId>, Option<BlockKey>)> {
        let page = page.max(1);
        let start = continuation.unwrap_or(BlockKey([0; 48]));
        let mut ids = Vec::new();
        for key in self
            .db
            .keys::<BlockComponents>(KeyRange::from(&StoredBlockKey(start)))
        {
            let key = key?;
            if key.1 == ArchiveEntryType::Block {
                if ids.len() == page {
                    return Ok((ids, Some(key.0)));
                }
                ids.push(self.id_of(key.0)?);
            }
        }
        Ok((ids, None))
    }

    /// Waits until data of `id` is stored; returns its handle and parsed block.
    pub async fn wait_for_block(
        &self,
        id: &BlockId,
        timeout: Option<Duration>,
    ) -> Result<(BlockHandle, Arc<ParsedBlock>)> {
        let found = {
            let _guard = self.data_wait_lock.write();
            match self.handles.load_handle(id)? {
                Some(handle) if handle.has_data() => Ok(handle),
                _ => Err(self.data_subscriptions.subscribe(*id)),
            }
        };
        match found {
            Ok(handle) => {
                let block = self.load_block_data(&handle).await?;
                Ok((handle, block))
            }
            Err(waiter) => waiter.wait(timeout).await,
        }
    }

    /// Number of ids with data waiters (tests).
    #[cfg(feature = "test-utils")]
    pub fn data_waiter_keys(&self) -> usize {
        self.data_subscriptions.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id() -> BlockId {
        BlockId {
            shard: ShardIdent::MASTERCHAIN,
            seqno: 7,
            root_hash: regolith_formats::HashBytes([1; 32]),
            file_hash: regolith_formats::HashBytes([2; 32]),
        }
    }

    /// The stored form decodes with the reused context, a frame without a size with the streaming decoder,
    /// and a frame whose size field lies or whose bytes are cut is reported as corruption.
    #[test]
    fn stored_frames_decode_and_lies_are_corruption() {
        let raw: Vec<u8> = (0..50_000u32).map(|i| (i % 251) as u8).collect();
        let stored = compress(&raw, 3).unwrap();
        for _ in 0..3 {
            assert_eq!(
                decompress(&id(), ArchiveEntryType::Proof, &stored).unwrap(),
                raw
            );
        }
        let unsized_frame = zstd::stream::encode_all(&raw[..], 3).unwrap();
        assert_eq!(
            zstd::zstd_safe::get_frame_content_size(&unsized_frame).unwrap(),
            None
        );
        assert_eq!(
            decompress(&id(), ArchiveEntryType::QueueDiff, &unsized_frame).unwrap(),
            raw
        );
        let cut = &stored[..stored.len() - 3];
        let e = decompress(&id(), ArchiveEntryType::Proof, cut).unwrap_err();
        assert!(matches!(e, StorageError::Corruption { .. }), "{e}");
        // A frame that declares a smaller size than it holds.
        let small = compress(&raw[..1000], 3).unwrap();
        // Both single-segment frames with a 2-byte content size right after the frame header descriptor.
        assert_eq!(stored[4], small[4]);
        assert_eq!((stored[4] >> 6, (stored[4] >> 5) & 1), (1, 1));
        let mut lying = stored.clone();
        lying[5..7].copy_from_slice(&small[5..7]);
        let e = decompress(&id(), ArchiveEntryType::Proof, &lying).unwrap_err();
        assert!(e.to_string().contains("proof of block"), "{e}");
    }
}
