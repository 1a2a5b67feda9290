//! The transactions index a running node keeps for its account API (api.md §6, §8; `regolith_api::index`): a
//! task that follows the last applied mc block and indexes each group in order, from the stored blocks, in one
//! batch per group. It starts where the index stopped (after a crash: the group after the last one indexed),
//! so nothing is indexed twice or lost. The code of the accounts a group touched is read from the newest
//! states: the index answers for the chain as it is now.

use std::collections::hash_map::Entry;
use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use anyhow::{Context, Result};
use regolith_api::index::{block_transactions, IndexedBlock, KeyBlockTimes, TransactionsIndex};
use regolith_api::IndexGcConfig;
use regolith_state::{ChainStates, NewestStates};
use regolith_storage::Storage;
use tycho_types::cell::HashBytes;
use tycho_types::models::{AccountState, ShardAccounts, ShardIdent, ShardStateUnsplit, StdAddr};

/// How often the task looks for newly applied groups.
const POLL: Duration = Duration::from_millis(200);

/// Indexes every applied group until `stop` turns true.
pub async fn run(
    storage: Storage,
    index: TransactionsIndex,
    newest: NewestStates,
    gc: Option<IndexGcConfig>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        let pass = {
            let (storage, index, newest) = (storage.clone(), index.clone(), newest.clone());
            tokio::task::spawn_blocking(move || catch_up(&storage, &index, &newest, gc.as_ref()))
                .await
        };
        match pass {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                metrics::counter!("regolith_api_index_failures_total").increment(1);
                tracing::warn!(error = %format!("{e:#}"), "indexing transactions failed; retrying");
            }
            Err(e) => tracing::error!(error = %e, "the transactions indexer ended abnormally"),
        }
        tokio::select! {
            _ = tokio::time::sleep(POLL) => {}
            _ = stop.changed() => return,
        }
    }
}

/// Indexes the groups after the last indexed one up to the last applied mc block (once the newest states are
/// published: the code of touched accounts is read from them), and runs transactions GC after each key
/// block's group when `gc` is set.
pub fn catch_up(
    storage: &Storage,
    index: &TransactionsIndex,
    newest: &NewestStates,
    gc: Option<&IndexGcConfig>,
) -> Result<()> {
    let Some(states) = newest.get() else {
        return Ok(());
    };
    let Some(last) = storage.node_state().load_last_mc_block_id()? else {
        return Ok(());
    };
    let mut next = match index.last_indexed_mc()? {
        Some(seqno) => seqno + 1,
        // The node's first mc block (the zerostate, or a cold boot's block) has no group to index.
        None => {
            storage
                .node_state()
                .load_init_mc_block_id()?
                .map_or(0, |id| id.seqno)
                + 1
        }
    };
    while next <= last.seqno.min(states.mc().id.seqno) {
        let key_block = index_group(storage, index, &states, next)?;
        crate::crash::point("transactions-indexed");
        if let (true, Some(gc)) = (key_block, gc) {
            collect(index, gc)?;
        }
        metrics::gauge!("regolith_api_index_last_mc_seqno").set(f64::from(next));
        next += 1;
    }
    Ok(())
}

/// Transactions GC (api.md §8): the transactions older than the newest indexed key block made `ttl` ago go,
/// but each account's newest `keep_per_account`.
fn collect(index: &TransactionsIndex, gc: &IndexGcConfig) -> Result<()> {
    let now = regolith_rpc::network::now_sec();
    let cutoff = now.saturating_sub(gc.ttl.as_secs().min(u64::from(u32::MAX)) as u32);
    let Some(min_lt) = index.gc_bound(cutoff)? else {
        return Ok(());
    };
    let removed = index.collect(
        min_lt,
        gc.keep_per_account,
        regolith_api::index::GC_BATCH_ROWS,
        || crate::crash::point("index-gc-batch-written"),
    )?;
    metrics::counter!("regolith_api_index_gc_removed_total").increment(removed);
    if removed > 0 {
        tracing::info!(removed, min_lt, "old transactions removed from the index");
    }
    Ok(())
}

/// Indexes the group of mc block `seqno`: the mc block and the shard blocks it brought. Whether the mc block
/// is a key block.
fn index_group(
    storage: &Storage,
    index: &TransactionsIndex,
    states: &ChainStates,
    seqno: u32,
) -> Result<bool> {
    let Some(group) = crate::stored_group::load(storage, seqno)? else {
        // Block GC collected it before it was indexed (an index turned on in an older data dir): its
        // transactions cannot be indexed any more. Recorded as indexed, so that the index goes on.
        tracing::warn!(
            mc = seqno,
            "mc block not stored (collected): its group is not in the transactions index"
        );
        metrics::counter!("regolith_api_index_skipped_groups_total").increment(1);
        index.write_group(seqno, None, &[], &[])?;
        return Ok(false);
    };
    let info = group[0]
        .block
        .load_info()
        .with_context(|| format!("mc block {seqno}: its info"))?;
    let key_block = info.key_block.then_some(KeyBlockTimes {
        gen_utime: info.gen_utime,
        start_lt: info.start_lt,
    });
    let blocks = group
        .iter()
        .map(|block| {
            Ok(IndexedBlock {
                id: block.id,
                transactions: block_transactions(&block.block, block.id.shard.workchain() as i8)?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let touched: BTreeSet<StdAddr> = blocks
        .iter()
        .flat_map(|b| b.transactions.iter().map(|t| t.account.clone()))
        .collect();
    // Each chain's accounts are read once for the whole group.
    let mut accounts: HashMap<ShardIdent, ShardAccounts> = HashMap::new();
    let mut codes = Vec::with_capacity(touched.len());
    for address in touched {
        let code = match states.chain_of(&address) {
            Some(chain) => {
                let accounts = match accounts.entry(chain.id.shard) {
                    Entry::Occupied(e) => e.into_mut(),
                    Entry::Vacant(e) => e.insert(
                        chain
                            .root
                            .parse::<ShardStateUnsplit>()
                            .and_then(|state| state.load_accounts())
                            .with_context(|| format!("the accounts of {}", chain.id))?,
                    ),
                };
                code_hash(accounts, &address)?
            }
            None => None,
        };
        codes.push((address, code));
    }
    let transactions: usize = blocks.iter().map(|b| b.transactions.len()).sum();
    index.write_group(seqno, key_block, &blocks, &codes)?;
    metrics::counter!("regolith_api_index_transactions_total").increment(transactions as u64);
    Ok(key_block.is_some())
}

/// The code hash of `address` in its chain's accounts, if the account is active with code.
fn code_hash(accounts: &ShardAccounts, address: &StdAddr) -> Result<Option<HashBytes>> {
    let Some((_, entry)) = accounts.get(address.address)? else {
        return Ok(None);
    };
    let Some(account) = entry.load_account()? else {
        return Ok(None);
    };
    Ok(match &account.state {
        AccountState::Active(init) => init.code.as_ref().map(|c| *c.repr_hash()),
        _ => None,
    })
}
