//! The chain builder: extends a generated chain by one masterchain block at a time, with a new top block of
//! every shard before it, each block with its state (a Merkle update from the previous state), queue diff
//! and proof.

use std::collections::BTreeMap;

use regolith_formats::queue_diff::{QueueDiff, QueueKey};
use tycho_types::boc::Boc;
use tycho_types::cell::{Cell, CellBuilder, HashBytes, Lazy, LazyExotic};
use tycho_types::merkle::MerkleUpdate;
use tycho_types::models::{
    Block, BlockExtra, BlockId, BlockInfo, BlockRef, BlockSignatures, BlockchainConfig,
    ConsensusInfo, GlobalVersion, IntAddr, KeyBlockRef, KeyMaxLt, McBlockExtra, McStateExtra,
    MsgInfo, OutMsgQueueUpdates, OwnedMessage, PrevBlockRef, ShardDescription, ShardHashes,
    ShardIdent, ShardStateUnsplit, ValidatorBaseInfo, ValidatorSet, ValueFlow,
};

use crate::accounts::{account_cell, active_account, wallet_state, ChainAccounts};
use crate::archive::ArchivedBlock;
use crate::cells::StateCells;
use crate::error::{build_err, ChainError};
use crate::keys::{subset_round, ValidatorKeys};
use crate::messages::{BlockBuilder, BlockMessages, Import, Send};
use crate::zerostate::{self, Genesis};
use crate::ChainOptions;

/// Logical-time slot of one block: block k starts at `k * LT_SLOT`.
const LT_SLOT: u64 = 1_000_000;
/// Shard accounts one mc block deploys at most, in each shard: mc block 1 deploys the first ones (in index
/// order), every next mc block the next ones, so that a chain of many accounts has no huge mc block 1. A chain
/// of at most this many accounts per shard is deployed whole by mc block 1.
pub const DEPLOYS_PER_MC_BLOCK: usize = 1_000;
/// Length of the persistent-state window (storage.md: 2^17 s).
pub const PERSISTENT_WINDOW_BITS: u32 = 17;
/// Milliseconds after its second at which a masterchain block is generated (shard blocks at 0).
const MC_UTIME_MS: u16 = 500;
/// Value of each generated message (nanotokens); a sender sends at most its balance.
const MESSAGE_VALUE: u128 = 1_000_000;
/// What an mc block sends to deploy each shard account (nanotokens).
const DEPLOY_FUNDS: u128 = 1_000_000_000_000_000;
/// What each mc account keeps after the deployments (nanotokens).
const MC_RESERVE: u128 = 1_000_000_000_000_000;

/// A message waiting in a chain's inbox: its queue key, its cell, and whether its source is that chain.
#[derive(Clone)]
struct Queued {
    key: QueueKey,
    cell: Cell,
    same_shard: bool,
}

/// The last block of one chain (a shard, or the masterchain) and its state.
struct ChainTip {
    shard: ShardIdent,
    id: BlockId,
    end_lt: u64,
    state: ShardStateUnsplit,
    state_root: Cell,
    /// The cells of `state_root`, counted.
    cells: StateCells,
    last_diff_hash: HashBytes,
    /// This chain's diffs that consumers may still need (its queue state's tail), oldest first.
    pending_diffs: Vec<PendingDiff>,
    /// This chain's last `processed_to`.
    processed_to: Vec<(ShardIdent, QueueKey)>,
}

impl ChainTip {
    fn block_ref(&self) -> BlockRef {
        BlockRef {
            end_lt: self.end_lt,
            seqno: self.id.seqno,
            root_hash: self.id.root_hash,
            file_hash: self.id.file_hash,
        }
    }
}

/// A diff still in the queue, with its message cells in the diff's (hash) order.
#[derive(Clone)]
pub(crate) struct PendingDiff {
    pub(crate) max_message: QueueKey,
    pub(crate) diff: QueueDiff,
    pub(crate) messages: Vec<Cell>,
}

/// A generated block ready for an archive, with what the chain summary lists.
pub struct GeneratedGroup {
    /// The mc block.
    pub mc: BlockId,
    /// Whether it is a key block.
    pub is_key_block: bool,
    /// Whether it is a persistent key block (the first key block of a new 2^17 s window).
    pub is_persistent: bool,
    /// Whether it installs a new validator set.
    pub rotates: bool,
    /// Its gen_utime.
    pub gen_utime: u32,
    /// Its shard blocks, then itself, in apply order.
    pub blocks: Vec<ArchivedBlock>,
    /// The hashes of the external messages its blocks took (see [`Generator::next_mc_block_with`]).
    pub externals: Vec<HashBytes>,
}

/// The stateful generator. [`Generator::next_mc_block`] extends the chain by one mc block.
pub struct Generator {
    options: ChainOptions,
    /// The genesis.
    pub genesis: Genesis,
    global_id: i32,
    gen_software: GlobalVersion,
    shuffle: bool,
    config: BlockchainConfig,
    /// Every validator set generated so far (0: the zerostate's).
    pub sets: Vec<ValidatorKeys>,
    current_set: usize,
    current_vset: ValidatorSet,
    announced: Option<(usize, ValidatorSet)>,
    catchain_seqno: u32,
    consensus_info: ConsensusInfo,
    mc: ChainTip,
    mc_extra: McStateExtra,
    shards: Vec<ChainTip>,
    /// Every chain's accounts (0: the masterchain, then the shards in shard order).
    accounts: Vec<ChainAccounts>,
    /// Per chain: the messages the next blocks import (created in the previous mc block's group).
    inbox: Vec<Vec<Queued>>,
    /// Per chain: the messages the blocks of the current group created (imported by the next group).
    next_inbox: Vec<Vec<Queued>>,
    lt_slot: u64,
    utime: u32,
    key_blocks: u32,
    last_key_block: u32,
    last_key_utime: u32,
    last_key_ref: Option<BlockRef>,
}

impl Generator {
    /// Builds the genesis from `base_zerostate` and starts the chain at it.
    pub fn new(options: ChainOptions, base_zerostate: &[u8]) -> Result<Self, ChainError> {
        options.validate()?;
        let shards = zerostate::split_workchain(options.shape.shards)?;
        let base = regolith_formats::zerostate::McZerostate::parse(base_zerostate)
            .map_err(|e| ChainError::Zerostate(e.to_string()))?;
        let gen_utime = base.state.gen_utime;
        let shuffle = base
            .extra
            .config
            .get_collation_config()
            .map_err(|e| ChainError::Zerostate(format!("collation config: {e}")))?
            .shuffle_mc_validators;
        let gen_software = base
            .extra
            .config
            .get_global_version()
            .map_err(|e| ChainError::Zerostate(format!("global version: {e}")))?;
        let consensus_info = base.extra.consensus_info;
        let keys = ValidatorKeys::derive(options.shape.seed, 0, options.shape.validators);
        let vset = keys.validator_set(gen_utime)?;
        let round = subset_round(
            gen_software.capabilities,
            0,
            consensus_info.vset_switch_round,
        );
        let (_, short_hash) = vset
            .compute_mc_subset(round, shuffle)
            .ok_or_else(|| ChainError::InvalidOption("the masterchain subset is empty".into()))?;
        let count = options.shape.accounts as usize;
        let mut mc_accounts = ChainAccounts::derive_over(
            options.shape.seed,
            ShardIdent::MASTERCHAIN,
            count,
            base.state
                .load_accounts()
                .map_err(|e| ChainError::Zerostate(format!("accounts: {e}")))?,
        )?;
        // Each mc account deploys the account of its index in every shard (mc block 1 the first ones).
        let funds = MC_RESERVE + DEPLOY_FUNDS * shards.len() as u128;
        for index in 0..mc_accounts.entries.len() {
            let address = mc_accounts.address(index);
            let account = active_account(&address, wallet_state(&address)?, funds, 0, gen_utime)?;
            let (cell, _) = account_cell(account.clone())?;
            mc_accounts.set(index, account, cell, (HashBytes::ZERO, 0))?;
        }
        let added = funds * mc_accounts.entries.len() as u128;
        let genesis = zerostate::build(
            base_zerostate,
            &vset,
            short_hash,
            &shards,
            mc_accounts.dict(),
            added,
        )?;

        let mc = ChainTip {
            shard: ShardIdent::MASTERCHAIN,
            id: genesis.mc.id,
            end_lt: 0,
            state: genesis.mc.state.clone(),
            state_root: genesis.mc.root.clone(),
            cells: StateCells::of(&genesis.mc.root),
            last_diff_hash: HashBytes::ZERO,
            pending_diffs: Vec::new(),
            processed_to: Vec::new(),
        };
        let shard_tips = genesis
            .shards
            .iter()
            .map(|z| {
                let state = z
                    .root
                    .parse::<ShardStateUnsplit>()
                    .map_err(build_err("a shard zerostate"))?;
                Ok(ChainTip {
                    shard: z.id.shard,
                    id: z.id,
                    end_lt: 0,
                    state,
                    state_root: z.root.clone(),
                    cells: StateCells::of(&z.root),
                    last_diff_hash: HashBytes::ZERO,
                    pending_diffs: Vec::new(),
                    processed_to: Vec::new(),
                })
            })
            .collect::<Result<Vec<_>, ChainError>>()?;
        let mut accounts = vec![mc_accounts];
        for shard in &shards {
            accounts.push(ChainAccounts::derive(options.shape.seed, *shard, count)?);
        }
        let chains = accounts.len();
        Ok(Self {
            global_id: genesis.mc.state.global_id,
            config: genesis.mc.extra.config.clone(),
            mc_extra: genesis.mc.extra.clone(),
            options,
            gen_software,
            shuffle,
            sets: vec![keys],
            current_set: 0,
            current_vset: vset,
            announced: None,
            catchain_seqno: 0,
            consensus_info,
            mc,
            shards: shard_tips,
            accounts,
            inbox: vec![Vec::new(); chains],
            next_inbox: vec![Vec::new(); chains],
            lt_slot: 0,
            utime: gen_utime,
            key_blocks: 0,
            last_key_block: 0,
            last_key_utime: gen_utime,
            last_key_ref: None,
            genesis,
        })
    }

    /// The generator at mc block `last.seqno` of the chain that `options` and `base_zerostate` make, rebuilt
    /// by generating every block from the zerostate on (the step API, so exactly the blocks the first run
    /// made). The replayed zerostate must be `zerostate` and the replayed block `last`: an mc block's id
    /// covers its previous one and its shard blocks, so that pins the whole chain. `on_block(seqno)` is
    /// called after each replayed mc block (progress); a `Break` stops the replay with [`ChainError::Stopped`].
    ///
    /// `externals(seqno)` gives the external messages the group of mc block `seqno` took the first time (what
    /// the caller recorded of [`GeneratedGroup::externals`]): they are given again, so the replay takes exactly
    /// them.
    pub fn resume(
        options: ChainOptions,
        base_zerostate: &[u8],
        zerostate: &BlockId,
        last: &BlockId,
        mut externals: impl FnMut(u32) -> Result<Vec<Cell>, ChainError>,
        mut on_block: impl FnMut(u32) -> std::ops::ControlFlow<()>,
    ) -> Result<Self, ChainError> {
        let mut generator = Self::new(options, base_zerostate)?;
        let mismatch =
            |seqno: u32, replayed: &BlockId, stored: &BlockId| ChainError::ReplayMismatch {
                seqno,
                replayed: replayed.to_string(),
                stored: stored.to_string(),
            };
        if generator.genesis.mc.id != *zerostate {
            return Err(mismatch(0, &generator.genesis.mc.id, zerostate));
        }
        while generator.mc.id.seqno < last.seqno {
            let given = externals(generator.mc.id.seqno + 1)?;
            let group = generator.next_mc_block_with(&given)?;
            if group.externals.len() != given.len() {
                return Err(ChainError::ReplayExternals {
                    seqno: group.mc.seqno,
                    given: given.len(),
                    taken: group.externals.len(),
                });
            }
            if on_block(group.mc.seqno).is_break() {
                return Err(ChainError::Stopped);
            }
        }
        if generator.mc.id != *last {
            return Err(mismatch(last.seqno, &generator.mc.id, last));
        }
        Ok(generator)
    }

    /// Accounts of each shard that mc blocks up to `seqno` deploy: the first ones, in index order.
    fn deployed_by(&self, seqno: u32) -> usize {
        (seqno as usize)
            .saturating_mul(DEPLOYS_PER_MC_BLOCK)
            .min(self.options.shape.accounts as usize)
    }

    /// The options.
    pub fn options(&self) -> &ChainOptions {
        &self.options
    }

    /// The last mc block.
    pub fn last_mc_block(&self) -> BlockId {
        self.mc.id
    }

    /// The validator set that signs the next blocks.
    pub fn current_set(&self) -> &ValidatorKeys {
        &self.sets[self.current_set]
    }

    /// The addresses of the generated accounts of every chain (the masterchain's first), in id order; an
    /// account is deployed from some block on (see [`crate::accounts`]).
    pub fn account_addresses(&self) -> Vec<tycho_types::models::StdAddr> {
        self.accounts
            .iter()
            .flat_map(|a| (0..a.entries.len()).map(|i| a.address(i)))
            .collect()
    }

    /// The last mc state root.
    pub fn mc_state_root(&self) -> &Cell {
        &self.mc.state_root
    }

    /// The top shard blocks and their state roots.
    pub fn shard_tips(&self) -> Vec<(BlockId, Cell)> {
        self.shards
            .iter()
            .map(|t| (t.id, t.state_root.clone()))
            .collect()
    }

    /// The last block of every chain (mc first), its state root and its queue tail (oldest first).
    pub(crate) fn tips(&self) -> Vec<(BlockId, Cell, &[PendingDiff])> {
        std::iter::once(&self.mc)
            .chain(self.shards.iter())
            .map(|t| (t.id, t.state_root.clone(), t.pending_diffs.as_slice()))
            .collect()
    }

    fn next_start_lt(&mut self) -> u64 {
        self.lt_slot += 1;
        self.lt_slot * LT_SLOT
    }

    /// Every chain's position as of now (what the next blocks have processed): (lt, ff…) of its last end_lt.
    fn processed_snapshot(&self) -> Vec<(ShardIdent, QueueKey)> {
        let mut out: Vec<(ShardIdent, QueueKey)> = std::iter::once(&self.mc)
            .chain(self.shards.iter())
            .map(|t| {
                (
                    t.shard,
                    QueueKey {
                        lt: t.end_lt,
                        hash: HashBytes([0xff; 32]),
                    },
                )
            })
            .collect();
        out.sort_by_key(|(s, _)| (s.workchain(), s.prefix()));
        out
    }

    /// Generates the next mc block with a new top block of every shard: the step API. [`crate::generate`] is a
    /// loop over it, and the live devnet calls it once per block interval, so both give the same bytes.
    pub fn next_mc_block(&mut self) -> Result<GeneratedGroup, ChainError> {
        self.next_mc_block_with(&[])
    }

    /// [`Self::next_mc_block`], with external inbound messages for the group: each one addressed to a
    /// generated account that is deployed once its block has imported its inbox gets a transaction in that
    /// block (after the imports, in hash order, each message once); the others are not taken. The group
    /// lists the hashes it took. The same messages after the same chain give the same blocks.
    pub fn next_mc_block_with(&mut self, externals: &[Cell]) -> Result<GeneratedGroup, ChainError> {
        let chains = 1 + self.shards.len();
        let mut by_chain: Vec<BTreeMap<HashBytes, (HashBytes, Cell)>> =
            vec![BTreeMap::new(); chains];
        for cell in externals {
            if let Some((chain, dst)) = self.external_route(cell) {
                by_chain[chain].insert(*cell.repr_hash(), (dst, cell.clone()));
            }
        }
        let mut taken = Vec::new();
        let seqno = self.mc.id.seqno + 1;
        let is_key_block = seqno.is_multiple_of(self.options.shape.key_block_every);
        let mut is_persistent = false;
        let mut rotates = false;
        let mut announces = false;
        if is_key_block {
            let index = self.key_blocks + 1;
            if index.is_multiple_of(self.options.shape.persistent_every) {
                // The first second of the next 2^17 s window.
                self.utime = ((self.utime >> PERSISTENT_WINDOW_BITS) + 1) << PERSISTENT_WINDOW_BITS;
            } else {
                self.utime += 1;
            }
            is_persistent = (self.utime >> PERSISTENT_WINDOW_BITS)
                != (self.last_key_utime >> PERSISTENT_WINDOW_BITS);
            rotates = index.is_multiple_of(self.options.shape.rotate_every);
            announces = (index + 1).is_multiple_of(self.options.shape.rotate_every);
        } else {
            self.utime += 1;
        }
        let utime = self.utime;
        let processed = self.processed_snapshot();
        let mc_ref = self.mc.block_ref();
        let min_ref_mc_seqno = self.mc.id.seqno;

        // The signing set is the one in effect after the previous key block.
        let signing = self.current_set;
        let round = subset_round(
            self.gen_software.capabilities,
            self.catchain_seqno,
            self.consensus_info.vset_switch_round,
        );
        let (_, short_hash) = self
            .current_vset
            .compute_mc_subset(round, self.shuffle)
            .ok_or_else(|| ChainError::InvalidOption("the masterchain subset is empty".into()))?;

        let mut blocks = Vec::with_capacity(self.shards.len() + 1);
        let mut descrs = Vec::with_capacity(self.shards.len());
        // What the previous group sent is what this one imports.
        self.inbox = std::mem::replace(&mut self.next_inbox, vec![Vec::new(); chains]);
        for shard_index in 0..self.shards.len() {
            let start_lt = self.next_start_lt();
            let chain = 1 + shard_index;
            let mut block = BlockBuilder::new(start_lt, utime);
            self.import_inbox(chain, &mut block)?;
            self.take_externals(chain, &mut block, &by_chain[chain], &mut taken)?;
            // The first `deployed` accounts of every shard: those the mc blocks before this group deployed.
            // This block has just imported the last of them (so they send), and each shard's block of this
            // group imports them before the next group brings what this block sends (so they receive).
            let deployed = self.deployed_by(seqno - 1);
            if deployed > 0 {
                for i in 0..self.options.shape.messages as usize {
                    // Every chain in turn, this one and the masterchain included.
                    let route = (chain + 1 + (i + seqno as usize) % chains) % chains;
                    let receivers = if route == 0 {
                        self.accounts[0].entries.len()
                    } else {
                        deployed
                    };
                    let dst = self.accounts[route].address((i * 7 + seqno as usize) % receivers);
                    let send = Send {
                        src: i % deployed,
                        dst,
                        route,
                        dst_in_shard: route == chain,
                        value: MESSAGE_VALUE,
                        body: self.message_body(self.shards[shard_index].shard, seqno, i),
                        init: None,
                    };
                    block.send(&mut self.accounts[chain], send)?;
                }
            }
            let built = block.finish(&self.accounts[chain])?;
            self.route_new_messages(chain, &built);
            let mut sorted_cells: Vec<Cell> =
                built.messages.iter().map(|m| m.cell.clone()).collect();
            sorted_cells.sort_by_key(|c| *c.repr_hash());
            let end_lt = built.last_lt.max(start_lt + 1);
            let (min_message, max_message, hashes) = diff_bounds(&built.messages, start_lt, end_lt);
            let tail_len = self.tail_len(shard_index + 1, &max_message);
            let tip = &mut self.shards[shard_index];
            let shard = tip.shard;
            let block_seqno = tip.id.seqno + 1;

            let diff = QueueDiff {
                prev_hash: tip.last_diff_hash,
                shard,
                seqno: block_seqno,
                processed_to: processed.clone(),
                min_message,
                max_message,
                messages: hashes,
                router_partitions_src: Vec::new(),
                router_partitions_dst: Vec::new(),
            };
            let diff_bytes = diff.to_bytes();
            let diff_hash = regolith_formats::queue_diff::queue_diff_hash(&diff_bytes);

            let new_state = ShardStateUnsplit {
                seqno: block_seqno,
                gen_utime: utime,
                gen_utime_ms: 0,
                gen_lt: end_lt,
                min_ref_mc_seqno,
                master_ref: Some(mc_ref.clone()),
                accounts: Lazy::new(self.accounts[chain].dict())
                    .map_err(build_err("shard accounts"))?,
                total_balance: self.accounts[chain].total_balance(),
                ..tip.state.clone()
            };
            let value_flow = value_flow(&tip.state, &new_state, &built);
            let new_root =
                CellBuilder::build_from(&new_state).map_err(build_err("a shard state"))?;
            let update = tip.cells.update(&tip.state_root, &new_root)?;

            let mut info = BlockInfo {
                seqno: block_seqno,
                shard,
                gen_utime: utime,
                gen_utime_ms: 0,
                start_lt,
                end_lt,
                gen_validator_list_hash_short: short_hash,
                gen_catchain_seqno: self.catchain_seqno,
                min_ref_mc_seqno,
                prev_key_block_seqno: self.last_key_block,
                master_ref: Some(Lazy::new(&mc_ref).map_err(build_err("master ref"))?),
                ..Default::default()
            };
            info.set_gen_software(Some(self.gen_software));
            info.set_prev_ref(&PrevBlockRef::Single(tip.block_ref()));
            let extra = self.block_extra(&built, shard, block_seqno, signing, None)?;
            let (id, root, data) =
                self.build_block(&info, &value_flow, &update, diff_hash, tail_len, &extra)?;
            let proof = crate::proof::build_proof(&id, &root, None)?;

            descrs.push((
                shard,
                ShardDescription {
                    seqno: block_seqno,
                    reg_mc_seqno: seqno,
                    start_lt,
                    end_lt,
                    root_hash: id.root_hash,
                    file_hash: id.file_hash,
                    before_split: false,
                    before_merge: false,
                    want_split: false,
                    want_merge: false,
                    nx_cc_updated: false,
                    next_catchain_seqno: self.catchain_seqno,
                    ext_processed_to_anchor_id: 0,
                    top_sc_block_updated: true,
                    min_ref_mc_seqno,
                    gen_utime: utime,
                    split_merge_at: None,
                    fees_collected: Default::default(),
                    funds_created: Default::default(),
                },
            ));
            let tip = &mut self.shards[shard_index];
            tip.id = id;
            tip.end_lt = end_lt;
            tip.state = new_state;
            tip.state_root = new_root;
            tip.last_diff_hash = diff_hash;
            tip.pending_diffs.push(PendingDiff {
                max_message,
                diff,
                messages: sorted_cells,
            });
            tip.processed_to = processed.clone();
            blocks.push(ArchivedBlock {
                id,
                data,
                proof,
                queue_diff: diff_bytes,
            });
        }

        // The masterchain block: its imports, and the deployment of the shard accounts of its batch.
        let start_lt = self.next_start_lt();
        let mut block = BlockBuilder::new(start_lt, utime);
        self.import_inbox(0, &mut block)?;
        self.take_externals(0, &mut block, &by_chain[0], &mut taken)?;
        let deploys = self.deployed_by(seqno - 1)..self.deployed_by(seqno);
        if !deploys.is_empty() {
            for chain in 1..chains {
                for index in deploys.clone() {
                    let dst = self.accounts[chain].address(index);
                    let send = Send {
                        src: index % self.accounts[0].entries.len(),
                        init: Some(wallet_state(&dst)?),
                        dst,
                        route: chain,
                        dst_in_shard: false,
                        value: DEPLOY_FUNDS,
                        body: Vec::new(),
                    };
                    block.send(&mut self.accounts[0], send)?;
                }
            }
        }
        let built = block.finish(&self.accounts[0])?;
        self.route_new_messages(0, &built);
        let mut sorted_cells: Vec<Cell> = built.messages.iter().map(|m| m.cell.clone()).collect();
        sorted_cells.sort_by_key(|c| *c.repr_hash());
        let end_lt = built.last_lt.max(start_lt + 1);
        let shard_hashes = ShardHashes::from_shards(descrs.iter().map(|(s, d)| (s, d)))
            .map_err(build_err("shard hashes"))?;
        let mut next_vset = None;
        if is_key_block {
            if rotates {
                let (index, vset) = match self.announced.take() {
                    Some(announced) => announced,
                    None => self.derive_set(utime)?,
                };
                self.config
                    .set_raw(
                        32,
                        CellBuilder::build_from(&self.current_vset)
                            .map_err(build_err("config param 32"))?,
                    )
                    .map_err(build_err("config param 32"))?;
                self.config
                    .set_raw(
                        34,
                        CellBuilder::build_from(&vset).map_err(build_err("config param 34"))?,
                    )
                    .map_err(build_err("config param 34"))?;
                self.config
                    .remove(36)
                    .map_err(build_err("config param 36"))?;
                next_vset = Some((index, vset));
            }
            if announces {
                let announced = self.derive_set(utime + 1)?;
                self.config
                    .set_raw(
                        36,
                        CellBuilder::build_from(&announced.1)
                            .map_err(build_err("config param 36"))?,
                    )
                    .map_err(build_err("config param 36"))?;
                self.announced = Some(announced);
            }
        }
        let (id_hint_catchain, next_consensus) = match &next_vset {
            Some(_) => (
                self.catchain_seqno + 1,
                ConsensusInfo {
                    vset_switch_round: self.consensus_info.vset_switch_round + 1000,
                    prev_vset_switch_round: self.consensus_info.vset_switch_round,
                    prev_shuffle_mc_validators: self.shuffle,
                    ..self.consensus_info
                },
            ),
            None => (self.catchain_seqno, self.consensus_info),
        };
        let next_short_hash = match &next_vset {
            Some((_, vset)) => {
                let round = subset_round(
                    self.gen_software.capabilities,
                    id_hint_catchain,
                    next_consensus.vset_switch_round,
                );
                vset.compute_mc_subset(round, self.shuffle)
                    .ok_or_else(|| {
                        ChainError::InvalidOption("the masterchain subset is empty".into())
                    })?
                    .1
            }
            None => short_hash,
        };

        let mut mc_extra = self.mc_extra.clone();
        mc_extra.shards = shard_hashes.clone();
        mc_extra.config = self.config.clone();
        mc_extra.validator_info.validator_list_hash_short = next_short_hash;
        mc_extra.validator_info.catchain_seqno = id_hint_catchain;
        mc_extra.validator_info.nx_cc_updated = next_vset.is_some();
        mc_extra.consensus_info = next_consensus;
        mc_extra
            .prev_blocks
            .set(
                self.mc.id.seqno,
                KeyMaxLt {
                    has_key_block: self.mc.id.seqno == self.last_key_block,
                    max_end_lt: self.mc.end_lt,
                },
                KeyBlockRef {
                    is_key_block: self.mc.id.seqno == self.last_key_block,
                    block_ref: mc_ref.clone(),
                },
            )
            .map_err(build_err("prev blocks"))?;
        mc_extra.after_key_block = is_key_block;
        mc_extra.last_key_block = self.last_key_ref.clone();
        let new_state = ShardStateUnsplit {
            seqno,
            gen_utime: utime,
            gen_utime_ms: MC_UTIME_MS,
            gen_lt: end_lt,
            min_ref_mc_seqno,
            accounts: Lazy::new(self.accounts[0].dict()).map_err(build_err("mc accounts"))?,
            total_balance: self.accounts[0].total_balance(),
            custom: Some(Lazy::new(&mc_extra).map_err(build_err("McStateExtra"))?),
            ..self.mc.state.clone()
        };
        let value_flow = value_flow(&self.mc.state, &new_state, &built);
        let new_root = CellBuilder::build_from(&new_state).map_err(build_err("the mc state"))?;
        let update = self.mc.cells.update(&self.mc.state_root, &new_root)?;

        let (min_message, max_message, hashes) = diff_bounds(&built.messages, start_lt, end_lt);
        let diff = QueueDiff {
            prev_hash: self.mc.last_diff_hash,
            shard: ShardIdent::MASTERCHAIN,
            seqno,
            processed_to: processed.clone(),
            min_message,
            max_message,
            messages: hashes,
            router_partitions_src: Vec::new(),
            router_partitions_dst: Vec::new(),
        };
        let diff_bytes = diff.to_bytes();
        let diff_hash = regolith_formats::queue_diff::queue_diff_hash(&diff_bytes);
        let tail_len = self.tail_len(0, &max_message);

        let mut info = BlockInfo {
            key_block: is_key_block,
            seqno,
            shard: ShardIdent::MASTERCHAIN,
            gen_utime: utime,
            gen_utime_ms: MC_UTIME_MS,
            start_lt,
            end_lt,
            gen_validator_list_hash_short: short_hash,
            gen_catchain_seqno: self.catchain_seqno,
            min_ref_mc_seqno,
            prev_key_block_seqno: self.last_key_block,
            ..Default::default()
        };
        info.set_gen_software(Some(self.gen_software));
        info.set_prev_ref(&PrevBlockRef::Single(mc_ref.clone()));
        let custom = McBlockExtra {
            shards: shard_hashes,
            config: is_key_block.then(|| self.config.clone()),
            ..Default::default()
        };
        let custom = Lazy::new(&custom).map_err(build_err("McBlockExtra"))?;
        let extra = self.block_extra(
            &built,
            ShardIdent::MASTERCHAIN,
            seqno,
            signing,
            Some(custom),
        )?;
        let (id, root, data) =
            self.build_block(&info, &value_flow, &update, diff_hash, tail_len, &extra)?;
        let signed = self.sets[signing].sign(&self.current_vset, round, self.shuffle, &id)?;
        let signatures = BlockSignatures {
            validator_info: ValidatorBaseInfo {
                validator_list_hash_short: signed.short_hash,
                catchain_seqno: self.catchain_seqno,
            },
            consensus_info: self.consensus_info,
            signature_count: signed.count,
            total_weight: signed.weight,
            signatures: signed.signatures,
        };
        let proof = crate::proof::build_proof(&id, &root, Some(signatures))?;
        blocks.push(ArchivedBlock {
            id,
            data,
            proof,
            queue_diff: diff_bytes,
        });

        self.mc.id = id;
        self.mc.end_lt = end_lt;
        self.mc.state = new_state;
        self.mc.state_root = new_root;
        self.mc.last_diff_hash = diff_hash;
        self.mc.pending_diffs.push(PendingDiff {
            max_message,
            diff,
            messages: sorted_cells,
        });
        self.mc.processed_to = processed;
        self.mc_extra = mc_extra;
        if is_key_block {
            self.key_blocks += 1;
            self.last_key_block = seqno;
            self.last_key_utime = utime;
            self.last_key_ref = Some(self.mc.block_ref());
        }
        if let Some((index, vset)) = next_vset {
            self.current_set = index;
            self.current_vset = vset;
            self.catchain_seqno = id_hint_catchain;
            self.consensus_info = next_consensus;
        }
        Ok(GeneratedGroup {
            mc: id,
            is_key_block,
            is_persistent,
            rotates,
            gen_utime: utime,
            blocks,
            externals: taken,
        })
    }

    /// The chain (index) and account id an external inbound message goes to, if it is one to a generated
    /// account.
    fn external_route(&self, cell: &Cell) -> Option<(usize, HashBytes)> {
        let message = cell.parse::<OwnedMessage>().ok()?;
        let MsgInfo::ExtIn(info) = message.info else {
            return None;
        };
        let IntAddr::Std(dst) = info.dst else {
            return None;
        };
        if dst.anycast.is_some() {
            return None;
        }
        let chain = std::iter::once(&self.accounts[0])
            .chain(self.accounts[1..].iter())
            .position(|a| a.shard.contains_address(&dst))?;
        self.accounts[chain].index_of(&dst.address)?;
        Some((chain, dst.address))
    }

    /// Gives `block` of chain `chain` the external messages `messages` (by hash) whose accounts are deployed;
    /// their hashes go to `taken`.
    fn take_externals(
        &mut self,
        chain: usize,
        block: &mut BlockBuilder,
        messages: &BTreeMap<HashBytes, (HashBytes, Cell)>,
        taken: &mut Vec<HashBytes>,
    ) -> Result<(), ChainError> {
        let accounts = &mut self.accounts[chain];
        for (hash, (dst, cell)) in messages {
            let Some(index) = accounts.index_of(dst) else {
                continue;
            };
            if accounts.entries[index].account.is_none() {
                continue;
            }
            block.external(accounts, index, cell.clone())?;
            taken.push(*hash);
        }
        Ok(())
    }

    /// Imports the messages of chain `chain`'s inbox (in queue-key order) into `block`.
    fn import_inbox(&mut self, chain: usize, block: &mut BlockBuilder) -> Result<(), ChainError> {
        let mut inbox = std::mem::take(&mut self.inbox[chain]);
        inbox.sort_by_key(|q| q.key);
        for queued in inbox {
            block.import(
                &mut self.accounts[chain],
                Import {
                    cell: queued.cell,
                    same_shard: queued.same_shard,
                },
            )?;
        }
        Ok(())
    }

    /// Puts the messages a block of chain `chain` created into their destination's next inbox.
    fn route_new_messages(&mut self, chain: usize, built: &BlockMessages) {
        for message in &built.messages {
            self.next_inbox[message.route].push(Queued {
                key: QueueKey {
                    lt: message.lt,
                    hash: message.hash,
                },
                cell: message.cell.clone(),
                same_shard: message.route == chain,
            });
        }
    }

    /// The keys of the next set (derived now) and its validator set.
    fn derive_set(&mut self, utime_since: u32) -> Result<(usize, ValidatorSet), ChainError> {
        let index = self.sets.len();
        let keys = ValidatorKeys::derive(
            self.options.shape.seed,
            index as u32,
            self.options.shape.validators,
        );
        let vset = keys.validator_set(utime_since)?;
        self.sets.push(keys);
        Ok((index, vset))
    }

    /// `tail_len` of a new diff of chain `chain` (0: mc): its diffs above the least `processed_to` of every
    /// chain's last block, plus the new one.
    fn tail_len(&mut self, chain: usize, _new_max: &QueueKey) -> u32 {
        let shard = if chain == 0 {
            ShardIdent::MASTERCHAIN
        } else {
            self.shards[chain - 1].shard
        };
        let bound = std::iter::once(&self.mc)
            .chain(self.shards.iter())
            .map(|t| {
                t.processed_to
                    .iter()
                    .find(|(s, _)| *s == shard)
                    .map(|(_, k)| *k)
                    .unwrap_or_default()
            })
            .min()
            .unwrap_or_default();
        let tip = if chain == 0 {
            &mut self.mc
        } else {
            &mut self.shards[chain - 1]
        };
        tip.pending_diffs.retain(|d| d.max_message > bound);
        tip.pending_diffs.len() as u32 + 1
    }

    fn message_body(&self, shard: ShardIdent, seqno: u32, index: usize) -> Vec<u8> {
        let mut hasher = blake3::Hasher::new_derive_key("regolith chain generate: message body v1");
        hasher.update(&self.options.shape.seed.to_le_bytes());
        hasher.update(&shard.workchain().to_le_bytes());
        hasher.update(&shard.prefix().to_le_bytes());
        hasher.update(&seqno.to_le_bytes());
        hasher.update(&(index as u64).to_le_bytes());
        let mut body = vec![0u8; self.options.shape.message_bytes as usize];
        hasher.finalize_xof().fill(&mut body);
        body
    }

    fn rand_seed(&self, shard: ShardIdent, seqno: u32) -> HashBytes {
        let mut input = Vec::with_capacity(24);
        input.extend_from_slice(&self.options.shape.seed.to_le_bytes());
        input.extend_from_slice(&shard.workchain().to_le_bytes());
        input.extend_from_slice(&shard.prefix().to_le_bytes());
        input.extend_from_slice(&seqno.to_le_bytes());
        HashBytes(blake3::derive_key(
            "regolith chain generate: rand seed v1",
            &input,
        ))
    }

    /// The extra of block `seqno` of `shard`: its messages and transactions, seed and creator.
    fn block_extra(
        &self,
        built: &BlockMessages,
        shard: ShardIdent,
        seqno: u32,
        signing: usize,
        custom: Option<Lazy<McBlockExtra>>,
    ) -> Result<BlockExtra, ChainError> {
        Ok(BlockExtra {
            in_msg_description: Lazy::new(&built.in_msgs).map_err(build_err("InMsgDescr"))?,
            out_msg_description: Lazy::new(&built.out_msgs).map_err(build_err("OutMsgDescr"))?,
            account_blocks: Lazy::new(&built.account_blocks)
                .map_err(build_err("account blocks"))?,
            rand_seed: self.rand_seed(shard, seqno),
            created_by: self.sets[signing].public_keys()[0],
            custom,
        })
    }

    fn build_block(
        &self,
        info: &BlockInfo,
        value_flow: &ValueFlow,
        update: &MerkleUpdate,
        diff_hash: HashBytes,
        tail_len: u32,
        extra: &BlockExtra,
    ) -> Result<(BlockId, Cell, Vec<u8>), ChainError> {
        let what = || format!("block {}:{}", info.shard, info.seqno);
        let block = Block {
            global_id: self.global_id,
            info: Lazy::new(info).map_err(build_err(what()))?,
            value_flow: Lazy::new(value_flow).map_err(build_err(what()))?,
            state_update: LazyExotic::new(update).map_err(build_err(what()))?,
            out_msg_queue_updates: OutMsgQueueUpdates {
                diff_hash,
                tail_len,
            },
            extra: Lazy::new(extra).map_err(build_err(what()))?,
        };
        let root = CellBuilder::build_from(&block).map_err(build_err(what()))?;
        let data = Boc::encode(&root);
        let id = BlockId {
            shard: info.shard,
            seqno: info.seqno,
            root_hash: *root.repr_hash(),
            file_hash: regolith_formats::file_hash(&data),
        };
        Ok((id, root, data))
    }
}

/// A block's value flow: the balance of the state before and after it, and what its messages brought in and
/// took out (fees are zero).
fn value_flow(
    old: &ShardStateUnsplit,
    new: &ShardStateUnsplit,
    built: &BlockMessages,
) -> ValueFlow {
    ValueFlow {
        from_prev_block: old.total_balance.clone(),
        to_next_block: new.total_balance.clone(),
        imported: built.imported.clone(),
        exported: built.exported.clone(),
        ..Default::default()
    }
}

/// min and max message keys and the sorted hashes of a diff; an empty diff spans its block's lts.
fn diff_bounds(
    messages: &[crate::messages::CreatedMessage],
    start_lt: u64,
    end_lt: u64,
) -> (QueueKey, QueueKey, Vec<HashBytes>) {
    let mut keys: Vec<QueueKey> = messages
        .iter()
        .map(|m| QueueKey {
            lt: m.lt,
            hash: m.hash,
        })
        .collect();
    keys.sort();
    let mut hashes: Vec<HashBytes> = messages.iter().map(|m| m.hash).collect();
    hashes.sort();
    match (keys.first(), keys.last()) {
        (Some(min), Some(max)) => (*min, *max, hashes),
        _ => (
            QueueKey {
                lt: start_lt,
                hash: HashBytes::ZERO,
            },
            QueueKey {
                lt: end_lt,
                hash: HashBytes([0xff; 32]),
            },
            hashes,
        ),
    }
}
