//! A backend over a real generated chain (regolith-chain): the account states of the generator's last states,
//! the transactions of its blocks, its key blocks and config, indexed the way api.md §6 and §8 describe.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use regolith_api::{
    AccountLookup, ApiBackend, BackendError, BackendFeatures, BackendFuture, ConfigSnapshot,
    ExternalMessage, GenTimings, KeyBlockProof, McTimings, NodeStatus,
};
use regolith_chain::{ChainOptions, ChainShape, Generator};
use regolith_test_support::fixture_bytes;
use tycho_types::boc::Boc;
use tycho_types::cell::{Cell, CellBuilder, HashBytes};
use tycho_types::models::{
    AccountState, Block, BlockId, ShardAccount, ShardAccounts, ShardIdent, ShardStateUnsplit,
    StdAddr, Transaction,
};

/// A transaction of the chain.
#[derive(Clone)]
pub(crate) struct TxRecord {
    pub(crate) boc: Bytes,
    pub(crate) hash: HashBytes,
    pub(crate) lt: u64,
    pub(crate) in_msg_hash: Option<HashBytes>,
    pub(crate) block: BlockId,
}

/// One chain's last state.
pub(crate) struct ChainState {
    pub(crate) shard: ShardIdent,
    pub(crate) state: ShardStateUnsplit,
    pub(crate) accounts: ShardAccounts,
}

/// What the generator made, indexed.
pub(crate) struct ChainData {
    pub(crate) states: Vec<ChainState>,
    /// (workchain, account) → transactions by lt.
    pub(crate) transactions: BTreeMap<(i8, HashBytes), BTreeMap<u64, TxRecord>>,
    pub(crate) by_hash: HashMap<HashBytes, (i8, HashBytes, u64)>,
    pub(crate) by_in_msg: HashMap<HashBytes, (i8, HashBytes, u64)>,
    /// Sorted by (workchain as u8, id): active accounts by code hash.
    pub(crate) code_hashes: BTreeMap<HashBytes, Vec<StdAddr>>,
    pub(crate) blocks: HashMap<BlockId, (Bytes, Bytes)>,
    pub(crate) key_blocks: BTreeMap<u32, BlockId>,
    pub(crate) last_mc: BlockId,
    pub(crate) last_mc_utime: u32,
    pub(crate) global_id: i32,
    pub(crate) config: Cell,
}

fn options() -> ChainOptions {
    ChainOptions {
        mc_blocks: 6,
        mc_blocks_per_archive: 10,
        shape: ChainShape {
            seed: 5,
            shards: 2,
            messages: 4,
            message_bytes: 32,
            key_block_every: 2,
            validators: 3,
            rotate_every: 2,
            persistent_every: 2,
            accounts: 6,
        },
    }
}

/// The chain, generated once for every test of the binary.
pub(crate) fn chain() -> Arc<ChainData> {
    static CHAIN: OnceLock<Arc<ChainData>> = OnceLock::new();
    CHAIN.get_or_init(|| Arc::new(generate())).clone()
}

fn generate() -> ChainData {
    let options = options();
    let mut generator = Generator::new(options.clone(), &fixture_bytes("zerostate.boc")).unwrap();
    let mut data = ChainData {
        states: Vec::new(),
        transactions: BTreeMap::new(),
        by_hash: HashMap::new(),
        by_in_msg: HashMap::new(),
        code_hashes: BTreeMap::new(),
        blocks: HashMap::new(),
        key_blocks: BTreeMap::new(),
        last_mc: generator.last_mc_block(),
        last_mc_utime: 0,
        global_id: 0,
        config: Cell::default(),
    };
    for _ in 0..options.mc_blocks {
        let group = generator.next_mc_block().unwrap();
        if group.is_key_block {
            data.key_blocks.insert(group.mc.seqno, group.mc);
        }
        data.last_mc = group.mc;
        data.last_mc_utime = group.gen_utime;
        for archived in group.blocks {
            index_block(&mut data, &archived.id, &archived.data);
            data.blocks.insert(
                archived.id,
                (Bytes::from(archived.data), Bytes::from(archived.proof)),
            );
        }
    }
    let mut roots = vec![generator.mc_state_root().clone()];
    roots.extend(generator.shard_tips().into_iter().map(|(_, root)| root));
    for root in roots {
        let state = root.parse::<ShardStateUnsplit>().unwrap();
        let accounts = state.load_accounts().unwrap();
        if let Some(extra) = state.load_custom().unwrap() {
            data.global_id = state.global_id;
            data.config = CellBuilder::build_from(&extra.config).unwrap();
        }
        for entry in accounts.iter() {
            let (id, _, shard_account) = entry.unwrap();
            let Some(account) = shard_account.load_account().unwrap() else {
                continue;
            };
            if let AccountState::Active(init) = &account.state {
                if let Some(code) = &init.code {
                    let address = StdAddr::new(state.shard_ident.workchain() as i8, id);
                    data.code_hashes
                        .entry(*code.repr_hash())
                        .or_default()
                        .push(address);
                }
            }
        }
        data.states.push(ChainState {
            shard: state.shard_ident,
            state,
            accounts,
        });
    }
    for list in data.code_hashes.values_mut() {
        list.sort_by_key(|a| (a.workchain as u8, a.address));
    }
    data
}

fn index_block(data: &mut ChainData, id: &BlockId, boc: &[u8]) {
    let block = Boc::decode(boc).unwrap().parse::<Block>().unwrap();
    let extra = block.load_extra().unwrap();
    let account_blocks = extra.account_blocks.load().unwrap();
    let workchain = id.shard.workchain() as i8;
    for entry in account_blocks.iter() {
        let (account, _, account_block) = entry.unwrap();
        for tx in account_block.transactions.iter() {
            let (lt, _, tx) = tx.unwrap();
            let cell = tx.inner().clone();
            let parsed: Transaction = tx.load().unwrap();
            let record = TxRecord {
                boc: Bytes::from(Boc::encode(&cell)),
                hash: *cell.repr_hash(),
                lt,
                in_msg_hash: parsed.in_msg.as_ref().map(|m| *m.repr_hash()),
                block: *id,
            };
            let key = (workchain, account, lt);
            data.by_hash.insert(record.hash, key);
            if let Some(hash) = record.in_msg_hash {
                data.by_in_msg.insert(hash, key);
            }
            data.transactions
                .entry((workchain, account))
                .or_default()
                .insert(lt, record);
        }
    }
}

impl ChainData {
    /// The state that holds `address` (api.md §6: the masterchain, or the shard that contains it).
    pub(crate) fn state_of(&self, address: &StdAddr) -> Option<&ChainState> {
        self.states
            .iter()
            .find(|s| s.shard.contains_address(address))
    }

    /// The entry of `address`, if any.
    pub(crate) fn entry(&self, address: &StdAddr) -> Option<ShardAccount> {
        let state = self.state_of(address)?;
        state
            .accounts
            .get(address.address)
            .unwrap()
            .map(|(_, account)| account)
    }

    /// Every address with an entry, masterchain and shards.
    pub(crate) fn addresses(&self) -> Vec<StdAddr> {
        let mut out = Vec::new();
        for state in &self.states {
            for key in state.accounts.keys() {
                out.push(StdAddr::new(state.shard.workchain() as i8, key.unwrap()));
            }
        }
        out
    }

    pub(crate) fn tx(&self, key: &(i8, HashBytes, u64)) -> &TxRecord {
        &self.transactions[&(key.0, key.1)][&key.2]
    }
}

/// The backend: the chain, whether it keeps the index and block data, and the messages sent to it.
pub(crate) struct ChainBackend {
    pub(crate) chain: Arc<ChainData>,
    pub(crate) features: BackendFeatures,
    pub(crate) ready: bool,
    /// getStatus never answers (for the timeout).
    pub(crate) stall: bool,
    pub(crate) sent: Mutex<Vec<ExternalMessage>>,
}

impl ChainBackend {
    pub(crate) fn full() -> Arc<Self> {
        Arc::new(Self {
            chain: chain(),
            features: BackendFeatures {
                transactions_index: true,
                block_data: true,
                accounts_by_code_hash: false,
            },
            ready: true,
            stall: false,
            sent: Mutex::new(Vec::new()),
        })
    }

    pub(crate) fn state_only() -> Arc<Self> {
        Arc::new(Self {
            chain: chain(),
            features: BackendFeatures::default(),
            ready: true,
            stall: false,
            sent: Mutex::new(Vec::new()),
        })
    }

    pub(crate) fn not_ready() -> Arc<Self> {
        Arc::new(Self {
            chain: chain(),
            features: BackendFeatures::default(),
            ready: false,
            stall: false,
            sent: Mutex::new(Vec::new()),
        })
    }

    pub(crate) fn stalled() -> Arc<Self> {
        Arc::new(Self {
            chain: chain(),
            features: BackendFeatures::default(),
            ready: true,
            stall: true,
            sent: Mutex::new(Vec::new()),
        })
    }

    fn ready(&self) -> Result<(), BackendError> {
        if self.ready {
            Ok(())
        } else {
            Err(BackendError::NotReady)
        }
    }
}

fn done<'a, T: Send + 'a>(value: Result<T, BackendError>) -> BackendFuture<'a, T> {
    Box::pin(std::future::ready(value))
}

impl ApiBackend for ChainBackend {
    fn features(&self) -> BackendFeatures {
        self.features
    }

    fn status(&self) -> BackendFuture<'_, NodeStatus> {
        if self.stall {
            return Box::pin(std::future::pending());
        }
        done(Ok(NodeStatus {
            ready: self.ready,
            timings: self.ready.then(|| McTimings {
                last_mc_block_seqno: self.chain.last_mc.seqno,
                last_mc_utime: self.chain.last_mc_utime,
                mc_time_diff: 7,
                smallest_known_lt: self.features.transactions_index.then_some(0),
            }),
        }))
    }

    fn blockchain_config(&self) -> BackendFuture<'_, Option<ConfigSnapshot>> {
        done(self.ready().map(|()| {
            Some(ConfigSnapshot {
                global_id: self.chain.global_id,
                seqno: *self.chain.key_blocks.keys().last().unwrap(),
                config: self.chain.config.clone(),
            })
        }))
    }

    fn latest_key_block(&self) -> BackendFuture<'_, Option<Bytes>> {
        done(self.ready().map(|()| {
            let id = self.chain.key_blocks.values().last().unwrap();
            Some(self.chain.blocks[id].0.clone())
        }))
    }

    fn account_state<'a>(&'a self, address: &'a StdAddr) -> BackendFuture<'a, AccountLookup> {
        let result = self.ready().and_then(|()| {
            let state = self.chain.state_of(address).ok_or(BackendError::NotReady)?;
            Ok(AccountLookup {
                timings: GenTimings {
                    gen_lt: state.state.gen_lt,
                    gen_utime: state.state.gen_utime,
                },
                entry: self.chain.entry(address),
            })
        });
        done(result)
    }

    fn library_cell<'a>(&'a self, _hash: &'a HashBytes) -> BackendFuture<'a, Option<Cell>> {
        done(Ok(None))
    }

    fn key_block_proof(&self, seqno: u32) -> BackendFuture<'_, Option<KeyBlockProof>> {
        done(Ok(self.chain.key_blocks.get(&seqno).map(|id| {
            KeyBlockProof {
                block_id: *id,
                proof: self.chain.blocks[id].1.clone(),
            }
        })))
    }

    fn block_proof<'a>(&'a self, block_id: &'a BlockId) -> BackendFuture<'a, Option<Bytes>> {
        done(Ok(self.chain.blocks.get(block_id).map(|b| b.1.clone())))
    }

    fn block_data<'a>(&'a self, block_id: &'a BlockId) -> BackendFuture<'a, Option<Bytes>> {
        done(Ok(self.chain.blocks.get(block_id).map(|b| b.0.clone())))
    }

    fn transactions<'a>(
        &'a self,
        account: &'a StdAddr,
        last_lt: Option<u64>,
        limit: u8,
    ) -> BackendFuture<'a, Vec<Bytes>> {
        let list = self
            .chain
            .transactions
            .get(&(account.workchain, account.address))
            .map(|txs| {
                txs.range(..=last_lt.unwrap_or(u64::MAX))
                    .rev()
                    .take(usize::from(limit))
                    .map(|(_, tx)| tx.boc.clone())
                    .collect()
            })
            .unwrap_or_default();
        done(Ok(list))
    }

    fn transaction<'a>(&'a self, hash: &'a HashBytes) -> BackendFuture<'a, Option<Bytes>> {
        let chain = &self.chain;
        done(Ok(chain.by_hash.get(hash).map(|k| chain.tx(k).boc.clone())))
    }

    fn dst_transaction<'a>(
        &'a self,
        message_hash: &'a HashBytes,
    ) -> BackendFuture<'a, Option<Bytes>> {
        let chain = &self.chain;
        done(Ok(chain
            .by_in_msg
            .get(message_hash)
            .map(|k| chain.tx(k).boc.clone())))
    }

    fn transaction_block_id<'a>(
        &'a self,
        hash: &'a HashBytes,
    ) -> BackendFuture<'a, Option<BlockId>> {
        let chain = &self.chain;
        done(Ok(chain.by_hash.get(hash).map(|k| chain.tx(k).block)))
    }

    fn accounts_by_code_hash<'a>(
        &'a self,
        code_hash: &'a HashBytes,
        continuation: Option<&'a StdAddr>,
        limit: u8,
    ) -> BackendFuture<'a, Vec<StdAddr>> {
        let key = |a: &StdAddr| (a.workchain as u8, a.address);
        let list = self
            .chain
            .code_hashes
            .get(code_hash)
            .map(|all| {
                all.iter()
                    .filter(|a| continuation.is_none_or(|c| key(a) > key(c)))
                    .take(usize::from(limit))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        done(Ok(list))
    }

    fn send_message(&self, message: ExternalMessage) -> BackendFuture<'_, ()> {
        self.sent.lock().unwrap().push(message);
        done(Ok(()))
    }
}
