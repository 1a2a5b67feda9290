//! Blocks on the apply path: a block parsed from its BOC ([`ParsedBlock`]), and a block with its proof and
//! queue diff checked against each other and against its id ([`CheckedBlock`]).
//!
//! A [`CheckedBlock`] is built once, from the raw parts, by [`CheckedBlock::check`]: every BOC is decoded once
//! and every hash computed once. Storage and the queue take it as it is and parse nothing again.

use std::sync::Arc;

use bytes::Bytes;
use tycho_types::boc::Boc;
use tycho_types::cell::Cell;
use tycho_types::models::{Block, PrevBlockRef};

use crate::block_proof::{ParsedProof, ProofError};
use crate::queue_diff::{queue_diff_hash, QueueDiff};
use crate::{BlockId, FormatError, HashBytes, ShardIdent};

/// BLAKE3 of raw bytes as a hash: the file hash of blocks and zerostates.
pub fn file_hash(raw: &[u8]) -> HashBytes {
    HashBytes(*blake3::hash(raw).as_bytes())
}

/// A block, or one of its parts, that failed a check. The message names the block and what was wrong.
#[derive(Debug, thiserror::Error)]
pub enum BlockError {
    /// The BLAKE3 of the block BOC is not the id's file hash.
    #[error("block {id}: file hash {actual} of the block BOC differs from the id")]
    FileHash {
        /// The block.
        id: Box<BlockId>,
        /// BLAKE3 of the BOC.
        actual: HashBytes,
    },
    /// The block data does not decode, or disagrees with the id.
    #[error("block {id}: {what}: {reason}")]
    InvalidData {
        /// The block.
        id: Box<BlockId>,
        /// The part that was read.
        what: &'static str,
        /// Why it was rejected.
        reason: String,
    },
    /// The proof is not a proof of this block (structure; signatures are checked by the caller).
    #[error(transparent)]
    Proof(#[from] ProofError),
    /// The queue diff does not parse, or is not this block's.
    #[error("block {id}: bad queue diff: {source}")]
    QueueDiff {
        /// The block.
        id: Box<BlockId>,
        /// The format error.
        source: FormatError,
    },
    /// The queue diff is not the one the block commits to.
    #[error("block {id}: queue diff hash {actual} differs from the block's {expected}")]
    QueueDiffHash {
        /// The block.
        id: Box<BlockId>,
        /// BLAKE3 of the TL diff.
        actual: HashBytes,
        /// The block's `out_msg_queue_updates.diff_hash`.
        expected: HashBytes,
    },
}

fn invalid(id: &BlockId, what: &'static str, reason: impl std::fmt::Display) -> BlockError {
    BlockError::InvalidData {
        id: Box::new(*id),
        what,
        reason: reason.to_string(),
    }
}

/// A block parsed from its BOC, its root hash checked against the id.
#[derive(Clone)]
pub struct ParsedBlock {
    /// The block id.
    pub id: BlockId,
    /// Root cell.
    pub root: Cell,
    /// The block model.
    pub block: Block,
    /// Size of the raw BOC.
    pub data_size: usize,
    /// Cells the BOC declares (estimated from its size for a BOC format without the count).
    pub cell_count: u64,
}

/// Heap bytes a decoded cell takes beyond its data, as tycho-types lays it out: the shared header with four
/// child slots, the boxed hashes and depths, and two allocations' overhead.
const CELL_MEMORY_BYTES: u64 = 192;

/// The cell count a BOC declares in its header (the generic `b5ee9c72` format), if it is one.
fn declared_cells(raw: &[u8]) -> Option<u64> {
    let rest = raw.strip_prefix(&[0xb5, 0xee, 0x9c, 0x72])?;
    let size = usize::from(*rest.first()? & 0b111);
    if !(1..=4).contains(&size) {
        return None;
    }
    let cells = rest.get(2..2 + size)?;
    Some(cells.iter().fold(0u64, |n, b| (n << 8) | u64::from(*b)))
}

impl std::fmt::Debug for ParsedBlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParsedBlock").field("id", &self.id).finish()
    }
}

/// Block BOCs this process has decoded ([`ParsedBlock::parse`]), for tests that count them.
#[cfg(feature = "test-utils")]
static BLOCK_PARSES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many block BOCs this process has decoded so far (every [`ParsedBlock::parse`], also the one inside
/// [`CheckedBlock::check`]): the apply path's tests count that each block is parsed once.
#[cfg(feature = "test-utils")]
pub fn block_parses() -> u64 {
    BLOCK_PARSES.load(std::sync::atomic::Ordering::Relaxed)
}

impl ParsedBlock {
    /// Parses a block BOC and checks that its root hash is the id's root hash.
    pub fn parse(id: &BlockId, raw: &[u8]) -> Result<Self, BlockError> {
        #[cfg(feature = "test-utils")]
        BLOCK_PARSES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let root = Boc::decode(raw).map_err(|e| invalid(id, "block data", e))?;
        if *root.repr_hash() != id.root_hash {
            return Err(invalid(
                id,
                "block data",
                format!("root hash {} differs from the id", root.repr_hash()),
            ));
        }
        let block = root
            .parse::<Block>()
            .map_err(|e| invalid(id, "block data", e))?;
        Ok(Self {
            id: *id,
            root,
            block,
            data_size: raw.len(),
            cell_count: declared_cells(raw).unwrap_or(raw.len() as u64 / 32),
        })
    }

    /// An estimate of the memory the decoded block holds: its cells' data (at most the BOC's size) and
    /// their layout in memory, several times the BOC for small cells.
    pub fn memory_weight(&self) -> u64 {
        self.data_size as u64 + self.cell_count * CELL_MEMORY_BYTES
    }

    /// Top shard blocks referenced by this mc block: (shard, seqno) pairs.
    pub fn shard_heights(&self) -> Result<Vec<(ShardIdent, u32)>, BlockError> {
        Ok(self
            .top_shard_blocks()?
            .into_iter()
            .map(|id| (id.shard, id.seqno))
            .collect())
    }

    /// Ids of the top shard blocks referenced by this mc block (empty for shard blocks).
    pub fn top_shard_blocks(&self) -> Result<Vec<BlockId>, BlockError> {
        Ok(self
            .shard_descriptions()?
            .into_iter()
            .map(|top| top.id)
            .collect())
    }

    /// The top shard blocks of this mc block as its shard description lists them (empty for shard blocks).
    pub fn shard_descriptions(&self) -> Result<Vec<TopShardBlock>, BlockError> {
        let extra = self
            .block
            .load_extra()
            .map_err(|e| invalid(&self.id, "block extra", e))?;
        let Some(custom) = extra
            .load_custom()
            .map_err(|e| invalid(&self.id, "mc block extra", e))?
        else {
            return Ok(Vec::new());
        };
        custom
            .shards
            .iter()
            .map(|item| {
                let (shard, descr) = item.map_err(|e| invalid(&self.id, "shard hashes", e))?;
                Ok(TopShardBlock {
                    id: descr.as_block_id(shard),
                    reg_mc_seqno: descr.reg_mc_seqno,
                    updated: descr.top_sc_block_updated,
                })
            })
            .collect()
    }

    /// The ids this block names as its predecessors: one, or two after a merge.
    pub fn prev_ids(&self) -> Result<Vec<BlockId>, BlockError> {
        let id = &self.id;
        let info = self
            .block
            .load_info()
            .map_err(|e| invalid(id, "block info", e))?;
        Ok(
            match info
                .load_prev_ref()
                .map_err(|e| invalid(id, "prev ref", e))?
            {
                PrevBlockRef::Single(r) => {
                    let shard = if info.after_split {
                        id.shard.merge().ok_or_else(|| {
                            invalid(id, "block info", "after_split on a full shard")
                        })?
                    } else {
                        id.shard
                    };
                    vec![r.as_block_id(shard)]
                }
                PrevBlockRef::AfterMerge { left, right } => {
                    let (l, r) = id.shard.split().ok_or_else(|| {
                        invalid(id, "block info", "after_merge on an unsplittable shard")
                    })?;
                    vec![left.as_block_id(l), right.as_block_id(r)]
                }
            },
        )
    }
}

/// A top shard block as an mc block's shard description lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopShardBlock {
    /// The shard block.
    pub id: BlockId,
    /// The mc seqno that registered it.
    pub reg_mc_seqno: u32,
    /// Whether the shard was updated in this mc block.
    pub updated: bool,
}

/// A block ready for the apply path: its data, proof and queue diff, each decoded once and checked against
/// the id and against each other. Only [`CheckedBlock::check`] builds one.
///
/// Checked: the file hash is the BLAKE3 of the BOC; the root hash and the block info's shard and seqno match
/// the id; the proof is a proof of this block (its structure, [`ParsedProof`]; the validators' signatures are
/// the caller's to check, since they need the chain's key blocks); the queue diff parses, is this block's, and
/// hashes to the block's `out_msg_queue_updates.diff_hash`.
#[derive(Debug, Clone)]
pub struct CheckedBlock {
    parsed: Arc<ParsedBlock>,
    data: Bytes,
    is_key_block: bool,
    gen_utime: u32,
    prev: Vec<BlockId>,
    top_shard_blocks: Vec<TopShardBlock>,
    proof_raw: Bytes,
    proof: ParsedProof,
    queue_diff_raw: Bytes,
    queue_diff: QueueDiff,
    queue_diff_hash: HashBytes,
    data_frame: Option<Bytes>,
}

impl CheckedBlock {
    /// Decodes and checks the parts of block `id`.
    pub fn check(
        id: &BlockId,
        data: Bytes,
        proof: Bytes,
        queue_diff: Bytes,
    ) -> Result<Self, BlockError> {
        let actual = file_hash(&data);
        if actual != id.file_hash {
            return Err(BlockError::FileHash {
                id: Box::new(*id),
                actual,
            });
        }
        let parsed = ParsedBlock::parse(id, &data)?;
        let info = parsed
            .block
            .load_info()
            .map_err(|e| invalid(id, "block info", e))?;
        if info.shard != id.shard || info.seqno != id.seqno {
            return Err(invalid(
                id,
                "block info",
                format!("the block is {}:{}", info.shard, info.seqno),
            ));
        }
        let prev = parsed.prev_ids()?;
        let top_shard_blocks = parsed.shard_descriptions()?;

        let parsed_proof = ParsedProof::parse(id, &proof)?;

        let parsed_diff = QueueDiff::parse_for_block(&queue_diff, id).map_err(|source| {
            BlockError::QueueDiff {
                id: Box::new(*id),
                source,
            }
        })?;
        let expected = parsed.block.out_msg_queue_updates.diff_hash;
        let queue_diff_hash = queue_diff_hash(&queue_diff);
        if queue_diff_hash != expected {
            return Err(BlockError::QueueDiffHash {
                id: Box::new(*id),
                actual: queue_diff_hash,
                expected,
            });
        }
        Ok(Self {
            is_key_block: info.key_block,
            gen_utime: info.gen_utime,
            parsed: Arc::new(parsed),
            data,
            prev,
            top_shard_blocks,
            proof_raw: proof,
            proof: parsed_proof,
            queue_diff_raw: queue_diff,
            queue_diff: parsed_diff,
            queue_diff_hash,
            data_frame: None,
        })
    }

    /// Keeps `frame`, the zstd-compressed block as a peer served it, whose decoding the caller checked
    /// into [`Self::data`], so that storage can keep it instead of compressing the block again. It is kept
    /// only when it is the stored form (storage.md §7.1): exactly one zstd frame, with the content size
    /// set to the block's size. Anything else (several frames, skippable frames, no content size) is
    /// dropped and the block is compressed as usual.
    pub fn with_data_frame(mut self, frame: Bytes) -> Self {
        let single = zstd::zstd_safe::find_frame_compressed_size(&frame).ok() == Some(frame.len());
        let sized = matches!(
            zstd::zstd_safe::get_frame_content_size(&frame),
            Ok(Some(size)) if size == self.data.len() as u64
        );
        if single && sized {
            self.data_frame = Some(frame);
        }
        self
    }

    /// The block's stored form as a peer served it ([`Self::with_data_frame`]), if it was kept.
    pub fn data_frame(&self) -> Option<&Bytes> {
        self.data_frame.as_ref()
    }

    /// The block id.
    pub fn id(&self) -> &BlockId {
        &self.parsed.id
    }

    /// The parsed block.
    pub fn parsed(&self) -> &Arc<ParsedBlock> {
        &self.parsed
    }

    /// The block BOC.
    pub fn data(&self) -> &Bytes {
        &self.data
    }

    /// Whether the block is a key block.
    pub fn is_key_block(&self) -> bool {
        self.is_key_block
    }

    /// The block's generation time.
    pub fn gen_utime(&self) -> u32 {
        self.gen_utime
    }

    /// The ids the block names as its predecessors.
    pub fn prev_ids(&self) -> &[BlockId] {
        &self.prev
    }

    /// The top shard blocks of an mc block (empty for shard blocks).
    pub fn top_shard_blocks(&self) -> &[TopShardBlock] {
        &self.top_shard_blocks
    }

    /// The proof BOC.
    pub fn proof_raw(&self) -> &Bytes {
        &self.proof_raw
    }

    /// The decoded proof, its structure checked.
    pub fn proof(&self) -> &ParsedProof {
        &self.proof
    }

    /// The TL `block.queueDiff` bytes.
    pub fn queue_diff_raw(&self) -> &Bytes {
        &self.queue_diff_raw
    }

    /// The parsed queue diff.
    pub fn queue_diff(&self) -> &QueueDiff {
        &self.queue_diff
    }

    /// The diff hash (BLAKE3 of the TL bytes), equal to the block's `out_msg_queue_updates.diff_hash`.
    pub fn queue_diff_hash(&self) -> &HashBytes {
        &self.queue_diff_hash
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::archive::{ArchiveEntryType, ArchiveReader};

    /// The parts of every block of archive_1, in archive order.
    fn fixture_parts() -> Vec<(BlockId, [Bytes; 3])> {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../shared/fixtures/archive_1.bin"
        );
        let reader = ArchiveReader::new_compressed(std::fs::File::open(path).unwrap()).unwrap();
        let mut order = Vec::new();
        let mut parts: HashMap<BlockId, [Bytes; 3]> = HashMap::new();
        for entry in reader {
            let entry = entry.unwrap();
            let slot = parts.entry(entry.block_id).or_insert_with(|| {
                order.push(entry.block_id);
                Default::default()
            });
            let at = match entry.ty {
                ArchiveEntryType::Block => 0,
                ArchiveEntryType::Proof => 1,
                ArchiveEntryType::QueueDiff => 2,
            };
            slot[at] = Bytes::from(entry.data);
        }
        order
            .into_iter()
            .map(|id| {
                let p = parts.remove(&id).unwrap();
                (id, p)
            })
            .collect()
    }

    fn check(id: &BlockId, [data, proof, diff]: &[Bytes; 3]) -> Result<CheckedBlock, BlockError> {
        CheckedBlock::check(id, data.clone(), proof.clone(), diff.clone())
    }

    #[test]
    fn a_served_frame_is_kept_only_as_one_frame_with_the_blocks_size() {
        let (id, p) = fixture_parts().into_iter().next().unwrap();
        let data = &p[0];
        let kept = |frame: Vec<u8>| {
            check(&id, &p)
                .unwrap()
                .with_data_frame(Bytes::from(frame))
                .data_frame()
                .cloned()
        };
        let frame = zstd::bulk::compress(data, 19).unwrap();
        assert_eq!(kept(frame.clone()).as_deref(), Some(&frame[..]));
        // Two frames, a trailing skippable frame, a frame of other bytes and a frame without its content
        // size are not the stored form.
        assert_eq!(kept([frame.clone(), frame.clone()].concat()), None);
        let skippable = [
            &0x184D2A50u32.to_le_bytes()[..],
            &4u32.to_le_bytes(),
            &[0; 4],
        ]
        .concat();
        assert_eq!(kept([frame.clone(), skippable].concat()), None);
        assert_eq!(kept(zstd::bulk::compress(&data[1..], 3).unwrap()), None);
        let mut unsized_frame = Vec::new();
        let mut encoder = zstd::stream::write::Encoder::new(&mut unsized_frame, 3).unwrap();
        encoder.include_contentsize(false).unwrap();
        std::io::Write::write_all(&mut encoder, data).unwrap();
        encoder.finish().unwrap();
        assert_eq!(zstd::decode_all(&unsized_frame[..]).unwrap(), data.to_vec());
        assert_eq!(kept(unsized_frame), None);
        assert_eq!(kept(b"not zstd".to_vec()), None);
        assert!(check(&id, &p).unwrap().data_frame().is_none());
    }

    #[test]
    fn every_block_of_the_fixture_chain_checks() {
        let parts = fixture_parts();
        assert_eq!(parts.len(), 107);
        let mut shard_blocks = 0;
        for (id, p) in &parts {
            let block = check(id, p).unwrap();
            assert_eq!(block.id(), id);
            assert_eq!(block.prev_ids().len(), 1);
            assert_eq!(block.prev_ids()[0].seqno, id.seqno - 1);
            assert_eq!(block.queue_diff_hash(), &queue_diff_hash(&p[2]));
            assert_eq!(block.queue_diff().seqno, id.seqno);
            assert_eq!(block.proof().id(), id);
            if id.is_masterchain() {
                assert_eq!(block.top_shard_blocks().len(), 1, "{id}");
                assert_eq!(
                    block.parsed().top_shard_blocks().unwrap(),
                    vec![block.top_shard_blocks()[0].id]
                );
            } else {
                shard_blocks += 1;
                assert!(block.top_shard_blocks().is_empty());
            }
        }
        assert_eq!(shard_blocks, 7);
    }

    #[test]
    fn a_part_that_does_not_belong_is_named() {
        let parts = fixture_parts();
        let (id, good) = &parts[1];
        let (other_id, other) = &parts[2];
        assert!(id.is_masterchain() && other_id.is_masterchain());

        let mut data = good[0].to_vec();
        let at = data.len() - 10;
        data[at] ^= 1;
        let err = check(id, &[Bytes::from(data), good[1].clone(), good[2].clone()]).unwrap_err();
        assert!(matches!(err, BlockError::FileHash { .. }), "{err}");
        assert!(err.to_string().contains(&id.to_string()), "{err}");

        let err = check(id, &[good[0].clone(), other[1].clone(), good[2].clone()]).unwrap_err();
        assert!(matches!(err, BlockError::Proof(_)), "{err}");

        let err = check(id, &[good[0].clone(), good[1].clone(), other[2].clone()]).unwrap_err();
        assert!(matches!(err, BlockError::QueueDiff { .. }), "{err}");

        // A diff of this block whose bytes differ (prev_hash flipped): it parses but is not the block's.
        let mut diff = good[2].to_vec();
        diff[4] ^= 1;
        let err = check(id, &[good[0].clone(), good[1].clone(), Bytes::from(diff)]).unwrap_err();
        assert!(matches!(err, BlockError::QueueDiffHash { .. }), "{err}");
        assert!(err.to_string().contains("queue diff hash"), "{err}");

        // The data of another block under this id.
        let err = check(id, &[other[0].clone(), good[1].clone(), good[2].clone()]).unwrap_err();
        assert!(matches!(err, BlockError::FileHash { .. }), "{err}");
    }

    #[test]
    fn the_cell_count_is_the_one_the_boc_declares_and_weighs_the_memory() {
        for (id, [data, _, _]) in fixture_parts() {
            let parsed = ParsedBlock::parse(&id, &data).unwrap();
            // Every distinct cell of the tree, as the BOC stores each once.
            let mut seen = std::collections::HashSet::new();
            let mut stack = vec![parsed.root.clone()];
            while let Some(cell) = stack.pop() {
                if seen.insert(*cell.repr_hash()) {
                    stack.extend(cell.references().cloned());
                }
            }
            assert_eq!(parsed.cell_count, seen.len() as u64, "{id}");
            assert_eq!(
                parsed.memory_weight(),
                data.len() as u64 + seen.len() as u64 * CELL_MEMORY_BYTES
            );
        }
        assert_eq!(declared_cells(b"not a boc"), None);
        assert_eq!(declared_cells(&[0xb5, 0xee, 0x9c, 0x72, 0x00, 0x01]), None);
        assert_eq!(
            declared_cells(&[0xb5, 0xee, 0x9c, 0x72, 0x02, 0x01, 0x01, 0x02]),
            Some(258)
        );
    }
}
