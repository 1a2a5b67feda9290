//! `chain.json` (the ids of the zerostate, every key block and the last mc block; the validator sets; the
//! counts) and `validators.json` (every set's secret keys, for tests and the live devnet; mode 0600).

use std::path::Path;

use tycho_types::models::BlockId;

use crate::archive::write_file;
use crate::error::{input_err, read_err, ChainError};
use crate::generator::{GeneratedGroup, Generator};
use crate::keys::ValidatorKeys;
use crate::ChainOptions;

/// One key block of the chain.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct KeyBlockEntry {
    /// Its id (text form).
    pub id: String,
    /// Its seqno.
    pub seqno: u32,
    /// Its gen_utime.
    pub gen_utime: u32,
    /// Whether it is persistent (the first key block of a new 2^17 s window).
    pub persistent: bool,
    /// The validator set in force after it (index into `validator_sets`).
    pub validator_set: usize,
    /// Whether it installed that set.
    pub rotates: bool,
}

/// One validator set: its index and public keys (hex).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ValidatorSetEntry {
    /// The index (0: the zerostate's).
    pub index: u32,
    /// Public keys, hex.
    pub public_keys: Vec<String>,
}

/// The figures of a generation run.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ChainSummary {
    /// Mc blocks generated.
    pub mc_blocks: u32,
    /// All blocks generated.
    pub blocks: u64,
    /// Archive files written.
    pub archives: usize,
    /// Key blocks.
    pub key_blocks: usize,
    /// Validator sets (the zerostate's included).
    pub validator_sets: usize,
    /// Persistent state files written under `states/`.
    pub persistent_states: usize,
    /// Bytes of blocks, proofs and diffs (uncompressed).
    pub bytes: u64,
    /// Wall time.
    pub elapsed_ms: u64,
}

/// `chain.json`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ChainManifest {
    /// The options the chain was generated with.
    pub options: ChainOptions,
    /// The zerostate id.
    pub zerostate: String,
    /// The shard zerostate ids.
    pub shard_zerostates: Vec<String>,
    /// Every key block.
    pub key_blocks: Vec<KeyBlockEntry>,
    /// The last mc block.
    pub last_mc_block: String,
    /// Every validator set.
    pub validator_sets: Vec<ValidatorSetEntry>,
    /// The figures.
    pub summary: Option<ChainSummary>,
}

fn id_text(id: &BlockId) -> String {
    id.to_string()
}

impl ChainManifest {
    /// The manifest of a chain at its zerostate.
    pub fn start(generator: &Generator) -> Self {
        Self {
            options: generator.options().clone(),
            zerostate: id_text(&generator.genesis.mc.id),
            shard_zerostates: generator
                .genesis
                .shards
                .iter()
                .map(|s| id_text(&s.id))
                .collect(),
            key_blocks: Vec::new(),
            last_mc_block: id_text(&generator.genesis.mc.id),
            validator_sets: Vec::new(),
            summary: None,
        }
    }

    /// Records a generated mc block.
    pub fn record(&mut self, group: &GeneratedGroup, generator: &Generator) {
        self.last_mc_block = id_text(&group.mc);
        if group.is_key_block {
            self.key_blocks.push(KeyBlockEntry {
                id: id_text(&group.mc),
                seqno: group.mc.seqno,
                gen_utime: group.gen_utime,
                persistent: group.is_persistent,
                validator_set: generator.current_set().index as usize,
                rotates: group.rotates,
            });
        }
    }

    /// Fills in the validator sets.
    pub fn finish(&mut self, generator: &Generator, _archives: usize) {
        self.validator_sets = generator
            .sets
            .iter()
            .map(|s| ValidatorSetEntry {
                index: s.index,
                public_keys: s.public_keys().iter().map(ToString::to_string).collect(),
            })
            .collect();
    }

    /// Writes `chain.json` and `validators.json` (0600) into `out`.
    pub fn write(&self, out: &Path, generator: &Generator) -> Result<(), ChainError> {
        let json = serde_json::to_vec_pretty(self).map_err(|e| ChainError::Build {
            what: "chain.json".into(),
            reason: e.to_string(),
        })?;
        write_file(&out.join("chain.json"), &json, None)?;
        let secrets: Vec<serde_json::Value> = generator
            .sets
            .iter()
            .map(|s| {
                serde_json::json!({
                    "index": s.index,
                    "secret_keys": s.secrets.iter().map(hex::encode).collect::<Vec<_>>(),
                    "public_keys": s.public_keys().iter().map(ToString::to_string).collect::<Vec<_>>(),
                })
            })
            .collect();
        let json = serde_json::to_vec_pretty(&serde_json::json!({ "validator_sets": secrets }))
            .map_err(|e| ChainError::Build {
                what: "validators.json".into(),
                reason: e.to_string(),
            })?;
        write_file(&out.join("validators.json"), &json, Some(0o600))
    }
}

/// One set of `validators.json`.
#[derive(serde::Deserialize)]
struct SecretSetEntry {
    index: u32,
    secret_keys: Vec<String>,
    public_keys: Vec<String>,
}

/// `validators.json`.
#[derive(serde::Deserialize)]
struct SecretsFile {
    validator_sets: Vec<SecretSetEntry>,
}

/// Every validator set's keys from the `validators.json` of the chain in `chain_dir` ([`ChainManifest::write`]
/// writes it), in set order; each secret key must give the public key listed beside it.
pub fn load_validator_keys(chain_dir: &Path) -> Result<Vec<ValidatorKeys>, ChainError> {
    let path = chain_dir.join("validators.json");
    let raw = std::fs::read(&path).map_err(read_err(&path))?;
    let file: SecretsFile = serde_json::from_slice(&raw).map_err(|e| input_err(&path, e))?;
    file.validator_sets
        .into_iter()
        .map(|set| {
            let bad = |reason: String| input_err(&path, format!("set {}: {reason}", set.index));
            let secrets = set
                .secret_keys
                .iter()
                .map(|hex_key| {
                    let mut key = [0u8; 32];
                    hex::decode_to_slice(hex_key, &mut key)
                        .map_err(|e| bad(format!("secret key {hex_key:?}: {e}")))?;
                    Ok(key)
                })
                .collect::<Result<Vec<_>, ChainError>>()?;
            let keys = ValidatorKeys::from_secrets(set.index, secrets);
            let derived: Vec<String> = keys.public_keys().iter().map(ToString::to_string).collect();
            if derived != set.public_keys {
                return Err(bad(
                    "its secret keys do not give the public keys listed beside them".into(),
                ));
            }
            Ok(keys)
        })
        .collect()
}
