//! Validator keys and validator sets: every set's keys are derived from the seed and the set's index, so the
//! same seed gives the same keys; a set signs a masterchain block with the subset a stock node computes.

use std::num::NonZeroU16;

use tycho_crypto::ed25519;
use tycho_types::dict::Dict;
use tycho_types::models::{
    Block, BlockId, BlockSignature, GlobalCapabilities, GlobalCapability, Signature,
    ValidatorDescription, ValidatorSet,
};
use tycho_types::prelude::HashBytes;

use crate::error::{build_err, ChainError};

/// How long a generated validator set is declared valid (its `utime_until` - `utime_since`).
const SET_LIFETIME_SECS: u32 = 1 << 30;

/// The keys of one validator set (set 0 is the zerostate's).
#[derive(Clone)]
pub struct ValidatorKeys {
    /// Index of the set: 0 for the zerostate's, then one more per rotation.
    pub index: u32,
    /// The secret keys, in validator-list order.
    pub secrets: Vec<[u8; 32]>,
    pairs: Vec<ed25519::KeyPair>,
}

impl ValidatorKeys {
    /// The `count` keys of set `index` for `seed`.
    pub fn derive(seed: u64, index: u32, count: u16) -> Self {
        let secrets: Vec<[u8; 32]> = (0..u32::from(count))
            .map(|i| {
                let mut input = Vec::with_capacity(16);
                input.extend_from_slice(&seed.to_le_bytes());
                input.extend_from_slice(&index.to_le_bytes());
                input.extend_from_slice(&i.to_le_bytes());
                blake3::derive_key("regolith chain generate: validator key v1", &input)
            })
            .collect();
        Self::from_secrets(index, secrets)
    }

    /// The keys of set `index` from their secret keys, in validator-list order (as `validators.json` lists
    /// them).
    pub fn from_secrets(index: u32, secrets: Vec<[u8; 32]>) -> Self {
        let pairs = secrets
            .iter()
            .map(|s| ed25519::KeyPair::from(&ed25519::SecretKey::from_bytes(*s)))
            .collect();
        Self {
            index,
            secrets,
            pairs,
        }
    }

    /// The public keys, in validator-list order.
    pub fn public_keys(&self) -> Vec<HashBytes> {
        self.pairs
            .iter()
            .map(|p| HashBytes(p.public_key.to_bytes()))
            .collect()
    }

    /// The signature of `data` by the validator of these keys whose short node id is `node_id_short`, or
    /// `None` when none of them has it.
    pub fn sign_as(&self, node_id_short: &HashBytes, data: &[u8]) -> Option<Signature> {
        self.pairs
            .iter()
            .find(|p| node_id_short_of(&HashBytes(p.public_key.to_bytes())) == *node_id_short)
            .map(|p| Signature(p.sign_raw(data)))
    }

    /// The validator set of these keys (weight 1 each, every validator a masterchain validator).
    pub fn validator_set(&self, utime_since: u32) -> Result<ValidatorSet, ChainError> {
        let count = u16::try_from(self.pairs.len())
            .ok()
            .and_then(NonZeroU16::new)
            .ok_or_else(|| {
                ChainError::InvalidOption("the validator count must be 1..=65535".into())
            })?;
        let list: Vec<ValidatorDescription> = self
            .public_keys()
            .into_iter()
            .enumerate()
            .map(|(i, public_key)| ValidatorDescription {
                public_key,
                weight: 1,
                adnl_addr: Some(public_key),
                mc_seqno_since: 0,
                prev_total_weight: i as u64,
            })
            .collect();
        Ok(ValidatorSet {
            utime_since,
            utime_until: utime_since.saturating_add(SET_LIFETIME_SECS),
            main: count,
            total_weight: u64::from(count.get()),
            list,
        })
    }

    /// Signs `id` with every member of the masterchain subset of `vset` for `switch_round`: the signatures
    /// (keyed by validator index), their count and weight, and the subset's short hash.
    pub fn sign(
        &self,
        vset: &ValidatorSet,
        switch_round: u32,
        shuffle: bool,
        id: &BlockId,
    ) -> Result<SignedBlock, ChainError> {
        let (subset, short_hash) = vset
            .compute_mc_subset_indexed(switch_round, shuffle)
            .ok_or_else(|| ChainError::InvalidOption("the masterchain subset is empty".into()))?;
        let data = Block::build_data_for_sign(id);
        let mut signatures = Dict::<u16, BlockSignature>::new();
        let mut weight = 0u64;
        for member in &subset {
            let pair = self
                .pairs
                .iter()
                .find(|p| p.public_key.to_bytes() == member.desc.public_key.0)
                .ok_or_else(|| ChainError::InvalidOption("a subset member has no key".into()))?;
            signatures
                .set(
                    member.validator_idx,
                    BlockSignature {
                        node_id_short: node_id_short_of(&member.desc.public_key),
                        signature: Signature(pair.sign_raw(&data)),
                    },
                )
                .map_err(build_err("block signatures"))?;
            weight += member.desc.weight;
        }
        Ok(SignedBlock {
            signatures,
            count: subset.len() as u32,
            weight,
            short_hash,
        })
    }
}

/// The short node id of a validator (the hash of its TL public key), which a block signature names.
pub fn node_id_short_of(public_key: &HashBytes) -> HashBytes {
    HashBytes(tl_proto::hash(tycho_crypto::tl::PublicKey::Ed25519 {
        key: &public_key.0,
    }))
}

/// A masterchain block's signatures.
pub struct SignedBlock {
    /// Signatures by validator index.
    pub signatures: Dict<u16, BlockSignature>,
    /// Their number.
    pub count: u32,
    /// Their weight.
    pub weight: u64,
    /// Short hash of the subset that signed.
    pub short_hash: u32,
}

/// The switch round a stock node computes the subset with: the catchain seqno when the block's software has
/// `CapCreateStatsEnabled`, the consensus info's `vset_switch_round` otherwise.
pub fn subset_round(caps: GlobalCapabilities, catchain_seqno: u32, vset_switch_round: u32) -> u32 {
    if caps.contains(GlobalCapability::CapCreateStatsEnabled) {
        catchain_seqno
    } else {
        vset_switch_round
    }
}
