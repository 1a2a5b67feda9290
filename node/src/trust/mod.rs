//! The chain of trust blocks are checked against: the proof checker of this data directory's chain (from its
//! zerostate) and the key blocks, each proof verified against the validator set of the key block before it.

pub mod key_blocks;
pub mod proofs;
