//! Generator of real, signed Tycho-style chains (`regolith chain generate`, issue #19).
//!
//! - [`keys`]: validator keys derived from the seed, validator sets and the masterchain subset's signatures;
//! - [`zerostate`]: the generated mc zerostate (the base zerostate's config with the generated validator set
//!   and shards, each shard at its empty zerostate);
//! - `accounts`: the fixed accounts of every chain and their states (mc accounts from the zerostate on, shard
//!   accounts deployed from mc block 1 on, at most [`generator::DEPLOYS_PER_MC_BLOCK`] of each shard per mc
//!   block);
//! - [`messages`]: a block's transactions: imports from the queue (`InMsgDescr`, dequeues) and new internal
//!   messages (`OutMsgDescr`), account blocks and the value they move;
//! - [`generator`]: the chain builder (blocks, states and their Merkle updates, queue diffs, key blocks and
//!   validator rotations);
//! - [`proof`]: block proofs and proof links;
//! - [`archive`]: archive files with the node's boundaries, and the atomic file writes;
//! - [`states`]: the persistent shard and queue states of persistent key blocks (`states/`);
//! - [`manifest`]: `chain.json` and `validators.json`;
//! - [`forge`]: a generated chain's archives rewritten to end with an mc block that carries a wrong state
//!   update but is re-signed, for the node's tests.
//!
//! Everything is derived from the options and the seed: the same arguments give byte-identical output.

mod accounts;
pub mod archive;
mod cells;
pub mod error;
pub mod forge;
pub mod generator;
pub mod keys;
pub mod manifest;
pub mod messages;
pub mod proof;
pub mod states;
pub mod zerostate;

use std::path::Path;
use std::time::Instant;

pub use cells::state_cell_counts;
pub use error::ChainError;
pub use generator::{GeneratedGroup, Generator};
pub use manifest::{ChainManifest, ChainSummary};

/// The shape of a generated chain: everything that makes it the chain it is, but its length and how it is
/// split into archive files (`chain generate`, `devnet --live` and a live node's `live.json` share it).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ChainShape {
    /// The seed of every key, account and message.
    pub seed: u64,
    /// Shards of workchain 0: 1, 2, 4 or 8.
    pub shards: u8,
    /// Internal messages per shard block.
    pub messages: u32,
    /// Body bytes of each message.
    pub message_bytes: u32,
    /// Every K-th mc block is a key block.
    pub key_block_every: u32,
    /// Validators per set.
    pub validators: u16,
    /// Every R-th key block installs a new validator set.
    pub rotate_every: u32,
    /// Every P-th key block starts a new persistent-state window.
    pub persistent_every: u32,
    /// Accounts per chain (the masterchain and each shard). A manifest or `live.json` without it means
    /// [`DEFAULT_ACCOUNTS`].
    #[serde(default = "default_accounts")]
    pub accounts: u32,
}

/// Accounts per chain when the shape does not say.
pub const DEFAULT_ACCOUNTS: u32 = 16;
/// Accounts per chain at most. The generator keeps every account of every chain in memory, about 2.4 KB each
/// (peak RSS 1.8 GB with 250,000 accounts in the masterchain and each of 2 shards), so a million with 8 shards
/// needs some 20 GB.
pub const MAX_ACCOUNTS: u32 = 1_000_000;

fn default_accounts() -> u32 {
    DEFAULT_ACCOUNTS
}

impl Default for ChainShape {
    fn default() -> Self {
        Self {
            seed: 0,
            shards: 2,
            messages: 20,
            message_bytes: 256,
            key_block_every: 100,
            validators: 7,
            rotate_every: 3,
            persistent_every: 2,
            accounts: DEFAULT_ACCOUNTS,
        }
    }
}

impl ChainShape {
    /// The generator's options for `mc_blocks` mc blocks of this shape in archives of `mc_blocks_per_archive`.
    pub fn options(&self, mc_blocks: u32, mc_blocks_per_archive: u32) -> ChainOptions {
        ChainOptions {
            mc_blocks,
            mc_blocks_per_archive,
            shape: self.clone(),
        }
    }

    /// Rejects a shape the generator cannot follow.
    pub fn validate(&self) -> Result<(), ChainError> {
        let bad = |what: &str| Err(ChainError::InvalidOption(what.into()));
        if self.key_block_every == 0 {
            return bad("--key-block-every must be at least 1");
        }
        if self.rotate_every == 0 {
            return bad("--rotate-every must be at least 1");
        }
        if self.persistent_every == 0 {
            return bad("--persistent-every must be at least 1");
        }
        if self.validators == 0 {
            return bad("--validators must be at least 1");
        }
        // Each mc account funds the deployment of the account of the same index in every shard, so there are
        // always enough funds: both chains have `accounts` accounts.
        if self.accounts == 0 || self.accounts > MAX_ACCOUNTS {
            return Err(ChainError::InvalidOption(format!(
                "--accounts must be 1..={MAX_ACCOUNTS} (accounts per chain: the masterchain and each \
                 shard), not {}",
                self.accounts
            )));
        }
        if self.messages > 100_000 {
            return bad("--messages must be at most 100000 per shard block");
        }
        if self.message_bytes > 64 * 1024 {
            return bad("--message-bytes must be at most 65536");
        }
        zerostate::split_workchain(self.shards).map(|_| ())
    }
}

/// What to generate (the options of `regolith chain generate`): a shape, a length and an archive split.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ChainOptions {
    /// Masterchain blocks after the zerostate.
    pub mc_blocks: u32,
    /// Mc blocks per archive at most.
    pub mc_blocks_per_archive: u32,
    /// The chain's shape (its fields sit beside the two above in JSON).
    #[serde(flatten)]
    pub shape: ChainShape,
}

impl Default for ChainOptions {
    fn default() -> Self {
        Self {
            mc_blocks: 1000,
            mc_blocks_per_archive: 100,
            shape: ChainShape::default(),
        }
    }
}

impl ChainOptions {
    /// Rejects options the generator cannot follow.
    pub fn validate(&self) -> Result<(), ChainError> {
        if self.mc_blocks_per_archive == 0 || self.mc_blocks_per_archive > 100 {
            return Err(ChainError::InvalidOption(
                "--mc-blocks-per-archive must be 1..=100 (MAX_MC_BLOCKS_PER_ARCHIVE)".into(),
            ));
        }
        self.shape.validate()
    }
}

/// Generates a chain into `out` from `base_zerostate` (a zerostate BOC whose config is used).
pub fn generate(
    options: &ChainOptions,
    base_zerostate: &[u8],
    out: &Path,
) -> Result<ChainSummary, ChainError> {
    let started = Instant::now();
    std::fs::create_dir_all(out).map_err(error::io_err(out))?;
    let mut generator = Generator::new(options.clone(), base_zerostate)?;
    archive::write_file(&out.join("zerostate.boc"), &generator.genesis.boc, None)?;
    let mut manifest = ChainManifest::start(&generator);
    let mut splitter =
        archive::ArchiveSplitter::new(&out.join("archives"), options.mc_blocks_per_archive)?;
    let mut bytes = 0u64;
    let mut blocks = 0u64;
    let mut persistent_states = 0usize;
    for _ in 0..options.mc_blocks {
        let group = generator.next_mc_block()?;
        manifest.record(&group, &generator);
        if group.is_persistent {
            persistent_states += states::write_persistent_states(&generator, &out.join("states"))?;
        }
        blocks += group.blocks.len() as u64;
        bytes += group
            .blocks
            .iter()
            .map(|b| (b.data.len() + b.proof.len() + b.queue_diff.len()) as u64)
            .sum::<u64>();
        splitter.push_group(group.mc.seqno, group.is_key_block, group.blocks)?;
    }
    splitter.flush()?;
    manifest.finish(&generator, splitter.written.len());
    let summary = ChainSummary {
        mc_blocks: options.mc_blocks,
        blocks,
        archives: splitter.written.len(),
        key_blocks: manifest.key_blocks.len(),
        validator_sets: generator.sets.len(),
        persistent_states,
        bytes,
        elapsed_ms: started.elapsed().as_millis() as u64,
    };
    manifest.summary = Some(summary.clone());
    manifest.write(out, &generator)?;
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use std::collections::BTreeMap;

    use regolith_formats::archive::{ArchiveEntryType, ArchiveReader};
    use tycho_types::boc::Boc;
    use tycho_types::cell::{Cell, CellBuilder, HashBytes};
    use tycho_types::models::BlockId;

    use super::*;

    fn base_zerostate() -> Vec<u8> {
        std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../shared/fixtures/zerostate.boc"
        ))
        .unwrap()
    }

    fn options() -> ChainOptions {
        ChainOptions {
            mc_blocks: 25,
            mc_blocks_per_archive: 10,
            shape: ChainShape {
                seed: 11,
                shards: 2,
                messages: 3,
                message_bytes: 100,
                key_block_every: 4,
                validators: 4,
                rotate_every: 2,
                persistent_every: 2,
                ..ChainShape::default()
            },
        }
    }

    /// Every block of every archive file under `dir`, in archive order: (id, data, proof, diff).
    fn archived_blocks(dir: &Path) -> Vec<(BlockId, [Vec<u8>; 3])> {
        let mut files: Vec<_> = std::fs::read_dir(dir.join("archives"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        let mut out = Vec::new();
        for path in files {
            let reader =
                ArchiveReader::new_compressed(std::fs::File::open(&path).unwrap()).unwrap();
            let mut order = Vec::new();
            let mut parts: HashMap<BlockId, [Vec<u8>; 3]> = HashMap::new();
            for entry in reader {
                let entry = entry.unwrap();
                let slot = parts.entry(entry.block_id).or_insert_with(|| {
                    order.push(entry.block_id);
                    Default::default()
                });
                let at = match entry.ty {
                    ArchiveEntryType::Block => 0,
                    ArchiveEntryType::Proof => 1,
                    ArchiveEntryType::QueueDiff => 2,
                };
                slot[at] = entry.data;
            }
            out.extend(order.into_iter().map(|id| {
                let p = parts.remove(&id).unwrap();
                (id, p)
            }));
        }
        out
    }

    fn stepped(generator: &mut Generator, count: u32) -> Vec<(BlockId, [Vec<u8>; 3])> {
        let mut out = Vec::new();
        for _ in 0..count {
            let group = generator.next_mc_block().unwrap();
            out.extend(
                group
                    .blocks
                    .into_iter()
                    .map(|b| (b.id, [b.data, b.proof, b.queue_diff])),
            );
        }
        out
    }

    #[test]
    fn a_shape_without_accounts_means_the_default_16() {
        let mut json = serde_json::to_value(options()).unwrap();
        assert_eq!(json["accounts"], 16);
        json.as_object_mut().unwrap().remove("accounts");
        let parsed: ChainOptions = serde_json::from_value(json).unwrap();
        assert_eq!(parsed.shape, options().shape);
        let shape: ChainShape = serde_json::from_str(
            r#"{"seed": 0, "shards": 2, "messages": 1, "message_bytes": 10, "key_block_every": 10,
                "validators": 3, "rotate_every": 2, "persistent_every": 2}"#,
        )
        .unwrap();
        assert_eq!(shape.accounts, DEFAULT_ACCOUNTS);
    }

    #[test]
    fn accounts_must_be_1_to_a_million() {
        let with = |accounts| ChainShape {
            accounts,
            ..ChainShape::default()
        };
        for accounts in [1, 16, MAX_ACCOUNTS] {
            with(accounts).validate().unwrap();
        }
        for accounts in [0, MAX_ACCOUNTS + 1] {
            match with(accounts).validate() {
                Err(ChainError::InvalidOption(why)) => {
                    assert!(why.contains("--accounts must be 1..=1000000"), "{why}");
                }
                other => panic!("--accounts {accounts}: {other:?}"),
            }
        }
    }

    #[test]
    fn the_step_api_gives_the_bytes_of_the_batch_generator() {
        let dir = tempfile::tempdir().unwrap();
        let base = base_zerostate();
        generate(&options(), &base, dir.path()).unwrap();
        let batch = archived_blocks(dir.path());
        assert_eq!(batch.len(), 25 * 3);

        let mut generator = Generator::new(options(), &base).unwrap();
        assert_eq!(
            generator.genesis.boc,
            std::fs::read(dir.path().join("zerostate.boc")).unwrap()
        );
        let steps = stepped(&mut generator, 25);
        assert_eq!(steps.len(), batch.len());
        for (step, archived) in steps.iter().zip(&batch) {
            assert_eq!(step.0, archived.0);
            assert!(step.1 == archived.1, "block {}: other bytes", step.0);
        }
    }

    /// An external inbound message to `dst` whose body is `tag`.
    fn external_to(dst: &tycho_types::models::StdAddr, tag: u8) -> Cell {
        use tycho_types::models::{ExtInMsgInfo, IntAddr, MsgInfo, OwnedMessage};
        let body = {
            let mut b = CellBuilder::new();
            b.store_u8(tag).unwrap();
            b.build().unwrap()
        };
        let message = OwnedMessage {
            info: MsgInfo::ExtIn(ExtInMsgInfo {
                src: None,
                dst: IntAddr::Std(dst.clone()),
                import_fee: Default::default(),
            }),
            init: None,
            body: (tycho_types::cell::CellSliceRange::full(body.as_ref()), body),
            layout: None,
        };
        CellBuilder::build_from(&message).unwrap()
    }

    /// The external messages the blocks of a group list, with the in_msg of their transactions.
    fn listed_externals(blocks: &[(BlockId, [Vec<u8>; 3])]) -> Vec<(HashBytes, HashBytes)> {
        use tycho_types::models::{Block, InMsg};
        let mut out = Vec::new();
        for (_, [data, _, _]) in blocks {
            let block = Boc::decode(data).unwrap().parse::<Block>().unwrap();
            let extra = block.load_extra().unwrap();
            for entry in extra.in_msg_description.load().unwrap().iter() {
                let (hash, _, in_msg) = entry.unwrap();
                if let InMsg::External(ext) = in_msg {
                    let tx = ext.transaction.load().unwrap();
                    out.push((hash, *tx.in_msg.unwrap().repr_hash()));
                }
            }
        }
        out
    }

    #[test]
    fn external_messages_to_deployed_accounts_get_transactions_and_replay_to_the_same_chain() {
        let base = base_zerostate();
        let mut generator = Generator::new(options(), &base).unwrap();
        let zerostate = generator.genesis.mc.id;
        let addresses = generator.account_addresses();
        let mc_account = addresses
            .iter()
            .find(|a| a.workchain == -1)
            .unwrap()
            .clone();
        let shard_account = addresses.iter().find(|a| a.workchain == 0).unwrap().clone();
        let unknown = tycho_types::models::StdAddr::new(0, HashBytes([0x5a; 32]));

        // Group 1: shard accounts are not deployed yet (mc block 1 sends their deployments).
        let early = external_to(&shard_account, 1);
        let group = generator
            .next_mc_block_with(std::slice::from_ref(&early))
            .unwrap();
        assert!(
            group.externals.is_empty(),
            "a message to an undeployed account was taken"
        );
        let mut given: BTreeMap<u32, Vec<Cell>> = BTreeMap::new();
        stepped(&mut generator, 3);

        // Group 5: one to a shard account and one to an mc account are taken, each once; one to an unknown
        // account and a second copy are not.
        let to_shard = external_to(&shard_account, 2);
        let to_mc = external_to(&mc_account, 3);
        let offered = vec![
            to_shard.clone(),
            external_to(&unknown, 4),
            to_mc.clone(),
            to_shard.clone(),
        ];
        let group = generator.next_mc_block_with(&offered).unwrap();
        let mut expected = vec![*to_shard.repr_hash(), *to_mc.repr_hash()];
        expected.sort();
        let mut taken = group.externals.clone();
        taken.sort();
        assert_eq!(taken, expected);
        let blocks: Vec<_> = group
            .blocks
            .iter()
            .map(|b| {
                (
                    b.id,
                    [b.data.clone(), b.proof.clone(), b.queue_diff.clone()],
                )
            })
            .collect();
        let mut listed = listed_externals(&blocks);
        listed.sort();
        assert_eq!(
            listed,
            expected.iter().map(|h| (*h, *h)).collect::<Vec<_>>(),
            "each taken message is listed once, with its transaction"
        );
        given.insert(group.mc.seqno, vec![to_shard.clone(), to_mc.clone()]);
        stepped(&mut generator, 2);
        let last = generator.last_mc_block();

        // The replay given the stored messages reaches the same tip; without them it does not.
        let resumed = Generator::resume(
            options(),
            &base,
            &zerostate,
            &last,
            |seqno| Ok(given.get(&seqno).cloned().unwrap_or_default()),
            |_| std::ops::ControlFlow::Continue(()),
        )
        .unwrap();
        assert_eq!(resumed.last_mc_block(), last);
        match Generator::resume(
            options(),
            &base,
            &zerostate,
            &last,
            |_| Ok(Vec::new()),
            |_| std::ops::ControlFlow::Continue(()),
        ) {
            Err(ChainError::ReplayMismatch { seqno: 7, .. }) => {}
            other => panic!("a replay without the messages: {:?}", other.err()),
        }
        // A stored message the replay would not take (to an unknown account) is a replay error.
        match Generator::resume(
            options(),
            &base,
            &zerostate,
            &last,
            |seqno| {
                Ok(if seqno == 5 {
                    vec![external_to(&unknown, 4)]
                } else {
                    Vec::new()
                })
            },
            |_| std::ops::ControlFlow::Continue(()),
        ) {
            Err(ChainError::ReplayExternals {
                seqno: 5,
                given: 1,
                taken: 0,
            }) => {}
            other => panic!("a replay given a message it cannot take: {:?}", other.err()),
        }
    }

    #[test]
    fn resume_replays_to_the_stored_tip_and_continues_with_the_same_blocks() {
        let base = base_zerostate();
        let mut whole = Generator::new(options(), &base).unwrap();
        let zerostate = whole.genesis.mc.id;
        let first = stepped(&mut whole, 13);
        let rest = stepped(&mut whole, 4);

        let last = first.last().unwrap().0;
        let mut replayed_seqnos = Vec::new();
        let mut resumed = Generator::resume(
            options(),
            &base,
            &zerostate,
            &last,
            |_| Ok(Vec::new()),
            |seqno| {
                replayed_seqnos.push(seqno);
                std::ops::ControlFlow::Continue(())
            },
        )
        .unwrap();
        assert_eq!(replayed_seqnos, (1..=13).collect::<Vec<_>>());
        assert_eq!(resumed.last_mc_block(), last);
        let continued = stepped(&mut resumed, 4);
        assert!(continued == rest, "the resumed generator made other blocks");

        // Other options give another block 13 (the same zerostate: messages do not change it).
        let mut other = options();
        other.shape.messages = 4;
        match Generator::resume(
            other,
            &base,
            &zerostate,
            &last,
            |_| Ok(Vec::new()),
            |_| std::ops::ControlFlow::Continue(()),
        ) {
            Err(ChainError::ReplayMismatch { seqno: 13, .. }) => {}
            Err(e) => panic!("another error: {e}"),
            Ok(_) => panic!("a chain of other options was taken as the stored one"),
        }
        // Another seed gives another zerostate.
        let mut other = options();
        other.shape.seed = 12;
        match Generator::resume(
            other,
            &base,
            &zerostate,
            &last,
            |_| Ok(Vec::new()),
            |_| std::ops::ControlFlow::Continue(()),
        ) {
            Err(ChainError::ReplayMismatch { seqno: 0, .. }) => {}
            Err(e) => panic!("another error: {e}"),
            Ok(_) => panic!("a chain of another seed was taken as the stored one"),
        }
    }
}
