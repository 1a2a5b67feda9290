//! Byte formats shared by every part of regolith.
//!
//! - [`block`]: a block parsed from its BOC, and a block with its proof and queue diff checked for the apply
//!   path ([`CheckedBlock`]: parsed once, hashed once);
//! - [`block_id`]: the 80-byte LE wire form of a block id, the 48-byte ordered block key and the text form;
//! - [`archive`]: the archive format (`archive.prefix` + `archive.entryHeader` entries), a streaming reader
//!   that verifies structure and a writer whose decompressed output matches the reference byte for byte;
//! - [`queue_diff`]: TL `block.queueDiff` with its validation rules and BLAKE3 hash;
//! - [`zerostate`]: the mc zerostate, the empty shard zerostates it lists, and the zerostate proof (build and
//!   check);
//! - [`split_state`]: shard states split into parts (the root file with absent cells, the parts, the check
//!   against the block's state hash);
//! - [`block_proof`]: block proof verification ([`ProofChecker`]): structure of every proof, and the
//!   validators' signatures of masterchain blocks against the zerostate or the previous key block.

pub mod archive;
pub mod block;
pub mod block_id;
pub mod block_proof;
pub mod error;
pub mod persistent_state;
pub mod queue_diff;
pub mod queue_state;
pub mod split_state;
pub mod zerostate;

#[cfg(feature = "test-utils")]
pub use block::block_parses;
pub use block::{file_hash, BlockError, CheckedBlock, ParsedBlock, TopShardBlock};
pub use block_id::{decode_block_id, encode_block_id, BlockKey, BLOCK_ID_LEN, BLOCK_KEY_LEN};
pub use block_proof::{
    KeyBlockProofs, NoKeyBlocks, ParsedProof, ProofChecker, ProofError, ProofErrorKind, Proven,
    ProvenBy, ZerostateConfig,
};
pub use error::FormatError;
pub use tycho_types::models::{BlockId, ShardIdent};
pub use tycho_types::prelude::HashBytes;
