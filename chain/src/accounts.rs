//! The fixed accounts of every generated chain (a shard, or the masterchain) and their states.
//!
//! Each chain has the same number of accounts (`--accounts`) for the whole chain, so states do not grow once
//! every account is deployed. The masterchain's accounts exist from the zerostate on, each holding the funds
//! to deploy the account of its index in every shard (shard zerostates are empty, as `init` computes them),
//! which an mc block sends: mc block 1 the first [`crate::generator::DEPLOYS_PER_MC_BLOCK`] of each shard,
//! every next mc block the next ones. A shard account exists from the block that imports its deployment on.
//! Every transaction changes its account (balance, last lt, storage stat), and the state's `ShardAccounts`
//! holds the accounts as they are after the block.

use tycho_types::cell::{Cell, CellBuilder, CellFamily, Lazy};
use tycho_types::models::{
    Account, AccountState, CurrencyCollection, DepthBalanceInfo, IntAddr, OptionalAccount,
    ShardAccount, ShardAccounts, ShardIdent, StateInit, StdAddr, StorageInfo, StorageUsed,
};
use tycho_types::num::VarUint56;
use tycho_types::prelude::HashBytes;

use crate::error::{build_err, ChainError};

/// Cells visited at most when an account's storage is counted (the generated accounts have a handful).
const STORAGE_CELL_LIMIT: usize = 64;

/// One account: its id, its state (`None` before it is deployed) and its last transaction (hash, lt).
#[derive(Clone)]
pub(crate) struct AccountEntry {
    pub(crate) id: HashBytes,
    pub(crate) account: Option<Account>,
    /// Hash of the `OptionalAccount` cell (what a transaction's state update names).
    pub(crate) hash: HashBytes,
    pub(crate) last_tx: (HashBytes, u64),
}

impl AccountEntry {
    /// The balance (zero before deployment).
    pub(crate) fn balance(&self) -> u128 {
        self.account
            .as_ref()
            .map_or(0, |a| a.balance.tokens.into_inner())
    }
}

/// The accounts of one chain, in id order within the state's dictionary.
#[derive(Clone)]
pub(crate) struct ChainAccounts {
    pub(crate) shard: ShardIdent,
    pub(crate) entries: Vec<AccountEntry>,
    dict: ShardAccounts,
}

impl ChainAccounts {
    /// `count` accounts of `shard` derived from the seed, none deployed.
    pub(crate) fn derive(seed: u64, shard: ShardIdent, count: usize) -> Result<Self, ChainError> {
        let empty = account_hash(&OptionalAccount(None))?;
        let entries = derive_ids(seed, shard, count)
            .into_iter()
            .map(|id| AccountEntry {
                id,
                account: None,
                hash: empty,
                last_tx: (HashBytes::ZERO, 0),
            })
            .collect();
        Ok(Self {
            shard,
            entries,
            dict: ShardAccounts::new(),
        })
    }

    /// Like [`Self::derive`], with the accounts of `base` (a zerostate's) kept beside them.
    pub(crate) fn derive_over(
        seed: u64,
        shard: ShardIdent,
        count: usize,
        base: ShardAccounts,
    ) -> Result<Self, ChainError> {
        let mut accounts = Self::derive(seed, shard, count)?;
        for entry in &accounts.entries {
            if base
                .get(entry.id)
                .map_err(build_err("the base accounts"))?
                .is_some()
            {
                return Err(ChainError::Zerostate(format!(
                    "it already holds the generated account {}",
                    entry.id
                )));
            }
        }
        accounts.dict = base;
        Ok(accounts)
    }

    /// The address of account `index`.
    pub(crate) fn address(&self, index: usize) -> StdAddr {
        StdAddr::new(self.shard.workchain() as i8, self.entries[index].id)
    }

    /// The index of the account with id `id`.
    pub(crate) fn index_of(&self, id: &HashBytes) -> Option<usize> {
        self.entries.binary_search_by(|e| e.id.cmp(id)).ok()
    }

    /// Sets account `index` to `account` (built as `cell` by [`account_cell`]) after its transaction
    /// `(tx_hash, tx_lt)`; the dictionary entry follows.
    pub(crate) fn set(
        &mut self,
        index: usize,
        account: Account,
        cell: Cell,
        last_tx: (HashBytes, u64),
    ) -> Result<(), ChainError> {
        let entry = &mut self.entries[index];
        self.dict
            .set(
                entry.id,
                DepthBalanceInfo {
                    split_depth: 0,
                    balance: account.balance.clone(),
                },
                ShardAccount {
                    account: Lazy::from_raw(cell.clone()).map_err(build_err("a shard account"))?,
                    last_trans_hash: last_tx.0,
                    last_trans_lt: last_tx.1,
                },
            )
            .map_err(build_err("ShardAccounts"))?;
        entry.hash = *cell.repr_hash();
        entry.account = Some(account);
        entry.last_tx = last_tx;
        Ok(())
    }

    /// The dictionary of the deployed accounts.
    pub(crate) fn dict(&self) -> &ShardAccounts {
        &self.dict
    }

    /// The sum of the balances.
    pub(crate) fn total_balance(&self) -> CurrencyCollection {
        self.dict.root_extra().balance.clone()
    }
}

/// Account ids of `shard` derived from the seed: the shard's prefix bits, then hash bits; sorted.
fn derive_ids(seed: u64, shard: ShardIdent, count: usize) -> Vec<HashBytes> {
    let prefix = shard.prefix();
    let len = u32::from(shard.prefix_len());
    let keep_mask = if len == 0 { 0 } else { !0u64 << (64 - len) };
    let mut ids: Vec<HashBytes> = (0..count as u64)
        .map(|i| {
            let mut input = Vec::with_capacity(28);
            input.extend_from_slice(&seed.to_le_bytes());
            input.extend_from_slice(&shard.workchain().to_le_bytes());
            input.extend_from_slice(&prefix.to_le_bytes());
            input.extend_from_slice(&i.to_le_bytes());
            let mut id = blake3::derive_key("regolith chain generate: account v1", &input);
            let head = u64::from_be_bytes(id[..8].try_into().expect("8 bytes"));
            let head = (head & !keep_mask) | (prefix & keep_mask);
            id[..8].copy_from_slice(&head.to_be_bytes());
            HashBytes(id)
        })
        .collect();
    ids.sort();
    ids
}

/// The hash of an `OptionalAccount` cell.
pub(crate) fn account_hash(account: &OptionalAccount) -> Result<HashBytes, ChainError> {
    Ok(*CellBuilder::build_from(account)
        .map_err(build_err("an account"))?
        .repr_hash())
}

/// The `OptionalAccount` cell of an existing account, and its hash.
pub(crate) fn account_cell(account: Account) -> Result<(Cell, HashBytes), ChainError> {
    let cell =
        CellBuilder::build_from(OptionalAccount(Some(account))).map_err(build_err("an account"))?;
    let hash = *cell.repr_hash();
    Ok((cell, hash))
}

/// The state every generated account is deployed with: a fixed code cell and its address as data.
pub(crate) fn wallet_state(address: &StdAddr) -> Result<StateInit, ChainError> {
    let mut code = CellBuilder::new();
    code.store_raw(b"regolith generated wallet v1", 28 * 8)
        .map_err(build_err("wallet code"))?;
    let mut data = CellBuilder::new();
    data.store_u256(&address.address)
        .map_err(build_err("wallet data"))?;
    Ok(StateInit {
        code: Some(code.build().map_err(build_err("wallet code"))?),
        data: Some(data.build().map_err(build_err("wallet data"))?),
        ..Default::default()
    })
}

/// An active account at `address` with `balance`, its last transaction ending before `last_trans_lt`, last
/// paid at `now`; the storage stat counts its storage cells and bits as a node does.
pub(crate) fn active_account(
    address: &StdAddr,
    state: StateInit,
    balance: u128,
    last_trans_lt: u64,
    now: u32,
) -> Result<Account, ChainError> {
    let mut account = Account {
        address: IntAddr::Std(address.clone()),
        storage_stat: StorageInfo {
            last_paid: now,
            ..Default::default()
        },
        last_trans_lt,
        balance: CurrencyCollection::new(balance),
        state: AccountState::Active(state),
    };
    account.storage_stat.used = storage_used(&account)?;
    Ok(account)
}

/// Cells and bits of an account's storage (`last_trans_lt`, balance, state).
fn storage_used(account: &Account) -> Result<StorageUsed, ChainError> {
    let cx = Cell::empty_context();
    let mut storage = CellBuilder::new();
    let store = || -> Result<Cell, tycho_types::error::Error> {
        use tycho_types::cell::Store;
        storage.store_u64(account.last_trans_lt)?;
        account.balance.store_into(&mut storage, cx)?;
        account.state.store_into(&mut storage, cx)?;
        storage.build_ext(cx)
    };
    let cell = store().map_err(build_err("account storage"))?;
    let stats = cell
        .compute_unique_stats(STORAGE_CELL_LIMIT)
        .ok_or_else(|| ChainError::Build {
            what: "account storage".into(),
            reason: "too many cells".into(),
        })?;
    Ok(StorageUsed {
        cells: VarUint56::new(stats.cell_count),
        bits: VarUint56::new(stats.bit_count),
    })
}
