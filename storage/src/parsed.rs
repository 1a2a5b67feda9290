//! Parsed forms of stored components: blocks and proofs (tycho-types models).

use regolith_formats::{BlockId, ShardIdent};
use tycho_types::boc::Boc;
use tycho_types::cell::{Cell, HashBytes};
use tycho_types::models::{Block, BlockProof};

use crate::error::{Result, StorageError};

/// A block parsed from its BOC.
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
}

impl std::fmt::Debug for ParsedBlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParsedBlock").field("id", &self.id).finish()
    }
}

fn invalid(what: &str, id: &BlockId, e: impl std::fmt::Display) -> StorageError {
    StorageError::InvalidData {
        what: format!("{what} of block {id}"),
        reason: e.to_string(),
    }
}

impl ParsedBlock {
    /// Parses a block BOC and checks that its root hash is the id's root hash.
    pub fn parse(id: &BlockId, raw: &[u8]) -> Result<Self> {
        let root = Boc::decode(raw).map_err(|e| invalid("block data", id, e))?;
        if *root.repr_hash() != id.root_hash {
            return Err(invalid(
                "block data",
                id,
                format!("root hash {} differs from the id", root.repr_hash()),
            ));
        }
        let block = root
            .parse::<Block>()
            .map_err(|e| invalid("block data", id, e))?;
        Ok(Self {
            id: *id,
            root,
            block,
            data_size: raw.len(),
        })
    }

    /// Top shard blocks referenced by this mc block: (shard, seqno) pairs.
    pub fn shard_heights(&self) -> Result<Vec<(ShardIdent, u32)>> {
        Ok(self
            .top_shard_blocks()?
            .into_iter()
            .map(|id| (id.shard, id.seqno))
            .collect())
    }

    /// Ids of the top shard blocks referenced by this mc block (empty for shard blocks).
    pub fn top_shard_blocks(&self) -> Result<Vec<BlockId>> {
        let extra = self
            .block
            .load_extra()
            .map_err(|e| invalid("block extra", &self.id, e))?;
        let Some(custom) = extra
            .load_custom()
            .map_err(|e| invalid("mc block extra", &self.id, e))?
        else {
            return Ok(Vec::new());
        };
        custom
            .shards
            .latest_blocks()
            .map(|r| r.map_err(|e| invalid("shard hashes", &self.id, e)))
            .collect()
    }
}

/// Parses a proof BOC.
pub fn parse_proof(id: &BlockId, raw: &[u8]) -> Result<BlockProof> {
    let root = Boc::decode(raw).map_err(|e| invalid("block proof", id, e))?;
    root.parse::<BlockProof>()
        .map_err(|e| invalid("block proof", id, e))
}

/// BLAKE3 of raw bytes as a hash (the file hash of blocks and zerostates).
pub fn file_hash(raw: &[u8]) -> HashBytes {
    HashBytes(*blake3::hash(raw).as_bytes())
}
