//! Block proofs in the node: the checker of this data directory's chain (built from its zerostate) and the
//! previous key block proofs it needs, taken from blocks verified earlier or from storage.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use anyhow::{bail, Context, Result};
use parking_lot::Mutex;
use regolith_formats::{BlockId, ParsedProof, ProofChecker, Proven, ZerostateConfig};
use regolith_storage::{BlockHandle, Storage};
use serde_json::{json, Value};
use tycho_types::cell::HashBytes;

/// How many times this process has parsed a zerostate for a proof checker (each zerostate once: see
/// [`load_checker`]).
static ZEROSTATE_PARSES: AtomicUsize = AtomicUsize::new(0);

/// The zerostates this process has parsed, by file hash: a zerostate is read, hashed and parsed once per
/// process, however many pipelines, syncs and inspections ask for a checker of its chain. Each checker keeps
/// its own cache of validator subsets (they come from the key blocks its caller verified).
static ZEROSTATES: OnceLock<Mutex<HashMap<HashBytes, ZerostateConfig>>> = OnceLock::new();

/// How many zerostates this process has parsed for proof checkers.
pub fn zerostate_parses() -> usize {
    ZEROSTATE_PARSES.load(Ordering::Relaxed)
}

/// A proof checker of the storage's chain. The first call for a zerostate reads `<data>/states/zerostate.boc`
/// (written by `init`), checks it is the zerostate of the storage (its file hash) and parses it; later calls
/// for the same zerostate start from that parse.
pub fn load_checker(storage: &Storage) -> Result<ProofChecker> {
    let expected = storage
        .node_state()
        .load_zerostate_id()?
        .context("the data directory has no zerostate id (was it initialised?)")?;
    let zerostates = ZEROSTATES.get_or_init(Mutex::default);
    if let Some(zerostate) = zerostates.lock().get(&expected.file_hash) {
        return Ok(ProofChecker::new(zerostate.clone()));
    }
    let path = storage
        .config()
        .root_dir
        .join("states")
        .join("zerostate.boc");
    let raw = std::fs::read(&path).with_context(|| {
        format!(
            "cannot read the zerostate {} (needed to verify block proofs)",
            path.display()
        )
    })?;
    let file_hash = regolith_storage::parsed::file_hash(&raw);
    if file_hash != expected.file_hash {
        bail!(
            "{} has file hash {file_hash}, but the zerostate of the storage is {expected}",
            path.display()
        );
    }
    let zerostate =
        ZerostateConfig::from_boc(&raw).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    ZEROSTATE_PARSES.fetch_add(1, Ordering::Relaxed);
    zerostates
        .lock()
        .insert(expected.file_hash, zerostate.clone());
    Ok(ProofChecker::new(zerostate))
}

/// Verifies proofs in apply order, keeping the key block proofs that later blocks are signed through.
pub struct ProofVerifier {
    storage: Storage,
    checker: ProofChecker,
    key_blocks: HashMap<u32, ParsedProof>,
}

impl ProofVerifier {
    /// A verifier of blocks that go into (or are in) `storage`, from the process's parse of its zerostate.
    pub fn new(storage: &Storage) -> Result<Self> {
        Ok(Self {
            storage: storage.clone(),
            checker: load_checker(storage)?,
            key_blocks: HashMap::new(),
        })
    }

    /// Verifies the proof BOC of `id`. The error (a [`regolith_formats::ProofError`] unless storage failed)
    /// names the block and the reason.
    pub async fn verify(&mut self, id: &BlockId, raw: &[u8]) -> Result<Proven> {
        let parsed = ParsedProof::parse(id, raw)?;
        self.verify_parsed(&parsed).await
    }

    /// Verifies a proof already decoded and checked for structure (e.g. the proof of a
    /// [`regolith_formats::CheckedBlock`]): the signatures of an mc block, the link of a shard block.
    pub async fn verify_parsed(&mut self, parsed: &ParsedProof) -> Result<Proven> {
        let id = parsed.id();
        let key_seqno = parsed.prev_key_block_seqno();
        if id.is_masterchain() && key_seqno != 0 && !self.key_blocks.contains_key(&key_seqno) {
            if let Some(proof) = self.stored_key_block_proof(key_seqno).await? {
                self.key_blocks.insert(key_seqno, proof);
            }
        }
        let proven = self.checker.verify(parsed, &self.key_blocks)?;
        if parsed.is_key_block() {
            self.key_blocks.insert(id.seqno, parsed.clone());
        }
        Ok(proven)
    }

    /// The stored proof of key block `seqno` (stored proofs were verified before they were stored).
    async fn stored_key_block_proof(&self, seqno: u32) -> Result<Option<ParsedProof>> {
        let Some(handle) = self.storage.handles().load_key_block_handle(seqno)? else {
            return Ok(None);
        };
        if !handle.has_proof() {
            return Ok(None);
        }
        let raw = self
            .storage
            .components()
            .load_block_proof_raw(&handle)
            .await
            .with_context(|| {
                format!("cannot load the stored proof of key block {}", handle.id())
            })?;
        Ok(Some(ParsedProof::parse(handle.id(), &raw)?))
    }
}

/// How a stored block was proven, by verifying its stored proof again (for `inspect block`).
pub async fn describe_stored(storage: &Storage, handle: &BlockHandle) -> Value {
    if !handle.has_proof() {
        return Value::Null;
    }
    let result = async {
        let raw = storage.components().load_block_proof_raw(handle).await?;
        ProofVerifier::new(storage)?.verify(handle.id(), &raw).await
    }
    .await;
    match result {
        Ok(Proven::Signed(by)) => json!({
            "signatures": by.signatures,
            "signed_weight": by.signed_weight,
            "total_weight": by.total_weight,
            "validator_set": if by.key_block_seqno == 0 {
                "zerostate".to_string()
            } else {
                format!("key block {}", by.key_block_seqno)
            },
        }),
        Ok(Proven::Link) => json!({
            "link": true,
            "trusted_through_mc_block": handle.ref_by_mc_seqno(),
        }),
        Err(e) => json!({ "error": format!("{e:#}") }),
    }
}
