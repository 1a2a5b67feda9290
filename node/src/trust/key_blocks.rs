//! The key blocks of the chain as the network knows them. From a key block this node trusts (the zerostate
//! at first), the walk asks neighbours for the next key block ids (getNextKeyBlockIds) and for each one's
//! proof (getKeyBlockProof), and verifies every proof against the validator set of the key block before
//! it: trust runs from the zerostate to the newest key block, one verified link at a time. The newest
//! verified key block names the current validator set (the broadcast targets of external messages) and is
//! where a cold boot looks for persistent states.
//!
//! A neighbour that lists ids out of order or answers with a proof that fails is punished as malicious and
//! the step is asked again elsewhere; a key block that no neighbour can prove stops the walk with an error
//! naming the block and the neighbour that listed it.

use std::collections::{HashMap, HashSet};

use anyhow::{bail, Result};
use bytes::Bytes;
use regolith_formats::{BlockId, ParsedProof, ProofChecker};
use regolith_rpc::client::{BlockchainRpcClient, Punishment};
use regolith_rpc::proto;
use tycho_network::PeerId;

/// Ids asked for in one getNextKeyBlockIds.
const IDS_PER_QUERY: u32 = 8;
/// Answers asked for one step (ids or one proof) before the walk gives up on it.
const ATTEMPTS: usize = 4;
/// Distinct neighbours that must report no newer key block before the walk ends (fewer when fewer are
/// known).
const END_WITNESSES: usize = 2;

/// A key block whose proof this walk verified.
#[derive(Debug, Clone)]
pub struct VerifiedKeyBlock {
    /// The proof, decoded and verified.
    pub proof: ParsedProof,
    /// The proof BOC as it came.
    pub raw: Bytes,
}

impl VerifiedKeyBlock {
    /// Its id.
    pub fn id(&self) -> &BlockId {
        self.proof.id()
    }

    /// Its gen_utime.
    pub fn gen_utime(&self) -> u32 {
        self.proof.info().gen_utime
    }
}

/// The verified key blocks from the zerostate on.
pub struct KeyBlockChain {
    checker: ProofChecker,
    zerostate: BlockId,
    blocks: Vec<VerifiedKeyBlock>,
    by_seqno: HashMap<u32, ParsedProof>,
}

impl KeyBlockChain {
    /// The chain of `checker`'s zerostate `zerostate`, with no key block verified yet.
    pub fn new(checker: ProofChecker, zerostate: BlockId) -> Self {
        Self {
            checker,
            zerostate,
            blocks: Vec::new(),
            by_seqno: HashMap::new(),
        }
    }

    /// Every verified key block, oldest first.
    pub fn blocks(&self) -> &[VerifiedKeyBlock] {
        &self.blocks
    }

    /// The newest verified key block.
    pub fn newest(&self) -> Option<&VerifiedKeyBlock> {
        self.blocks.last()
    }

    /// Verifies any proof against this chain (an mc block signed through a key block this chain holds).
    pub fn verify(&self, proof: &ParsedProof) -> Result<regolith_formats::Proven> {
        Ok(self.checker.verify(proof, &self.by_seqno)?)
    }

    /// The id the next walk step starts from.
    fn tip(&self) -> BlockId {
        self.newest().map_or(self.zerostate, |k| *k.id())
    }

    /// Verifies `raw` as the proof of key block `id`, the next after the tip, and appends it.
    pub fn push(&mut self, id: &BlockId, raw: Bytes) -> Result<()> {
        let tip = self.tip();
        if !id.is_masterchain() || id.seqno <= tip.seqno {
            bail!("{id} is not a masterchain block after {tip}");
        }
        let proof = ParsedProof::parse(id, &raw)?;
        if !proof.is_key_block() {
            bail!("{id} is not a key block");
        }
        self.checker.verify(&proof, &self.by_seqno)?;
        self.by_seqno.insert(id.seqno, proof.clone());
        self.blocks.push(VerifiedKeyBlock { proof, raw });
        Ok(())
    }

    /// Walks from the tip to the newest key block the neighbours know, or until key block `until` is
    /// verified. Returns how many key blocks it added.
    pub async fn walk(
        &mut self,
        client: &BlockchainRpcClient,
        until: Option<u32>,
    ) -> Result<usize> {
        let added_before = self.blocks.len();
        let mut nothing_newer: HashSet<PeerId> = HashSet::new();
        let mut failures = 0usize;
        loop {
            let tip = self.tip();
            if until.is_some_and(|u| tip.seqno >= u) {
                break;
            }
            let witnesses = END_WITNESSES.min(client.overlay_client().neighbours().len().max(1));
            if nothing_newer.len() >= witnesses {
                break;
            }
            let answer = match client.get_next_key_block_ids(&tip, IDS_PER_QUERY).await {
                Ok(answer) => answer,
                Err(e) => {
                    failures += 1;
                    if failures >= ATTEMPTS {
                        if self.blocks.len() > added_before || !nothing_newer.is_empty() {
                            // Some neighbours answered: go on with what they proved.
                            tracing::warn!(after = %tip, error = %e, "the key block walk ends early");
                            break;
                        }
                        bail!("no neighbour lists the key blocks after {tip}: {e}");
                    }
                    continue;
                }
            };
            let lister = *answer.handle.neighbour().peer_id();
            let ids = answer.data.block_ids;
            let ordered = ids.len() <= IDS_PER_QUERY as usize
                && ids.iter().all(BlockId::is_masterchain)
                && ids.first().is_none_or(|first| first.seqno > tip.seqno)
                && ids.windows(2).all(|w| w[0].seqno < w[1].seqno);
            if !ordered {
                answer.handle.punish(Punishment::Malicious);
                tracing::warn!(peer = %lister, after = %tip, "a neighbour listed key block ids out of order");
                failures += 1;
                if failures >= ATTEMPTS {
                    if self.blocks.len() > added_before || !nothing_newer.is_empty() {
                        break;
                    }
                    bail!(
                        "no neighbour lists the key blocks after {tip} correctly (last: {lister})"
                    );
                }
                continue;
            }
            answer.handle.accept();
            if ids.is_empty() {
                nothing_newer.insert(lister);
                continue;
            }
            nothing_newer.clear();
            failures = 0;
            for id in ids {
                if until.is_some_and(|u| self.tip().seqno >= u) {
                    break;
                }
                self.fetch_proof(client, &id, &lister).await?;
                tracing::info!(key_block = %id, "key block verified");
            }
        }
        Ok(self.blocks.len() - added_before)
    }

    /// Gets and verifies the proof of key block `id` (listed by `lister`), asking up to [`ATTEMPTS`]
    /// answers; a neighbour whose proof fails is punished as malicious.
    async fn fetch_proof(
        &mut self,
        client: &BlockchainRpcClient,
        id: &BlockId,
        lister: &PeerId,
    ) -> Result<()> {
        let mut last_error = String::from("no answer");
        for _ in 0..ATTEMPTS {
            let answer = match client.get_key_block_proof(id).await {
                Ok(answer) => answer,
                Err(e) => {
                    last_error = e.to_string();
                    continue;
                }
            };
            let peer = *answer.handle.neighbour().peer_id();
            let proto::KeyBlockProof::Found { proof } = answer.data else {
                answer.handle.ignore();
                last_error = format!("{peer} has no proof of it");
                continue;
            };
            match self.push(id, proof) {
                Ok(()) => {
                    answer.handle.accept();
                    return Ok(());
                }
                Err(e) => {
                    answer.handle.punish(Punishment::Malicious);
                    tracing::warn!(%peer, key_block = %id, error = %format!("{e:#}"), "a key block proof failed");
                    last_error = format!("the proof from {peer} failed: {e:#}");
                }
            }
        }
        bail!("key block {id} (listed by {lister}) could not be verified: {last_error}")
    }
}

/// The peer ids of a validator set's members (a validator's public key is its peer id).
pub fn validator_peer_ids(set: &tycho_types::models::ValidatorSet) -> Vec<PeerId> {
    set.list.iter().map(|v| PeerId(v.public_key.0)).collect()
}

/// How often [`track_validator_set`] looks for a newer applied key block.
const TRACK_INTERVAL: std::time::Duration = std::time::Duration::from_secs(2);

/// The validator set in force after the last applied mc block: the one the newest applied key block
/// installs (its stored proof was verified before it was stored), or the zerostate's. Returns the set and
/// the key block it comes from (`None`: the zerostate).
pub async fn current_validator_set(
    storage: &regolith_storage::Storage,
) -> Result<(tycho_types::models::ValidatorSet, Option<BlockId>)> {
    let from = current_key_block(storage)?;
    Ok((validator_set_of(storage, from.as_ref()).await?, from))
}

/// The newest applied key block with a stored proof (`None`: the zerostate's set is in force). Index reads
/// only: no proof is loaded.
fn current_key_block(storage: &regolith_storage::Storage) -> Result<Option<BlockId>> {
    use anyhow::Context;
    let last = storage
        .node_state()
        .load_last_mc_block_id()?
        .context("the data directory has no last applied mc block")?;
    Ok(storage
        .handles()
        .find_prev_key_block(last.seqno.saturating_add(1))?
        .filter(|h| h.id().seqno > 0 && h.has_proof())
        .map(|h| *h.id()))
}

/// The validator set key block `from` installs (its stored proof), or the zerostate's.
async fn validator_set_of(
    storage: &regolith_storage::Storage,
    from: Option<&BlockId>,
) -> Result<tycho_types::models::ValidatorSet> {
    use anyhow::Context;
    let Some(id) = from else {
        let checker = crate::trust::proofs::load_checker(storage)?;
        return checker
            .zerostate()
            .config()
            .get_current_validator_set()
            .context("the zerostate config has no current validator set");
    };
    let handle = storage
        .handles()
        .load_handle(id)?
        .with_context(|| format!("key block {id} has no handle"))?;
    let raw = storage
        .components()
        .load_block_proof_raw(&handle)
        .await
        .with_context(|| format!("cannot load the proof of key block {id}"))?;
    ParsedProof::parse(id, &raw)?
        .key_block_validators()
        .map_err(|e| anyhow::anyhow!("key block {id}: {e}"))
}

/// Keeps the overlay client's validator set (its broadcast targets) at the set of the newest applied key
/// block, until `stop` turns true.
pub async fn track_validator_set(
    storage: regolith_storage::Storage,
    overlay: regolith_rpc::client::PublicOverlayClient,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut installed: Option<Option<BlockId>> = None;
    loop {
        // The proof is loaded and parsed only when the newest applied key block changes.
        let changed = match current_key_block(&storage) {
            Ok(from) if installed != Some(from) => validator_set_of(&storage, from.as_ref())
                .await
                .map(|set| Some((set, from))),
            Ok(_) => Ok(None),
            Err(e) => Err(e),
        };
        match changed {
            Ok(Some((set, from))) => {
                let ids = validator_peer_ids(&set);
                tracing::info!(
                    validators = ids.len(),
                    from = %from.map_or("the zerostate".to_string(), |id| id.to_string()),
                    "validator set installed as the broadcast targets' source"
                );
                metrics::gauge!("regolith_validator_set_key_block_seqno")
                    .set(f64::from(from.map_or(0, |id| id.seqno)));
                overlay.update_validator_set(ids);
                installed = Some(from);
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "cannot read the current validator set");
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(TRACK_INTERVAL) => {}
            _ = stop.changed() => {}
        }
        if *stop.borrow() {
            break;
        }
    }
}
