//! A forging peer, for `regolith bench sync --hostile` and the hostile-peer tests: the project's own service
//! in front of the fixture chain, with one attack layered on its answers. Everything it does not forge it
//! answers honestly, so a node that refuses the forgery can still reach the tip through it where an honest
//! method is left.

use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::{Context, Result};
use bytes::Bytes;
use parking_lot::Mutex;
use regolith_formats::archive::{ArchiveEntryType, ArchiveReader, ArchiveWriter};
use regolith_formats::BlockId;
use regolith_rpc::proto::{self, rpc, OverlayResponse};
use regolith_rpc::BlockchainRpcService;
use serde::Serialize;

/// What the forger does to its answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Attack {
    /// No forgery: the honest baseline.
    None,
    /// Past mc [`FORGE_FROM`], block data that decompresses to 1 GiB of zeros (one small zstd frame).
    ZstdBomb,
    /// getArchiveInfo announces an archive of 1 TiB.
    HugeArchive,
    /// getArchiveInfo announces the real archive with a chunk size of 1 byte.
    TinyChunks,
    /// getArchiveInfo finds an archive that is the 4-byte prefix alone.
    EmptyArchive,
    /// getArchiveInfo answers, for every seqno, an archive of the blocks of mc 1..=[`FORGE_FROM`]: useful
    /// once, then an archive that brings nothing new.
    StaleArchive,
    /// The archive served leaves out the block entry of its last shard block.
    ArchiveWithoutShardBlock,
    /// Past mc [`FORGE_FROM`], the next mc block names an invented top shard block (its id recomputed, the
    /// proof that of the real block).
    InventedTopShards,
    /// Past mc [`FORGE_FROM`], the next mc block with one signature byte flipped.
    BadSignature,
}

impl Attack {
    /// Every attack (not the baseline).
    pub const ALL: [Attack; 8] = [
        Self::ZstdBomb,
        Self::HugeArchive,
        Self::TinyChunks,
        Self::EmptyArchive,
        Self::StaleArchive,
        Self::ArchiveWithoutShardBlock,
        Self::InventedTopShards,
        Self::BadSignature,
    ];

    /// Whether the attack is on archives (the served chain then has its archive committed, so a syncing
    /// node asks for it); otherwise on blocks (the archive stays open and the node goes block by block).
    pub fn on_archives(self) -> bool {
        matches!(
            self,
            Self::HugeArchive
                | Self::TinyChunks
                | Self::EmptyArchive
                | Self::StaleArchive
                | Self::ArchiveWithoutShardBlock
        )
    }

    /// Whether the attack forges data (its peer is to end banned) rather than giving useless answers or
    /// false claims that cost nothing once refused.
    pub fn forges_data(self) -> bool {
        matches!(
            self,
            Self::ZstdBomb
                | Self::ArchiveWithoutShardBlock
                | Self::InventedTopShards
                | Self::BadSignature
        )
    }
}

/// Block attacks forge the blocks after this mc seqno.
pub const FORGE_FROM: u32 = 10;

/// What the forger was asked for.
#[derive(Debug, Default)]
pub struct ForgerLog {
    /// Queries answered (any method).
    pub queries: AtomicU64,
    /// Archive chunks served.
    pub archive_chunks: AtomicU64,
    /// Answers forged.
    pub forged: AtomicU64,
    /// Ids asked for with getBlockFull.
    pub blocks_asked: Mutex<Vec<BlockId>>,
    /// Ids the forger invented.
    pub invented: Mutex<HashSet<BlockId>>,
}

/// The forging layer over the honest service.
#[derive(Clone)]
pub struct Forger {
    honest: BlockchainRpcService,
    attack: Attack,
    log: Arc<ForgerLog>,
    /// The archive it serves in place of the real one (compressed), for archive attacks.
    archive: Option<Bytes>,
    bomb: Bytes,
    /// The last mc seqno a node can apply from this forger alone.
    reachable_alone: u32,
}

/// The data of a 1 GiB zero block as one zstd frame.
fn zstd_bomb() -> Result<Bytes> {
    let mut encoder = zstd::stream::write::Encoder::new(Vec::new(), 3)?;
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..1024 {
        std::io::Write::write_all(&mut encoder, &zeros)?;
    }
    Ok(Bytes::from(encoder.finish()?))
}

impl Forger {
    /// A forger of `attack` over `honest`, which serves the fixture chain of `fixtures`.
    pub fn new(honest: BlockchainRpcService, attack: Attack, fixtures: &Path) -> Result<Self> {
        let mut missing = None;
        let archive = match attack {
            Attack::EmptyArchive => Some(Bytes::from(zstd::encode_all(
                &ArchiveWriter::new(Vec::new())?.finish()[..],
                3,
            )?)),
            Attack::ArchiveWithoutShardBlock | Attack::StaleArchive => {
                let (entries, blocks) = read_fixture_archive(fixtures)?;
                let mut writer = ArchiveWriter::new(Vec::new())?;
                if attack == Attack::ArchiveWithoutShardBlock {
                    // The block entry of the last shard block is left out (so that the mc blocks before
                    // the one that needs it are applied first).
                    let dropped = entries
                        .iter()
                        .rfind(|e| !e.block_id.is_masterchain() && e.ty == ArchiveEntryType::Block)
                        .map(|e| e.block_id)
                        .context("the fixture archive has no shard block")?;
                    for e in &entries {
                        if !(e.block_id == dropped && e.ty == ArchiveEntryType::Block) {
                            writer.write_entry(&e.block_id, e.ty, &e.data)?;
                        }
                    }
                    missing = Some(first_mc_needing(&dropped, &blocks)?);
                } else {
                    // The blocks of mc 1..=10 only: useful once, then stale for every later seqno.
                    let keep = blocks_up_to(FORGE_FROM, &blocks)?;
                    for e in entries.iter().filter(|e| keep.contains(&e.block_id)) {
                        writer.write_entry(&e.block_id, e.ty, &e.data)?;
                    }
                }
                Some(Bytes::from(zstd::encode_all(&writer.finish()[..], 3)?))
            }
            _ => None,
        };
        let bomb = if attack == Attack::ZstdBomb {
            zstd_bomb()?
        } else {
            Bytes::new()
        };
        let reachable_alone = match (attack, missing) {
            (Attack::ZstdBomb | Attack::InventedTopShards | Attack::BadSignature, _) => FORGE_FROM,
            (Attack::ArchiveWithoutShardBlock, Some(needing)) => needing.saturating_sub(1),
            _ => 100,
        };
        Ok(Self {
            honest,
            attack,
            log: Arc::default(),
            archive,
            bomb,
            reachable_alone,
        })
    }

    /// The highest mc seqno a node can reach through this forger alone: the tip (100) when an honest method
    /// is left, the last block before the forgery when every answer past it is forged (the forger is then
    /// banned).
    pub fn reachable_alone(&self) -> u32 {
        self.reachable_alone
    }

    /// What it was asked for.
    pub fn log(&self) -> Arc<ForgerLog> {
        self.log.clone()
    }

    fn forged(&self) {
        self.log.forged.fetch_add(1, Ordering::Relaxed);
    }

    async fn answer(&self, body: &[u8]) -> Option<Bytes> {
        self.log.queries.fetch_add(1, Ordering::Relaxed);
        if let Ok(rpc::GetBlockFull { block_id }) = tl_proto::deserialize(body) {
            self.log.blocks_asked.lock().push(block_id);
        }
        if let Ok(rpc::GetArchiveInfo { mc_seqno }) = tl_proto::deserialize(body) {
            return self.archive_info(body, mc_seqno).await;
        }
        if let Ok(rpc::GetArchiveChunk { offset, .. }) = tl_proto::deserialize(body) {
            self.log.archive_chunks.fetch_add(1, Ordering::Relaxed);
            if let Some(archive) = &self.archive {
                self.forged();
                let start = (offset as usize).min(archive.len());
                let end = (start + (1 << 20)).min(archive.len());
                return Some(Bytes::from(tl_proto::serialize(OverlayResponse::Ok(
                    proto::Data {
                        data: archive.slice(start..end),
                    },
                ))));
            }
        }
        let answer = self.honest.handle_query(body).await?;
        if tl_proto::deserialize::<rpc::GetNextBlocksFull>(body).is_ok() {
            return self.forge_batch(answer);
        }
        let next = tl_proto::deserialize::<rpc::GetNextBlockFull>(body).ok();
        match (self.attack, next) {
            (Attack::ZstdBomb | Attack::InventedTopShards | Attack::BadSignature, Some(next))
                if next.prev_block_id.is_masterchain()
                    && next.prev_block_id.seqno >= FORGE_FROM =>
            {
                self.forge_block(answer)
            }
            _ => Some(answer),
        }
    }

    async fn archive_info(&self, body: &[u8], mc_seqno: u32) -> Option<Bytes> {
        let found = |id: u64, size: u64, chunk_size: u32| {
            Some(Bytes::from(tl_proto::serialize(OverlayResponse::Ok(
                proto::ArchiveInfo::Found {
                    id,
                    size,
                    chunk_size,
                },
            ))))
        };
        match self.attack {
            Attack::EmptyArchive | Attack::ArchiveWithoutShardBlock => {
                self.forged();
                let size = self.archive.as_ref().map_or(0, |a| a.len() as u64);
                found(1, size, 1 << 20)
            }
            Attack::StaleArchive => {
                if mc_seqno > FORGE_FROM {
                    self.forged();
                }
                let size = self.archive.as_ref().map_or(0, |a| a.len() as u64);
                found(1, size, 1 << 20)
            }
            Attack::HugeArchive | Attack::TinyChunks => {
                let honest = self.honest.handle_query(body).await?;
                let Ok(OverlayResponse::Ok(proto::ArchiveInfo::Found { id, size, .. })) =
                    tl_proto::deserialize::<OverlayResponse<proto::ArchiveInfo>>(&honest)
                else {
                    return Some(honest);
                };
                self.forged();
                if self.attack == Attack::HugeArchive {
                    found(id, 1 << 40, 1 << 20)
                } else {
                    found(id, size, 1)
                }
            }
            _ => self.honest.handle_query(body).await,
        }
    }

    fn forge_block(&self, answer: Bytes) -> Option<Bytes> {
        let Ok(OverlayResponse::Ok(proto::BlockFull::Found {
            block_id,
            mut block,
            mut proof,
            queue_diff,
        })) = tl_proto::deserialize::<OverlayResponse<proto::BlockFull>>(&answer)
        else {
            return Some(answer);
        };
        let Some(block_id) = self.forge_entry(block_id, &mut block.data, &mut proof) else {
            return Some(answer);
        };
        block.size = block.data.len() as u32;
        block.chunk_size = block.size.max(1 << 20);
        Some(Bytes::from(tl_proto::serialize(OverlayResponse::Ok(
            proto::BlockFull::Found {
                block_id,
                block,
                proof,
                queue_diff,
            },
        ))))
    }

    /// A batch answer with the block attack on every mc block past [`FORGE_FROM`].
    fn forge_batch(&self, answer: Bytes) -> Option<Bytes> {
        if !matches!(
            self.attack,
            Attack::ZstdBomb | Attack::InventedTopShards | Attack::BadSignature
        ) {
            return Some(answer);
        }
        let Ok(OverlayResponse::Ok(mut batch)) =
            tl_proto::deserialize::<OverlayResponse<proto::NextBlocks>>(&answer)
        else {
            return Some(answer);
        };
        let mut forged = false;
        for entry in &mut batch.blocks {
            if entry.block_id.is_masterchain() && entry.block_id.seqno > FORGE_FROM {
                if let Some(id) =
                    self.forge_entry(entry.block_id, &mut entry.data, &mut entry.proof)
                {
                    entry.block_id = id;
                    forged = true;
                }
            }
        }
        if !forged {
            return Some(answer);
        }
        Some(Bytes::from(tl_proto::serialize(OverlayResponse::Ok(batch))))
    }

    /// The attack on one block (its compressed data and proof); the id it is then served under, or `None`
    /// when the attack leaves it as it is.
    fn forge_entry(
        &self,
        block_id: BlockId,
        data: &mut Bytes,
        proof: &mut Bytes,
    ) -> Option<BlockId> {
        let mut block_id = block_id;
        match self.attack {
            Attack::ZstdBomb => *data = self.bomb.clone(),
            Attack::BadSignature => *proof = flip_a_signature(proof)?,
            Attack::InventedTopShards => {
                let (id, forged) = invent_top_shard(&block_id, data)?;
                self.log.invented.lock().insert(id.0);
                block_id = id.1;
                *data = forged;
            }
            _ => return None,
        }
        self.forged();
        Some(block_id)
    }
}

type FixtureArchive = (
    Vec<regolith_formats::archive::ArchiveEntry>,
    std::collections::HashMap<BlockId, regolith_formats::ParsedBlock>,
);

/// The entries of the fixture archive and its blocks, parsed.
fn read_fixture_archive(fixtures: &Path) -> Result<FixtureArchive> {
    let path = fixtures.join("archive_1.bin");
    let raw = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    let mut entries = Vec::new();
    let mut blocks = std::collections::HashMap::new();
    for entry in ArchiveReader::new_compressed(&raw[..])? {
        let entry = entry.map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        if entry.ty == ArchiveEntryType::Block {
            let parsed = regolith_formats::ParsedBlock::parse(&entry.block_id, &entry.data)?;
            blocks.insert(entry.block_id, parsed);
        }
        entries.push(entry);
    }
    Ok((entries, blocks))
}

/// The mc blocks up to `last` and every shard block their top shard blocks reach.
fn blocks_up_to(
    last: u32,
    blocks: &std::collections::HashMap<BlockId, regolith_formats::ParsedBlock>,
) -> Result<HashSet<BlockId>> {
    let mut keep = HashSet::new();
    for (id, block) in blocks {
        if id.is_masterchain() && id.seqno <= last {
            keep.insert(*id);
            let mut pending = block.top_shard_blocks()?;
            while let Some(next) = pending.pop() {
                if blocks.contains_key(&next) && keep.insert(next) {
                    pending.extend(blocks[&next].prev_ids()?);
                }
            }
        }
    }
    Ok(keep)
}

/// The seqno of the first mc block whose shard blocks (walked back from its top ones) include `shard`.
fn first_mc_needing(
    shard: &BlockId,
    blocks: &std::collections::HashMap<BlockId, regolith_formats::ParsedBlock>,
) -> Result<u32> {
    let mut mc: Vec<&BlockId> = blocks.keys().filter(|id| id.is_masterchain()).collect();
    mc.sort_by_key(|id| id.seqno);
    for id in mc {
        let mut pending = blocks[id].top_shard_blocks()?;
        let mut seen = HashSet::new();
        while let Some(next) = pending.pop() {
            if next == *shard {
                return Ok(id.seqno);
            }
            if seen.insert(next) {
                if let Some(block) = blocks.get(&next) {
                    pending.extend(block.prev_ids()?);
                }
            }
        }
    }
    anyhow::bail!("no mc block of the archive needs {shard}")
}

/// The proof with the first signature's first byte flipped.
fn flip_a_signature(proof: &[u8]) -> Option<Bytes> {
    use tycho_types::boc::Boc;
    use tycho_types::cell::CellBuilder;
    use tycho_types::models::BlockProof;
    let mut parsed: BlockProof = Boc::decode(proof).ok()?.parse().ok()?;
    let signatures = parsed.signatures.as_mut()?;
    let (key, mut signature) = signatures.signatures.iter().next()?.ok()?;
    signature.signature.0[0] ^= 1;
    signatures.signatures.set(key, signature).ok()?;
    Some(Bytes::from(Boc::encode(
        CellBuilder::build_from(&parsed).ok()?,
    )))
}

/// The mc block (zstd data) with the root hash of its first top shard block changed, wherever the block's
/// cells hold it: returns (the invented shard block id, the new mc block id) and the new data.
fn invent_top_shard(id: &BlockId, compressed: &[u8]) -> Option<((BlockId, BlockId), Bytes)> {
    use tycho_types::boc::Boc;
    let raw = zstd::decode_all(compressed).ok()?;
    let parsed = regolith_formats::ParsedBlock::parse(id, &raw).ok()?;
    let top = *parsed.top_shard_blocks().ok()?.first()?;
    let root = Boc::decode(&raw).ok()?;
    let mut changed = false;
    let forged_root = flip_hash_bits(root.as_ref(), &top.root_hash.0, &mut changed)?;
    if !changed {
        return None;
    }
    let forged = Boc::encode(&forged_root);
    let mut invented = top;
    for b in &mut invented.root_hash.0 {
        *b ^= 0x5a;
    }
    let new_id = BlockId {
        root_hash: *forged_root.repr_hash(),
        file_hash: regolith_formats::block::file_hash(&forged),
        ..*id
    };
    Some((
        (invented, new_id),
        Bytes::from(zstd::encode_all(&forged[..], 3).ok()?),
    ))
}

/// The tree below `cell` with every occurrence of `hash` in cell data (at any bit offset) XORed with 0x5a
/// bytes.
fn flip_hash_bits(
    cell: &tycho_types::cell::DynCell,
    hash: &[u8; 32],
    changed: &mut bool,
) -> Option<tycho_types::cell::Cell> {
    use tycho_types::cell::{CellBuilder, CellFamily};
    let bits = usize::from(cell.bit_len());
    let mut data = cell.data().to_vec();
    let bit = |d: &[u8], i: usize| (d[i / 8] >> (7 - i % 8)) & 1;
    let pattern = |i: usize| (hash[i / 8] >> (7 - i % 8)) & 1;
    if bits >= 256 {
        for offset in 0..=bits - 256 {
            if (0..256).all(|i| bit(&data, offset + i) == pattern(i)) {
                for i in 0..256 {
                    let mask = (0x5a_u8 >> (7 - i % 8)) & 1;
                    let at = offset + i;
                    data[at / 8] ^= mask << (7 - at % 8);
                }
                *changed = true;
            }
        }
    }
    let mut b = CellBuilder::new();
    b.set_exotic(cell.descriptor().is_exotic());
    b.store_raw(&data, cell.bit_len()).ok()?;
    for child in cell.references() {
        b.store_reference(flip_hash_bits(child, hash, changed)?)
            .ok()?;
    }
    b.build_ext(tycho_types::cell::Cell::empty_context()).ok()
}

impl tycho_network::Service<tycho_network::ServiceRequest> for Forger {
    type QueryResponse = tycho_network::Response;
    type OnQueryFuture = futures_util::future::BoxFuture<'static, Option<tycho_network::Response>>;
    type OnMessageFuture = futures_util::future::Ready<()>;

    fn on_query(&self, req: tycho_network::ServiceRequest) -> Self::OnQueryFuture {
        let this = self.clone();
        Box::pin(async move {
            this.answer(&req.body)
                .await
                .map(|body| tycho_network::Response {
                    version: Default::default(),
                    body,
                })
        })
    }

    fn on_message(&self, _: tycho_network::ServiceRequest) -> Self::OnMessageFuture {
        futures_util::future::ready(())
    }
}
