//! Block proof verification: what a stock node checks before it applies a block.
//!
//! Every proof is checked for structure ([`ParsedProof::parse`]): it is for the block, its Merkle proof's
//! virtual root is the block's root, and the virtual block info agrees with the id. A masterchain block's proof
//! must also carry the signatures of more than 2/3 (by weight) of its validator subset ([`ProofChecker`]).
//! The validator set comes from the masterchain zerostate when the block's `prev_key_block_seqno` is 0, and
//! otherwise from the config inside the proof of that previous key block, which the caller provides
//! ([`KeyBlockProofs`]). A shard block's proof is a proof link: structure only; it is trusted through the
//! masterchain block that references it, which the caller checks.

mod error;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use tycho_crypto::ed25519;
use tycho_types::boc::Boc;
use tycho_types::cell::Load;
use tycho_types::merkle::MerkleProofRef;
use tycho_types::models::{
    Block, BlockInfo, BlockProof, BlockSignatures, BlockchainConfig, ConfigParam28, ConfigParam34,
    ConsensusInfo, GlobalCapability, ValidatorSet,
};

pub use error::{ProofError, ProofErrorKind};

use crate::{BlockId, HashBytes};

/// A block proof decoded and checked for structure: it is a proof of the block, its virtual block is the
/// block (root hash, shard, seqno) and the block info is consistent. Signatures are not checked yet.
#[derive(Clone, Debug)]
pub struct ParsedProof {
    id: BlockId,
    proof: BlockProof,
    block: Block,
    info: BlockInfo,
}

fn invalid(id: &BlockId, reason: impl Into<String>) -> ProofError {
    ProofError::new(
        id,
        ProofErrorKind::InvalidProof {
            reason: reason.into(),
        },
    )
}

impl ParsedProof {
    /// Decodes a proof BOC for `id` and checks its structure.
    pub fn parse(id: &BlockId, raw: &[u8]) -> Result<Self, ProofError> {
        let root = Boc::decode(raw).map_err(|e| invalid(id, format!("not a BOC: {e}")))?;
        let proof = root
            .parse::<BlockProof>()
            .map_err(|e| invalid(id, format!("not a block proof: {e}")))?;
        Self::from_proof(id, proof)
    }

    /// Checks the structure of an already decoded proof for `id`.
    pub fn from_proof(id: &BlockId, proof: BlockProof) -> Result<Self, ProofError> {
        let fail = |kind| ProofError::new(id, kind);
        if proof.proof_for != *id {
            return Err(fail(ProofErrorKind::ProofOfAnotherBlock {
                proof_for: Box::new(proof.proof_for),
            }));
        }
        if !id.is_masterchain() && proof.signatures.is_some() {
            return Err(fail(ProofErrorKind::SignaturesOnProofLink));
        }
        let merkle = proof
            .root
            .parse_exotic::<MerkleProofRef<'_>>()
            .map_err(|e| invalid(id, format!("the root is not a Merkle proof: {e}")))?;
        let virtual_root = merkle.cell.virtualize();
        if *virtual_root.repr_hash() != id.root_hash {
            return Err(fail(ProofErrorKind::VirtualRootMismatch {
                virtual_root: *virtual_root.repr_hash(),
            }));
        }
        let block = virtual_root
            .parse::<Block>()
            .map_err(|e| invalid(id, format!("the virtual block cannot be read: {e}")))?;
        let info = block
            .load_info()
            .map_err(|e| invalid(id, format!("the block info cannot be read: {e}")))?;
        block
            .load_value_flow()
            .map_err(|e| invalid(id, format!("the value flow cannot be read: {e}")))?;
        block
            .load_state_update()
            .map_err(|e| invalid(id, format!("the state update cannot be read: {e}")))?;
        if info.shard != id.shard || info.seqno != id.seqno {
            return Err(fail(ProofErrorKind::VirtualBlockMismatch {
                shard: info.shard,
                seqno: info.seqno,
            }));
        }
        check_info_flags(id, &info)?;
        Ok(Self {
            id: *id,
            proof,
            block,
            info,
        })
    }

    /// The block this proof is for.
    pub fn id(&self) -> &BlockId {
        &self.id
    }

    /// The decoded proof.
    pub fn proof(&self) -> &BlockProof {
        &self.proof
    }

    /// The virtual block's info.
    pub fn info(&self) -> &BlockInfo {
        &self.info
    }

    /// Whether the virtual block is a key block.
    pub fn is_key_block(&self) -> bool {
        self.info.key_block
    }

    /// Seqno of the key block whose config holds the validator set of this block (0: the zerostate).
    pub fn prev_key_block_seqno(&self) -> u32 {
        self.info.prev_key_block_seqno
    }

    /// The current validator set (config param 34) a key block proof installs: the set that signs the blocks
    /// after it. Only for a proof the checker verified (its config is then readable).
    pub fn key_block_validators(&self) -> Result<ValidatorSet, String> {
        self.key_block_config()?
            .get_current_validator_set()
            .map_err(|e| format!("config param 34 cannot be read: {e}"))
    }

    /// The config carried by a key block proof, with param 34 present and params 28, 32..=38 readable.
    fn key_block_config(&self) -> Result<BlockchainConfig, String> {
        if !self.info.key_block {
            return Err("the block is not a key block".into());
        }
        let extra = self
            .block
            .load_extra()
            .map_err(|e| format!("the block extra cannot be read: {e}"))?;
        let custom = extra
            .load_custom()
            .map_err(|e| format!("the masterchain block extra cannot be read: {e}"))?
            .ok_or("the block has no masterchain block extra")?;
        let config = custom.config.ok_or("the key block carries no config")?;
        match config.get::<ConfigParam34>() {
            Ok(Some(_)) => {}
            Ok(None) => return Err("config param 34 (current validators) is missing".into()),
            Err(e) => return Err(format!("config param 34 cannot be read: {e}")),
        }
        for param in 32..=38u32 {
            let raw = config
                .get_raw(param)
                .map_err(|e| format!("config param {param} cannot be read: {e}"))?;
            if let Some(mut slice) = raw {
                ValidatorSet::load_from(&mut slice)
                    .map_err(|e| format!("config param {param} is not a validator set: {e}"))?;
            }
        }
        config
            .get::<ConfigParam28>()
            .map_err(|e| format!("config param 28 cannot be read: {e}"))?;
        Ok(config)
    }
}

/// Consistency of the virtual block info's flags with the id (as a stock node checks).
fn check_info_flags(id: &BlockId, info: &BlockInfo) -> Result<(), ProofError> {
    let bad = |reason: &str| Err(invalid(id, format!("block info: {reason}")));
    if info.version != 0 {
        return bad(&format!("unsupported version {}", info.version));
    }
    let master_ref = info
        .load_master_ref()
        .map_err(|e| invalid(id, format!("block info: master ref cannot be read: {e}")))?;
    if master_ref.is_none() != info.shard.is_masterchain() {
        return bad("the not_master flag disagrees with the shard");
    }
    if id.is_masterchain() && (info.after_merge || info.before_split || info.after_split) {
        return bad("split/merge flags on a masterchain block");
    }
    if info.after_merge && info.after_split {
        return bad("both after_merge and after_split");
    }
    if info.after_split && info.shard.is_full() {
        return bad("after_split on a full shard");
    }
    if info.after_merge && !info.shard.can_split() {
        return bad("after_merge on the smallest shard");
    }
    if info.key_block && !id.is_masterchain() {
        return bad("key_block on a non-masterchain block");
    }
    Ok(())
}

impl From<&crate::zerostate::McZerostate> for ZerostateConfig {
    fn from(zerostate: &crate::zerostate::McZerostate) -> Self {
        Self::new(
            zerostate.extra.config.clone(),
            zerostate.extra.consensus_info,
        )
    }
}

/// What the masterchain zerostate gives the checker: its config (validator set, collation config) and
/// consensus info.
#[derive(Clone, Debug)]
pub struct ZerostateConfig {
    config: BlockchainConfig,
    consensus_info: ConsensusInfo,
}

impl ZerostateConfig {
    /// From the zerostate BOC.
    pub fn from_boc(raw: &[u8]) -> Result<Self, String> {
        crate::zerostate::McZerostate::parse(raw)
            .map(|zerostate| Self::from(&zerostate))
            .map_err(|e| e.to_string())
    }

    /// From parts (tests build synthetic chains with their own validator sets).
    pub fn new(config: BlockchainConfig, consensus_info: ConsensusInfo) -> Self {
        Self {
            config,
            consensus_info,
        }
    }

    /// The zerostate's config.
    pub fn config(&self) -> &BlockchainConfig {
        &self.config
    }

    /// The zerostate's consensus info.
    pub fn consensus_info(&self) -> &ConsensusInfo {
        &self.consensus_info
    }
}

/// Where the checker gets the proof of a previous key block. Implementations return only proofs that were
/// themselves verified (normally: stored ones), or `None` when the key block is not known.
pub trait KeyBlockProofs {
    /// The proof of masterchain key block `seqno`.
    fn key_block_proof(&self, seqno: u32) -> Result<Option<ParsedProof>, String>;
}

/// No key blocks known (a chain that has none after the zerostate).
pub struct NoKeyBlocks;

impl KeyBlockProofs for NoKeyBlocks {
    fn key_block_proof(&self, _: u32) -> Result<Option<ParsedProof>, String> {
        Ok(None)
    }
}

impl KeyBlockProofs for HashMap<u32, ParsedProof> {
    fn key_block_proof(&self, seqno: u32) -> Result<Option<ParsedProof>, String> {
        Ok(self.get(&seqno).cloned())
    }
}

/// How a block was proven.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Proven {
    /// A masterchain block: by the signatures of its validator subset.
    Signed(ProvenBy),
    /// A shard block's proof link: structure only; trusted through the masterchain block referencing it.
    Link,
}

/// The signatures that proved a masterchain block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProvenBy {
    /// Number of valid signatures.
    pub signatures: u32,
    /// Their weight.
    pub signed_weight: u64,
    /// Total weight of the validator subset.
    pub total_weight: u64,
    /// Seqno of the key block whose config held the validator set (0: the zerostate).
    pub key_block_seqno: u32,
}

/// One validator of a subset, ready to verify signatures.
struct Member {
    validator_idx: u16,
    weight: u64,
    public_key: Option<ed25519::PublicKey>,
}

/// A masterchain validator subset: members by short node id, its short hash and total weight.
struct Subset {
    members: HashMap<[u8; 32], Member>,
    short_hash: u32,
    total_weight: u64,
}

impl Subset {
    fn compute(vset: &ValidatorSet, switch_round: u32, shuffle: bool) -> Option<Self> {
        let (list, short_hash) = vset.compute_mc_subset_indexed(switch_round, shuffle)?;
        let mut total_weight = 0u64;
        let mut members = HashMap::with_capacity(list.len());
        for v in list {
            total_weight = total_weight.checked_add(v.desc.weight)?;
            let public_key = ed25519::PublicKey::from_bytes(v.desc.public_key.0);
            let node_id_short = tl_proto::hash(tycho_crypto::tl::PublicKey::Ed25519 {
                key: &v.desc.public_key.0,
            });
            members.insert(
                node_id_short,
                Member {
                    validator_idx: v.validator_idx,
                    weight: v.desc.weight,
                    public_key,
                },
            );
        }
        Some(Self {
            members,
            short_hash,
            total_weight,
        })
    }
}

/// Subsets kept for reuse: consecutive masterchain blocks are signed by the same one.
const SUBSET_CACHE_LEN: usize = 4;

/// A subset is the one of (key block seqno, switch round).
type SubsetKey = (u32, u32);

/// Verifies block proofs against a masterchain zerostate and the proofs of earlier key blocks.
pub struct ProofChecker {
    zerostate: ZerostateConfig,
    /// (key block seqno, switch round) → subset, most recent last.
    subsets: Mutex<Vec<(SubsetKey, Arc<Subset>)>>,
}

impl ProofChecker {
    /// A checker of the chain that starts at `zerostate`.
    pub fn new(zerostate: ZerostateConfig) -> Self {
        Self {
            zerostate,
            subsets: Mutex::new(Vec::new()),
        }
    }

    /// The zerostate this checker starts from.
    pub fn zerostate(&self) -> &ZerostateConfig {
        &self.zerostate
    }

    /// Decodes and verifies a proof BOC of `id`.
    pub fn verify_raw(
        &self,
        id: &BlockId,
        raw: &[u8],
        key_blocks: &dyn KeyBlockProofs,
    ) -> Result<Proven, ProofError> {
        self.verify(&ParsedProof::parse(id, raw)?, key_blocks)
    }

    /// Verifies a structurally checked proof: a proof link as it is, a masterchain proof by its signatures.
    pub fn verify(
        &self,
        proof: &ParsedProof,
        key_blocks: &dyn KeyBlockProofs,
    ) -> Result<Proven, ProofError> {
        let id = proof.id();
        if !id.is_masterchain() {
            return Ok(Proven::Link);
        }
        let fail = |kind| ProofError::new(id, kind);
        let signatures = proof
            .proof
            .signatures
            .as_ref()
            .ok_or_else(|| fail(ProofErrorKind::NoSignatures))?;
        if proof.is_key_block() {
            proof
                .key_block_config()
                .map_err(|reason| fail(ProofErrorKind::InvalidKeyBlockConfig { reason }))?;
        }
        let key_block_seqno = proof.prev_key_block_seqno();
        if key_block_seqno >= id.seqno {
            return Err(invalid(
                id,
                format!("prev_key_block_seqno {key_block_seqno} is not below the block's seqno"),
            ));
        }
        if key_block_seqno == 0 && !proof.is_key_block() {
            let expected = self.zerostate.consensus_info();
            if signatures.consensus_info != *expected {
                return Err(fail(ProofErrorKind::ConsensusInfoMismatch {
                    expected: format!("{expected:?}"),
                    found: format!("{:?}", signatures.consensus_info),
                }));
            }
        }
        let switch_round = if proof
            .info
            .gen_software
            .capabilities
            .contains(GlobalCapability::CapCreateStatsEnabled)
        {
            signatures.validator_info.catchain_seqno
        } else {
            signatures.consensus_info.vset_switch_round
        };
        let subset = self.subset(id, key_block_seqno, switch_round, key_blocks)?;
        let (count, signed_weight) = check_signatures(id, signatures, &subset)?;
        Ok(Proven::Signed(ProvenBy {
            signatures: count,
            signed_weight,
            total_weight: subset.total_weight,
            key_block_seqno,
        }))
    }

    /// The subset that signs blocks after key block `key_block_seqno` (0: the zerostate) in `switch_round`.
    fn subset(
        &self,
        id: &BlockId,
        key_block_seqno: u32,
        switch_round: u32,
        key_blocks: &dyn KeyBlockProofs,
    ) -> Result<Arc<Subset>, ProofError> {
        let cache_key = (key_block_seqno, switch_round);
        if let Some((_, subset)) = self
            .subsets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .find(|(k, _)| *k == cache_key)
        {
            return Ok(subset.clone());
        }
        let fail = |kind| ProofError::new(id, kind);
        let key_block_config;
        let (config, source_name) = if key_block_seqno == 0 {
            (self.zerostate.config(), "the zerostate".to_string())
        } else {
            let key_proof = key_blocks
                .key_block_proof(key_block_seqno)
                .map_err(|reason| {
                    fail(ProofErrorKind::KeyBlockLookup {
                        seqno: key_block_seqno,
                        reason,
                    })
                })?
                .ok_or_else(|| {
                    fail(ProofErrorKind::NoPrevKeyBlockProof {
                        seqno: key_block_seqno,
                    })
                })?;
            let not_key = |reason: String| {
                fail(ProofErrorKind::NotAKeyBlockProof {
                    seqno: key_block_seqno,
                    reason,
                })
            };
            if !key_proof.id().is_masterchain() || key_proof.id().seqno != key_block_seqno {
                return Err(not_key(format!("it is the proof of {}", key_proof.id())));
            }
            key_block_config = key_proof.key_block_config().map_err(not_key)?;
            (&key_block_config, format!("key block {key_block_seqno}"))
        };
        let bad_config = |reason: String| {
            fail(ProofErrorKind::InvalidValidatorConfig {
                source_name: source_name.clone(),
                reason,
            })
        };
        let vset = config
            .get_current_validator_set()
            .map_err(|e| bad_config(format!("current validator set: {e}")))?;
        let shuffle = config
            .get_collation_config()
            .map_err(|e| bad_config(format!("collation config (param 28): {e}")))?
            .shuffle_mc_validators;
        let subset = Arc::new(
            Subset::compute(&vset, switch_round, shuffle)
                .ok_or_else(|| bad_config("the masterchain subset cannot be computed".into()))?,
        );
        let mut cache = self
            .subsets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if cache.len() >= SUBSET_CACHE_LEN {
            cache.remove(0);
        }
        cache.push((cache_key, subset.clone()));
        Ok(subset)
    }
}

/// Checks the signatures against the subset; returns their number and weight.
fn check_signatures(
    id: &BlockId,
    signatures: &BlockSignatures,
    subset: &Subset,
) -> Result<(u32, u64), ProofError> {
    let fail = |kind| ProofError::new(id, kind);
    let found = signatures.validator_info.validator_list_hash_short;
    if found != subset.short_hash {
        return Err(fail(ProofErrorKind::WrongValidatorSet {
            expected: subset.short_hash,
            found,
        }));
    }
    let declared = signatures.signature_count;
    let mut entries = 0u64;
    for value in signatures.signatures.raw_values() {
        value.map_err(|e| invalid(id, format!("the signature dictionary cannot be read: {e}")))?;
        entries += 1;
        if entries > u64::from(declared) {
            break;
        }
    }
    if entries != u64::from(declared) {
        return Err(fail(ProofErrorKind::SignatureCountMismatch {
            declared,
            found: entries,
        }));
    }

    let data = Block::build_data_for_sign(id);
    let mut signed = HashSet::with_capacity(subset.members.len());
    let mut weight = 0u64;
    for value in signatures.signatures.values() {
        let signature =
            value.map_err(|e| invalid(id, format!("a signature cannot be read: {e}")))?;
        let node_id_short = signature.node_id_short.0;
        let member = subset.members.get(&node_id_short).ok_or_else(|| {
            fail(ProofErrorKind::UnknownSigner {
                node_id_short: HashBytes(node_id_short),
            })
        })?;
        if !signed.insert(node_id_short) {
            return Err(fail(ProofErrorKind::DuplicateSigner {
                validator_idx: member.validator_idx,
            }));
        }
        let valid = member
            .public_key
            .as_ref()
            .is_some_and(|key| key.verify_raw(&data, &signature.signature.0));
        if !valid {
            return Err(fail(ProofErrorKind::BadSignature {
                validator_idx: member.validator_idx,
            }));
        }
        weight = weight
            .checked_add(member.weight)
            .ok_or_else(|| invalid(id, "signed weight overflows"))?;
    }
    if weight != signatures.total_weight {
        return Err(fail(ProofErrorKind::TotalWeightMismatch {
            signed: weight,
            declared: signatures.total_weight,
        }));
    }
    match (weight.checked_mul(3), subset.total_weight.checked_mul(2)) {
        (Some(w3), Some(t2)) if w3 > t2 => {}
        (Some(_), Some(_)) => {
            return Err(fail(ProofErrorKind::WeightBelowTwoThirds {
                signed: weight,
                total: subset.total_weight,
            }))
        }
        _ => return Err(invalid(id, "signature weight overflows")),
    }
    let count = u32::try_from(entries).map_err(|_| invalid(id, "too many signatures"))?;
    Ok((count, weight))
}

#[cfg(test)]
mod tests;
