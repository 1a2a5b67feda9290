//! Why a block proof was refused: one variant per reason, always with the block it was for.

use crate::{BlockId, HashBytes};

/// A block proof that did not verify: which block, and why.
#[derive(Debug, thiserror::Error)]
#[error("proof of block {}: {}", .0.block, .0.kind)]
pub struct ProofError(Box<ProofErrorInner>);

#[derive(Debug)]
struct ProofErrorInner {
    block: BlockId,
    kind: ProofErrorKind,
}

impl ProofError {
    /// An error about the proof of `block`.
    pub fn new(block: &BlockId, kind: ProofErrorKind) -> Self {
        Self(Box::new(ProofErrorInner {
            block: *block,
            kind,
        }))
    }

    /// The block whose proof was refused.
    pub fn block(&self) -> &BlockId {
        &self.0.block
    }

    /// Why it was refused.
    pub fn kind(&self) -> &ProofErrorKind {
        &self.0.kind
    }
}

/// The reason a proof was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProofErrorKind {
    /// The proof cannot be decoded, or lacks a cell that the check needs, or its block info is inconsistent.
    #[error("invalid proof: {reason}")]
    InvalidProof {
        /// What was wrong.
        reason: String,
    },
    /// The proof says it is for another block.
    #[error("proof of another block: the proof is for {proof_for}")]
    ProofOfAnotherBlock {
        /// The block named inside the proof.
        proof_for: Box<BlockId>,
    },
    /// The Merkle proof proves a block with another root hash.
    #[error("proof of another block: its Merkle proof has virtual root hash {virtual_root}")]
    VirtualRootMismatch {
        /// Virtual root hash of the Merkle proof.
        virtual_root: HashBytes,
    },
    /// The virtual block is of another shard or seqno.
    #[error("proof of another block: the virtual block is {shard}:{seqno}")]
    VirtualBlockMismatch {
        /// Shard of the virtual block.
        shard: crate::ShardIdent,
        /// Seqno of the virtual block.
        seqno: u32,
    },
    /// A proof link (non-masterchain block) carries signatures.
    #[error("a proof of a non-masterchain block must carry no signatures")]
    SignaturesOnProofLink,
    /// A masterchain proof carries no signatures.
    #[error("the proof of a masterchain block carries no signatures")]
    NoSignatures,
    /// The proof of the previous key block is not available.
    #[error("no previous key block proof: the proof of key block {seqno} is not known")]
    NoPrevKeyBlockProof {
        /// Seqno of the previous key block.
        seqno: u32,
    },
    /// Looking up the previous key block proof failed.
    #[error("cannot load the proof of previous key block {seqno}: {reason}")]
    KeyBlockLookup {
        /// Seqno of the previous key block.
        seqno: u32,
        /// What failed.
        reason: String,
    },
    /// The proof given as the previous key block's is not a key block proof (or not of that key block).
    #[error("the proof of previous key block {seqno} is not a key block proof: {reason}")]
    NotAKeyBlockProof {
        /// Seqno of the previous key block.
        seqno: u32,
        /// What was wrong.
        reason: String,
    },
    /// The validator set or collation config that signs the block cannot be read.
    #[error("cannot read the validator set from {source_name}: {reason}")]
    InvalidValidatorConfig {
        /// "the zerostate" or "key block N".
        source_name: String,
        /// What was wrong.
        reason: String,
    },
    /// A key block proof whose config lacks param 34 or has a malformed param 28 or 32..=38.
    #[error("invalid key block config: {reason}")]
    InvalidKeyBlockConfig {
        /// What was wrong.
        reason: String,
    },
    /// The consensus info of the signatures differs from the zerostate's.
    #[error("consensus info {found} differs from the zerostate's {expected}")]
    ConsensusInfoMismatch {
        /// The zerostate's consensus info (debug form).
        expected: String,
        /// The proof's (debug form).
        found: String,
    },
    /// The proof names another validator subset than the one that must sign the block.
    #[error(
        "wrong validator set: the proof names short hash {found:08x}, the expected subset has {expected:08x}"
    )]
    WrongValidatorSet {
        /// Short hash of the subset computed from the config.
        expected: u32,
        /// Short hash in the proof.
        found: u32,
    },
    /// `signature_count` disagrees with the number of entries.
    #[error("signature count {declared} disagrees with the {found} signature entries")]
    SignatureCountMismatch {
        /// `signature_count` of the proof.
        declared: u32,
        /// Number of entries (counted up to one past `declared`).
        found: u64,
    },
    /// A signature from a node that is not in the validator subset.
    #[error("signature by {node_id_short}, which is not in the validator subset")]
    UnknownSigner {
        /// Short node id of the signer.
        node_id_short: HashBytes,
    },
    /// Two signatures of the same validator.
    #[error("validator {validator_idx} signed twice")]
    DuplicateSigner {
        /// Index of the validator in the validator set.
        validator_idx: u16,
    },
    /// A signature that does not verify.
    #[error("bad signature of validator {validator_idx}")]
    BadSignature {
        /// Index of the validator in the validator set.
        validator_idx: u16,
    },
    /// The signed weight differs from the proof's `total_weight`.
    #[error("signed weight {signed} differs from the proof's total_weight {declared}")]
    TotalWeightMismatch {
        /// Weight of the valid signatures.
        signed: u64,
        /// `total_weight` of the proof.
        declared: u64,
    },
    /// Not more than 2/3 of the subset's weight signed.
    #[error("signed weight {signed} of {total} is not above 2/3")]
    WeightBelowTwoThirds {
        /// Weight of the valid signatures.
        signed: u64,
        /// Total weight of the validator subset.
        total: u64,
    },
}
