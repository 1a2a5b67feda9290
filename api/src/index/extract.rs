//! The transactions of a block, as the index stores them.

use tycho_types::boc::Boc;
use tycho_types::cell::HashBytes;
use tycho_types::models::{Block, StdAddr};

use super::IndexError;

/// One transaction of a block.
#[derive(Debug, Clone)]
pub struct IndexedTransaction {
    /// Its account.
    pub account: StdAddr,
    /// Its lt.
    pub lt: u64,
    /// Its hash (the transaction cell's representation hash).
    pub hash: HashBytes,
    /// The representation hash of its inbound message, if it has one.
    pub in_msg_hash: Option<HashBytes>,
    /// The transaction's BOC.
    pub boc: Vec<u8>,
}

/// Every transaction of `block` (of workchain `workchain`), by account and lt.
pub fn block_transactions(
    block: &Block,
    workchain: i8,
) -> Result<Vec<IndexedTransaction>, IndexError> {
    let bad = |what: &str, e: tycho_types::error::Error| IndexError::Block(format!("{what}: {e}"));
    let extra = block
        .load_extra()
        .map_err(|e| bad("the block's extra", e))?;
    let account_blocks = extra
        .account_blocks
        .load()
        .map_err(|e| bad("the account blocks", e))?;
    let mut out = Vec::new();
    for item in account_blocks.iter() {
        let (account, _, account_block) = item.map_err(|e| bad("an account block", e))?;
        for tx in account_block.transactions.iter() {
            let (lt, _, tx) = tx.map_err(|e| bad(&format!("a transaction of {account}"), e))?;
            let cell = tx.inner();
            let parsed = tx
                .load()
                .map_err(|e| bad(&format!("transaction {lt} of {account}"), e))?;
            out.push(IndexedTransaction {
                account: StdAddr::new(workchain, account),
                lt,
                hash: *cell.repr_hash(),
                in_msg_hash: parsed.in_msg.as_ref().map(|m| *m.repr_hash()),
                boc: Boc::encode(cell),
            });
        }
    }
    Ok(out)
}
