//! Parsed forms of stored components: blocks (from `formats`) and proofs (tycho-types models).

use regolith_formats::BlockId;
use tycho_types::boc::Boc;
use tycho_types::models::BlockProof;

use crate::error::{Result, StorageError};

pub use regolith_formats::block::{file_hash, ParsedBlock};

fn invalid(what: &str, id: &BlockId, e: impl std::fmt::Display) -> StorageError {
    StorageError::InvalidData {
        what: format!("{what} of block {id}"),
        reason: e.to_string(),
    }
}

/// Parses a proof BOC.
pub fn parse_proof(id: &BlockId, raw: &[u8]) -> Result<BlockProof> {
    let root = Boc::decode(raw).map_err(|e| invalid("block proof", id, e))?;
    root.parse::<BlockProof>()
        .map_err(|e| invalid("block proof", id, e))
}
