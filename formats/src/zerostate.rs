//! Zerostates: the masterchain zerostate file, the empty shard zerostates it lists, and the zerostate proof
//! that a node serves with `getZerostateProof` (rpc.md §3.3): the partially pruned tree of the mc zerostate
//! itself, with no Merkle-proof wrapper cell. It keeps the state root, `McStateExtra`, the whole config params
//! dictionary and the whole shard hashes dictionary, and prunes everything else; its level-0 hash is the
//! zerostate root hash.
//!
//! [`check_zerostate_proof`] is the receiving side's check: the client verifies a downloaded proof with it.

use tycho_types::boc::Boc;
use tycho_types::cell::{
    Cell, CellBuilder, CellFamily, DynCell, HashBytes, UsageTree, UsageTreeMode,
};
use tycho_types::merkle::MerkleProof;
use tycho_types::models::{BlockId, McStateExtra, ShardIdent, ShardStateUnsplit};

/// Why a zerostate or a zerostate proof was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ZerostateError {
    /// The bytes are not a BOC.
    #[error("{what} is not a valid BOC: {reason}")]
    InvalidBoc {
        /// What was decoded.
        what: &'static str,
        /// The decoder's message.
        reason: String,
    },
    /// The root does not parse as the expected model.
    #[error("{what}: {reason}")]
    InvalidState {
        /// What was parsed.
        what: &'static str,
        /// Why it was rejected.
        reason: String,
    },
    /// The state is not a masterchain zerostate.
    #[error("not a masterchain zerostate: it is the state of {shard} seqno {seqno}")]
    NotMasterchainZerostate {
        /// Its shard.
        shard: ShardIdent,
        /// Its seqno.
        seqno: u32,
    },
    /// A shard zerostate does not match the entry of its shard in the mc zerostate.
    #[error(
        "the zerostate of shard {shard} has {what} {actual}, but the mc zerostate lists {expected}"
    )]
    ShardZerostateMismatch {
        /// The shard.
        shard: ShardIdent,
        /// `root hash` or `file hash`.
        what: &'static str,
        /// What the mc zerostate lists.
        expected: HashBytes,
        /// What the shard zerostate has.
        actual: HashBytes,
    },
    /// A zerostate proof is for another root.
    #[error("the zerostate proof is for root {actual}, not for the zerostate root {expected}")]
    ProofOfAnotherRoot {
        /// The zerostate root hash.
        expected: HashBytes,
        /// The proof's level-0 hash.
        actual: HashBytes,
    },
    /// A dictionary the proof must carry in full has a pruned branch.
    #[error("the zerostate proof prunes a branch of the {0} dictionary")]
    PrunedDictionary(&'static str),
    /// The proof's root is an exotic cell (a Merkle-proof wrapper, a pruned branch): the format is the
    /// pruned tree itself, whose root is the zerostate's ordinary root cell.
    #[error(
        "the zerostate proof's root is a {0} cell; a zerostate proof is the pruned zerostate tree itself, \
         rooted at the zerostate's ordinary root cell (no Merkle-proof wrapper)"
    )]
    ExoticRoot(String),
    /// The proof lists no shard.
    #[error("the zerostate proof has an empty shard hashes dictionary")]
    NoShards,
    /// The proof could not be built.
    #[error("cannot build the zerostate proof: {0}")]
    Build(String),
}

fn invalid_state(what: &'static str) -> impl Fn(tycho_types::error::Error) -> ZerostateError {
    move |e| ZerostateError::InvalidState {
        what,
        reason: e.to_string(),
    }
}

/// A shard zerostate listed in the masterchain zerostate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListedShard {
    /// The id of the shard's zerostate block (seqno 0 in a genesis state).
    pub id: BlockId,
}

/// A parsed masterchain zerostate.
#[derive(Clone)]
pub struct McZerostate {
    /// The zerostate id: mc, seqno 0, root hash, BLAKE3 of the file.
    pub id: BlockId,
    /// The root cell.
    pub root: Cell,
    /// The state model.
    pub state: ShardStateUnsplit,
    /// Its masterchain extra (config, shard hashes, validator and consensus info).
    pub extra: McStateExtra,
}

impl std::fmt::Debug for McZerostate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McZerostate").field("id", &self.id).finish()
    }
}

impl McZerostate {
    /// Parses and checks a masterchain zerostate BOC.
    pub fn parse(bytes: &[u8]) -> Result<Self, ZerostateError> {
        let root = Boc::decode(bytes).map_err(|e| ZerostateError::InvalidBoc {
            what: "the zerostate",
            reason: e.to_string(),
        })?;
        let state = root.parse::<ShardStateUnsplit>().map_err(invalid_state(
            "the zerostate root is not a ShardStateUnsplit",
        ))?;
        if state.shard_ident != ShardIdent::MASTERCHAIN || state.seqno != 0 {
            return Err(ZerostateError::NotMasterchainZerostate {
                shard: state.shard_ident,
                seqno: state.seqno,
            });
        }
        let extra = state
            .load_custom()
            .map_err(invalid_state("the zerostate's McStateExtra"))?
            .ok_or_else(|| ZerostateError::InvalidState {
                what: "the zerostate",
                reason: "it has no McStateExtra".into(),
            })?;
        Ok(Self {
            id: BlockId {
                shard: ShardIdent::MASTERCHAIN,
                seqno: 0,
                root_hash: *root.repr_hash(),
                file_hash: HashBytes(*blake3::hash(bytes).as_bytes()),
            },
            root,
            state,
            extra,
        })
    }

    /// The shard zerostates this state lists: one per entry of its shard hashes, in shard order.
    pub fn listed_shards(&self) -> Result<Vec<ListedShard>, ZerostateError> {
        let mut out = Vec::new();
        for item in self.extra.shards.iter() {
            let (shard, descr) = item.map_err(invalid_state("the zerostate's shard hashes"))?;
            out.push(ListedShard {
                id: descr.as_block_id(shard),
            });
        }
        Ok(out)
    }

    /// The empty zerostate of a listed shard: this state's `global_id` and `gen_utime`, that shard,
    /// `min_ref_mc_seqno = u32::MAX`, everything else default. Returns its root cell and BOC; both must match
    /// the entry (checked here).
    pub fn empty_shard_zerostate(
        &self,
        listed: &ListedShard,
    ) -> Result<ShardZerostate, ZerostateError> {
        let state = ShardStateUnsplit {
            global_id: self.state.global_id,
            shard_ident: listed.id.shard,
            gen_utime: self.state.gen_utime,
            min_ref_mc_seqno: u32::MAX,
            ..Default::default()
        };
        let root = CellBuilder::build_from(&state)
            .map_err(|e| ZerostateError::Build(format!("shard {}: {e}", listed.id.shard)))?;
        ShardZerostate::from_parts(listed, root.clone(), Boc::encode(&root))
    }

    /// A shard zerostate given as a file, checked against its entry.
    pub fn shard_zerostate_from_file(
        &self,
        bytes: Vec<u8>,
    ) -> Result<ShardZerostate, ZerostateError> {
        let root = Boc::decode(&bytes).map_err(|e| ZerostateError::InvalidBoc {
            what: "the shard zerostate",
            reason: e.to_string(),
        })?;
        let state = root.parse::<ShardStateUnsplit>().map_err(invalid_state(
            "the shard zerostate root is not a ShardStateUnsplit",
        ))?;
        let listed = self
            .listed_shards()?
            .into_iter()
            .find(|l| l.id.shard == state.shard_ident)
            .ok_or_else(|| ZerostateError::InvalidState {
                what: "the shard zerostate",
                reason: format!(
                    "its shard {} is not listed in the mc zerostate",
                    state.shard_ident
                ),
            })?;
        ShardZerostate::from_parts(&listed, root, bytes)
    }

    /// Builds the zerostate proof (the pruned tree, rpc.md §3.3) and returns its BOC.
    pub fn build_proof(&self) -> Result<Vec<u8>, ZerostateError> {
        self.build_proof_visiting(true, true)
    }

    /// The proof over a usage tree that visits the state root and `McStateExtra`, and the whole config and
    /// shard hashes dictionaries where asked (tests build proofs with a pruned dictionary this way).
    fn build_proof_visiting(
        &self,
        whole_config: bool,
        whole_shards: bool,
    ) -> Result<Vec<u8>, ZerostateError> {
        let build = |e: tycho_types::error::Error| ZerostateError::Build(e.to_string());
        let usage_tree = UsageTree::new(UsageTreeMode::OnLoad);
        let tracked = usage_tree.track(&self.root);
        let state = tracked.parse::<ShardStateUnsplit>().map_err(build)?;
        let extra = state
            .load_custom()
            .map_err(build)?
            .ok_or_else(|| ZerostateError::Build("no McStateExtra".into()))?;
        if let Some(config_root) = extra.config.params.as_dict().root().as_ref() {
            if whole_config {
                visit_all(config_root.as_ref());
            }
        }
        if let Some(shards_root) = extra.shards.as_dict().root().as_ref() {
            if whole_shards {
                visit_all(shards_root.as_ref());
            }
        }
        // The pruned tree itself: a stock node serves and checks it without a Merkle-proof cell around it.
        let cell = MerkleProof::create(self.root.as_ref(), usage_tree)
            .build_raw_ext(Cell::empty_context())
            .map_err(build)?;
        Ok(Boc::encode(&cell))
    }
}

/// Loads every cell below `cell` through the usage tree that tracks it (shared subtrees once).
fn visit_all(cell: &DynCell) {
    let mut seen = std::collections::HashSet::new();
    let mut stack = vec![cell];
    while let Some(cell) = stack.pop() {
        if !seen.insert(*cell.repr_hash()) {
            continue;
        }
        stack.extend(cell.references());
    }
}

/// A shard zerostate: its id, root and BOC.
#[derive(Clone)]
pub struct ShardZerostate {
    /// The zerostate block id.
    pub id: BlockId,
    /// The root cell.
    pub root: Cell,
    /// The BOC (its BLAKE3 is the id's file hash).
    pub boc: Vec<u8>,
}

impl ShardZerostate {
    fn from_parts(listed: &ListedShard, root: Cell, boc: Vec<u8>) -> Result<Self, ZerostateError> {
        let shard = listed.id.shard;
        let root_hash = *root.repr_hash();
        if root_hash != listed.id.root_hash {
            return Err(ZerostateError::ShardZerostateMismatch {
                shard,
                what: "root hash",
                expected: listed.id.root_hash,
                actual: root_hash,
            });
        }
        let file_hash = HashBytes(*blake3::hash(&boc).as_bytes());
        if file_hash != listed.id.file_hash {
            return Err(ZerostateError::ShardZerostateMismatch {
                shard,
                what: "file hash",
                expected: listed.id.file_hash,
                actual: file_hash,
            });
        }
        Ok(Self {
            id: listed.id,
            root,
            boc,
        })
    }
}

/// What a valid zerostate proof shows.
#[derive(Clone)]
pub struct CheckedZerostateProof {
    /// The virtualized zerostate (accounts and other pruned parts are not readable).
    pub state: ShardStateUnsplit,
    /// Its masterchain extra: the full config and shard hashes.
    pub extra: McStateExtra,
}

/// The `ShardStateUnsplit` and its `McStateExtra` under a proof's root.
fn parse_proven_state(root: &DynCell) -> Result<(ShardStateUnsplit, McStateExtra), ZerostateError> {
    let state = root.parse::<ShardStateUnsplit>().map_err(invalid_state(
        "the proven zerostate is not a ShardStateUnsplit",
    ))?;
    let extra = state
        .load_custom()
        .map_err(invalid_state("the proven zerostate's McStateExtra"))?
        .ok_or_else(|| ZerostateError::InvalidState {
            what: "the proven zerostate",
            reason: "it has no McStateExtra".into(),
        })?;
    Ok((state, extra))
}

/// Checks a zerostate proof BOC against the zerostate root hash (rpc.md §3.3): the root is an ordinary cell
/// (the pruned tree itself, no Merkle-proof wrapper) whose level-0 hash is that root, the virtualized root
/// parses as `ShardStateUnsplit` with `McStateExtra`, neither the config params nor the shard hashes
/// dictionary holds a pruned branch (their roots have an empty level mask), and the shard hashes dictionary
/// is not empty.
pub fn check_zerostate_proof(
    proof: &[u8],
    zerostate_root_hash: &HashBytes,
) -> Result<CheckedZerostateProof, ZerostateError> {
    let cell = Boc::decode(proof).map_err(|e| ZerostateError::InvalidBoc {
        what: "the zerostate proof",
        reason: e.to_string(),
    })?;
    let descriptor = cell.descriptor();
    if descriptor.is_exotic() {
        let kind = match descriptor.cell_type() {
            tycho_types::cell::CellType::MerkleProof => "Merkle-proof".to_string(),
            tycho_types::cell::CellType::MerkleUpdate => "Merkle-update".to_string(),
            tycho_types::cell::CellType::PrunedBranch => "pruned-branch".to_string(),
            tycho_types::cell::CellType::LibraryReference => "library-reference".to_string(),
            other => format!("{other:?}"),
        };
        return Err(ZerostateError::ExoticRoot(kind));
    }
    let actual = *cell.hash(0);
    if actual != *zerostate_root_hash {
        return Err(ZerostateError::ProofOfAnotherRoot {
            expected: *zerostate_root_hash,
            actual,
        });
    }
    let (state, extra) = parse_proven_state(cell.virtualize())?;

    // A virtual cell reports its level mask shifted by one level, which hides pruned branches: the level
    // masks are read from the same dictionaries parsed out of the raw (not virtualized) cells.
    let (_, raw_extra) = parse_proven_state(cell.as_ref())?;
    if let Some(root) = raw_extra.config.params.as_dict().root() {
        if !root.level_mask().is_empty() {
            return Err(ZerostateError::PrunedDictionary("config params"));
        }
    }
    match raw_extra.shards.as_dict().root() {
        None => return Err(ZerostateError::NoShards),
        Some(root) if !root.level_mask().is_empty() => {
            return Err(ZerostateError::PrunedDictionary("shard hashes"));
        }
        Some(_) => {}
    }
    Ok(CheckedZerostateProof { state, extra })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture_zerostate() -> Vec<u8> {
        std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../shared/fixtures/zerostate.boc"
        ))
        .unwrap()
    }

    #[test]
    fn fixture_zerostate_lists_shards_whose_empty_states_match() {
        let zs = McZerostate::parse(&fixture_zerostate()).unwrap();
        assert_eq!(
            zs.id.file_hash.to_string(),
            "1172c1f335257481cd1fcd0e4778a68cdefc39f0c9c1633ec6e43cca6819eb1a"
        );
        let listed = zs.listed_shards().unwrap();
        assert!(!listed.is_empty());
        for l in &listed {
            let state = zs.empty_shard_zerostate(l).unwrap();
            assert_eq!(state.id, l.id);
            let parsed = state.root.parse::<ShardStateUnsplit>().unwrap();
            assert_eq!(parsed.min_ref_mc_seqno, u32::MAX);
            assert_eq!(parsed.global_id, zs.state.global_id);
        }
        // Another gen_utime gives another state, which the mc zerostate's entry refuses.
        let mut other = zs.clone();
        other.state.gen_utime += 1;
        let err = other.empty_shard_zerostate(&listed[0]).err().unwrap();
        assert!(
            matches!(
                err,
                ZerostateError::ShardZerostateMismatch {
                    what: "root hash",
                    ..
                }
            ),
            "{err}"
        );
        assert!(
            err.to_string().contains(&listed[0].id.shard.to_string()),
            "{err}"
        );
    }

    #[test]
    fn the_built_proof_passes_the_check_and_keeps_both_dictionaries() {
        let bytes = fixture_zerostate();
        let zs = McZerostate::parse(&bytes).unwrap();
        let proof = zs.build_proof().unwrap();
        assert!(proof.len() < bytes.len(), "accounts are pruned");
        // The root is the pruned tree itself: an ordinary cell of level 1 whose level-0 hash is the root's.
        let root = Boc::decode(&proof).unwrap();
        assert!(!root.descriptor().is_exotic());
        assert_eq!(root.level_mask().level(), 1);
        assert_eq!(*root.hash(0), zs.id.root_hash);
        let checked = check_zerostate_proof(&proof, &zs.id.root_hash).unwrap();
        let root_hash = |c: &Option<Cell>| c.as_ref().map(|c| *c.repr_hash());
        assert_eq!(
            root_hash(checked.extra.config.params.as_dict().root()),
            root_hash(zs.extra.config.params.as_dict().root())
        );
        assert_eq!(
            root_hash(checked.extra.shards.as_dict().root()),
            root_hash(zs.extra.shards.as_dict().root())
        );
        assert!(checked.extra.config.get_raw(34).unwrap().is_some());
        assert_eq!(checked.state.global_id, zs.state.global_id);
    }

    #[test]
    fn the_check_rejects_pruned_dictionaries_other_roots_and_garbage() {
        let zs = McZerostate::parse(&fixture_zerostate()).unwrap();
        let pruned_config = zs.build_proof_visiting(false, true).unwrap();
        assert_eq!(
            check_zerostate_proof(&pruned_config, &zs.id.root_hash).err(),
            Some(ZerostateError::PrunedDictionary("config params"))
        );
        let pruned_shards = zs.build_proof_visiting(true, false).unwrap();
        assert_eq!(
            check_zerostate_proof(&pruned_shards, &zs.id.root_hash).err(),
            Some(ZerostateError::PrunedDictionary("shard hashes"))
        );
        let proof = zs.build_proof().unwrap();
        let other = HashBytes([7; 32]);
        assert!(matches!(
            check_zerostate_proof(&proof, &other),
            Err(ZerostateError::ProofOfAnotherRoot { .. })
        ));
        assert!(matches!(
            check_zerostate_proof(&proof[..proof.len() / 2], &zs.id.root_hash),
            Err(ZerostateError::InvalidBoc { .. })
        ));
        // The zerostate itself proves everything: nothing is pruned, and it passes.
        assert!(check_zerostate_proof(&fixture_zerostate(), &zs.id.root_hash).is_ok());
        // The same tree inside a Merkle-proof cell is another format: refused, naming the wrapper.
        let wrapped = {
            let cell = Boc::decode(&proof).unwrap();
            let wrapper = MerkleProof {
                hash: *cell.hash(0),
                depth: cell.depth(0),
                cell,
            };
            Boc::encode(CellBuilder::build_from(&wrapper).unwrap())
        };
        let err = check_zerostate_proof(&wrapped, &zs.id.root_hash)
            .err()
            .unwrap();
        assert_eq!(err, ZerostateError::ExoticRoot("Merkle-proof".into()));
        assert!(err.to_string().contains("no Merkle-proof wrapper"), "{err}");
    }
}
