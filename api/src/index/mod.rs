//! The transactions index of the account API (api.md §6, §8): transactions by account and lt, by hash and by
//! inbound message hash, the block of each, and active accounts by code hash, in a RocksDB of its own
//! (`<data>/api/`, [`tables`]).
//!
//! The node indexes each applied mc block's group ([`TransactionsIndex::write_group`]): its transactions and
//! the code of every account they touched, as the newest states hold it, **in one batch** with the group's mc
//! seqno (`last_indexed_mc`). A crash leaves whole groups, and the next start indexes from the group after the
//! last one on: nothing twice, nothing lost. A list query reads one iterator, which sees whole groups.

mod extract;
pub(crate) mod tables;

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use regolith_kv::{Batch, Database, DbOptions, Empty, KeyRange, NameKey, RawBytes};
use tycho_types::cell::HashBytes;
use tycho_types::models::{BlockId, StdAddr};

pub use extract::{block_transactions, IndexedTransaction};
pub use tables::KeyBlockTimes;
use tables::{
    AccountCodes, AccountKey, CodeAccounts, CodeKey, Hash32, IndexTables, KeyBlocks, Meta,
    SeqnoKey, Transactions, TransactionsByHash, TransactionsByInMsg, TxKey, TxRow,
};

/// The last mc block whose group is indexed.
const LAST_INDEXED_MC: NameKey = NameKey("last_indexed_mc");
/// The smallest lt indexed.
const SMALLEST_LT: NameKey = NameKey("smallest_lt");
/// Transactions GC removes per batch at most.
pub const GC_BATCH_ROWS: usize = 10_000;

/// Why the index failed.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// The database failed.
    #[error(transparent)]
    Db(#[from] regolith_kv::KvError),
    /// A block or transaction could not be read.
    #[error("{0}")]
    Block(String),
    /// A stored row is malformed.
    #[error("the transactions index is damaged: {0}")]
    Corruption(String),
}

/// One indexed block: its id and transactions.
pub struct IndexedBlock {
    /// The block.
    pub id: BlockId,
    /// Its transactions ([`block_transactions`]).
    pub transactions: Vec<IndexedTransaction>,
}

/// The transactions index.
#[derive(Clone)]
pub struct TransactionsIndex {
    db: Arc<Database<IndexTables>>,
}

impl TransactionsIndex {
    /// Opens (creating if missing) the index at `path`.
    pub fn open(path: &Path) -> Result<Self, IndexError> {
        let db = Database::open(path, &(), DbOptions::default())?;
        Ok(Self { db: Arc::new(db) })
    }

    /// The last mc block whose group is indexed, if any.
    pub fn last_indexed_mc(&self) -> Result<Option<u32>, IndexError> {
        match self.db.get::<Meta>(&LAST_INDEXED_MC)? {
            Some(RawBytes(bytes)) => {
                let bytes: [u8; 4] = bytes.as_slice().try_into().map_err(|_| {
                    IndexError::Corruption(format!("last_indexed_mc of {} bytes", bytes.len()))
                })?;
                Ok(Some(u32::from_le_bytes(bytes)))
            }
            None => Ok(None),
        }
    }

    /// The smallest lt indexed (getTimings `smallestKnownLt`); `u64::MAX` before the first transaction.
    pub fn smallest_known_lt(&self) -> Result<u64, IndexError> {
        match self.db.get::<Meta>(&SMALLEST_LT)? {
            Some(RawBytes(bytes)) => {
                let bytes: [u8; 8] = bytes.as_slice().try_into().map_err(|_| {
                    IndexError::Corruption(format!("smallest_lt of {} bytes", bytes.len()))
                })?;
                Ok(u64::from_le_bytes(bytes))
            }
            None => Ok(u64::MAX),
        }
    }

    /// Indexes the group of mc block `mc_seqno` in one batch: the transactions of its blocks and the code of
    /// the accounts they touched (`codes`: each account's code hash in the newest state, `None` when it is not
    /// active), the times of the mc block if it is a key block (`key_block`, for GC), and records `mc_seqno`
    /// as the last indexed.
    pub fn write_group(
        &self,
        mc_seqno: u32,
        key_block: Option<KeyBlockTimes>,
        blocks: &[IndexedBlock],
        codes: &[(StdAddr, Option<HashBytes>)],
    ) -> Result<(), IndexError> {
        let mut batch: Batch<IndexTables> = Batch::new();
        if let Some(times) = &key_block {
            self.db
                .batch_put::<KeyBlocks>(&mut batch, &SeqnoKey(mc_seqno), times);
        }
        let mut smallest = self.smallest_known_lt()?;
        for block in blocks {
            for tx in &block.transactions {
                let key = TxKey {
                    account: AccountKey::of(&tx.account),
                    lt: tx.lt,
                };
                smallest = smallest.min(tx.lt);
                self.db.batch_put::<Transactions>(
                    &mut batch,
                    &key,
                    &TxRow {
                        block: block.id,
                        hash: tx.hash,
                        in_msg_hash: tx.in_msg_hash,
                        boc: tx.boc.clone(),
                    },
                );
                self.db
                    .batch_put::<TransactionsByHash>(&mut batch, &Hash32(tx.hash), &key);
                if let Some(in_msg) = &tx.in_msg_hash {
                    self.db.batch_put::<TransactionsByInMsg>(
                        &mut batch,
                        &Hash32(*in_msg),
                        &Hash32(tx.hash),
                    );
                }
            }
        }
        for (address, code) in codes {
            let account = AccountKey::of(address);
            let old = self.db.get::<AccountCodes>(&account)?.map(|h| h.0);
            if old == *code {
                continue;
            }
            if let Some(old) = old {
                self.db
                    .batch_delete::<CodeAccounts>(&mut batch, &CodeKey { code: old, account });
            }
            match code {
                Some(code) => {
                    self.db.batch_put::<CodeAccounts>(
                        &mut batch,
                        &CodeKey {
                            code: *code,
                            account,
                        },
                        &Empty,
                    );
                    self.db
                        .batch_put::<AccountCodes>(&mut batch, &account, &Hash32(*code));
                }
                None => self.db.batch_delete::<AccountCodes>(&mut batch, &account),
            }
        }
        if smallest != u64::MAX {
            self.db.batch_put::<Meta>(
                &mut batch,
                &SMALLEST_LT,
                &RawBytes(smallest.to_le_bytes().to_vec()),
            );
        }
        self.db.batch_put::<Meta>(
            &mut batch,
            &LAST_INDEXED_MC,
            &RawBytes(mc_seqno.to_le_bytes().to_vec()),
        );
        self.db
            .write(batch, format_args!("indexing mc block {mc_seqno}"))?;
        Ok(())
    }

    /// The GC bound for transactions older than `cutoff_utime` (api.md §8): the `start_lt` of the newest
    /// indexed key block made at or before it, if any.
    pub fn gc_bound(&self, cutoff_utime: u32) -> Result<Option<u64>, IndexError> {
        for row in self.db.iter_rev::<KeyBlocks>(KeyRange::all()) {
            let (_, times) = row?;
            if times.gen_utime <= cutoff_utime {
                return Ok(Some(times.start_lt));
            }
        }
        Ok(None)
    }

    /// Removes old transactions (api.md §8): of each account, those with lt below `min_lt` except its newest
    /// `keep`, with their rows by hash and by inbound message, a batch per at most `batch_rows` transactions
    /// ([`GC_BATCH_ROWS`] in a node), `after_each` after every batch but the last; then `smallestKnownLt`
    /// becomes `min_lt`. A crash in between leaves whole transactions (each batch removes all three rows of
    /// each), and the next GC goes on. Returns the transactions removed.
    pub fn collect(
        &self,
        min_lt: u64,
        keep: u32,
        batch_rows: usize,
        mut after_each: impl FnMut(),
    ) -> Result<u64, IndexError> {
        let mut removed = 0u64;
        let mut batch: Batch<IndexTables> = Batch::new();
        let mut in_batch = 0usize;
        // Newest first, so that each account's first `keep` rows are its newest.
        let mut account: Option<AccountKey> = None;
        let mut seen = 0u32;
        for row in self.db.iter_rev::<Transactions>(KeyRange::all()) {
            let (key, row) = row?;
            if account != Some(key.account) {
                account = Some(key.account);
                seen = 0;
            }
            seen += 1;
            if seen <= keep || key.lt >= min_lt {
                continue;
            }
            self.db.batch_delete::<Transactions>(&mut batch, &key);
            self.db
                .batch_delete::<TransactionsByHash>(&mut batch, &Hash32(row.hash));
            if let Some(in_msg) = row.in_msg_hash {
                self.db
                    .batch_delete::<TransactionsByInMsg>(&mut batch, &Hash32(in_msg));
            }
            removed += 1;
            in_batch += 1;
            if in_batch >= batch_rows.max(1) {
                self.db.write(
                    std::mem::replace(&mut batch, Batch::new()),
                    "removing old transactions",
                )?;
                in_batch = 0;
                after_each();
            }
        }
        let smallest = self.smallest_known_lt()?;
        if smallest == u64::MAX || smallest < min_lt {
            self.db.batch_put::<Meta>(
                &mut batch,
                &SMALLEST_LT,
                &RawBytes(min_lt.to_le_bytes().to_vec()),
            );
        }
        self.db.write(batch, "removing old transactions")?;
        Ok(removed)
    }

    /// Up to `limit` transaction BOCs of `account`, newest first, each with lt ≤ `last_lt` when given.
    pub fn transactions(
        &self,
        account: &StdAddr,
        last_lt: Option<u64>,
        limit: u8,
    ) -> Result<Vec<Bytes>, IndexError> {
        let account = AccountKey::of(account);
        let range = KeyRange::inclusive(
            &TxKey { account, lt: 0 },
            &TxKey {
                account,
                lt: last_lt.unwrap_or(u64::MAX),
            },
        );
        let mut out = Vec::new();
        for row in self.db.iter_rev::<Transactions>(range) {
            let (_, row) = row?;
            out.push(Bytes::from(row.boc));
            if out.len() >= usize::from(limit) {
                break;
            }
        }
        Ok(out)
    }

    fn row_by_hash(&self, hash: &HashBytes) -> Result<Option<TxRow>, IndexError> {
        let Some(key) = self.db.get::<TransactionsByHash>(&Hash32(*hash))? else {
            return Ok(None);
        };
        let row = self.db.get::<Transactions>(&key)?.ok_or_else(|| {
            IndexError::Corruption(format!(
                "transaction {hash} is listed by hash but not stored"
            ))
        })?;
        Ok(Some(row))
    }

    /// A transaction BOC by its hash.
    pub fn transaction(&self, hash: &HashBytes) -> Result<Option<Bytes>, IndexError> {
        Ok(self.row_by_hash(hash)?.map(|row| Bytes::from(row.boc)))
    }

    /// The transaction whose inbound message has this hash.
    pub fn dst_transaction(&self, message_hash: &HashBytes) -> Result<Option<Bytes>, IndexError> {
        match self.db.get::<TransactionsByInMsg>(&Hash32(*message_hash))? {
            Some(tx) => self.transaction(&tx.0),
            None => Ok(None),
        }
    }

    /// The block holding the transaction with this hash.
    pub fn transaction_block_id(&self, hash: &HashBytes) -> Result<Option<BlockId>, IndexError> {
        Ok(self.row_by_hash(hash)?.map(|row| row.block))
    }

    /// Up to `limit` active accounts whose code has `code_hash`, by workchain as an unsigned byte then id,
    /// strictly after `continuation`.
    pub fn accounts_by_code_hash(
        &self,
        code_hash: &HashBytes,
        continuation: Option<&StdAddr>,
        limit: u8,
    ) -> Result<Vec<StdAddr>, IndexError> {
        let mut range = KeyRange::prefix(&Hash32(*code_hash));
        let after = continuation.map(AccountKey::of);
        if let Some(account) = after {
            range = range.at_least(&CodeKey {
                code: *code_hash,
                account,
            });
        }
        let mut out = Vec::new();
        for row in self.db.iter::<CodeAccounts>(range) {
            let (key, _) = row?;
            if Some(key.account) == after {
                continue;
            }
            out.push(key.account.address());
            if out.len() >= usize::from(limit) {
                break;
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tx(account: &StdAddr, lt: u64, in_msg: Option<u8>) -> IndexedTransaction {
        IndexedTransaction {
            account: account.clone(),
            lt,
            hash: HashBytes([lt as u8; 32]),
            in_msg_hash: in_msg.map(|b| HashBytes([b; 32])),
            boc: vec![lt as u8; 3],
        }
    }

    fn block(seqno: u32) -> BlockId {
        BlockId {
            shard: tycho_types::models::ShardIdent::BASECHAIN,
            seqno,
            root_hash: HashBytes([seqno as u8; 32]),
            file_hash: HashBytes([1; 32]),
        }
    }

    #[test]
    fn groups_are_indexed_whole_and_read_in_the_apis_order() {
        let dir = tempfile::tempdir().unwrap();
        let index = TransactionsIndex::open(dir.path()).unwrap();
        assert_eq!(index.last_indexed_mc().unwrap(), None);
        assert_eq!(index.smallest_known_lt().unwrap(), u64::MAX);
        let a = StdAddr::new(0, HashBytes([0xaa; 32]));
        let m = StdAddr::new(-1, HashBytes([0x11; 32]));
        let (code1, code2) = (HashBytes([7; 32]), HashBytes([8; 32]));
        let first = IndexedBlock {
            id: block(1),
            transactions: (10..20)
                .map(|lt| tx(&a, lt, Some(lt as u8 + 100)))
                .collect(),
        };
        index
            .write_group(
                1,
                Some(KeyBlockTimes {
                    gen_utime: 1000,
                    start_lt: 17,
                }),
                &[first],
                &[(a.clone(), Some(code1)), (m.clone(), Some(code1))],
            )
            .unwrap();
        assert_eq!(index.last_indexed_mc().unwrap(), Some(1));
        assert_eq!(index.smallest_known_lt().unwrap(), 10);
        // Newest first, the bound inclusive.
        let page = index.transactions(&a, Some(15), 3).unwrap();
        assert_eq!(page, vec![vec![15u8; 3], vec![14; 3], vec![13; 3]]);
        assert_eq!(index.transactions(&a, None, 100).unwrap().len(), 10);
        assert!(index.transactions(&m, None, 100).unwrap().is_empty());
        assert_eq!(
            index.transaction(&HashBytes([12; 32])).unwrap().unwrap(),
            vec![12u8; 3]
        );
        assert_eq!(
            index
                .dst_transaction(&HashBytes([112; 32]))
                .unwrap()
                .unwrap(),
            vec![12u8; 3]
        );
        assert_eq!(
            index.transaction_block_id(&HashBytes([12; 32])).unwrap(),
            Some(block(1))
        );
        assert_eq!(index.transaction(&HashBytes([99; 32])).unwrap(), None);
        // Workchain 0 before -1; the continuation is exclusive.
        assert_eq!(
            index.accounts_by_code_hash(&code1, None, 10).unwrap(),
            vec![a.clone(), m.clone()]
        );
        assert_eq!(
            index.accounts_by_code_hash(&code1, Some(&a), 10).unwrap(),
            vec![m.clone()]
        );
        // A new code moves the account; an inactive one leaves the code index.
        index
            .write_group(
                2,
                Some(KeyBlockTimes {
                    gen_utime: 2000,
                    start_lt: 19,
                }),
                &[],
                &[(a.clone(), Some(code2)), (m.clone(), None)],
            )
            .unwrap();
        assert!(index
            .accounts_by_code_hash(&code1, None, 10)
            .unwrap()
            .is_empty());
        assert_eq!(
            index.accounts_by_code_hash(&code2, None, 10).unwrap(),
            vec![a.clone()]
        );
        assert_eq!(index.last_indexed_mc().unwrap(), Some(2));
        // The GC bound: the start lt of the newest key block at or before the cutoff.
        assert_eq!(index.gc_bound(999).unwrap(), None);
        assert_eq!(index.gc_bound(1500).unwrap(), Some(17));
        assert_eq!(index.gc_bound(2000).unwrap(), Some(19));
        // GC: below lt 17, all but the newest 3 of the account go, with their rows by hash and message.
        // Killed after its first batch of 2 (a panic leaves the rows as they are), the next run finishes it.
        let killed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            index.collect(17, 3, 2, || panic!("crash point")).unwrap()
        }));
        assert!(killed.is_err());
        assert_eq!(index.transactions(&a, None, 100).unwrap().len(), 8);
        assert_eq!(
            index.smallest_known_lt().unwrap(),
            10,
            "not moved before the end"
        );
        assert_eq!(index.collect(17, 3, 2, || {}).unwrap(), 5);
        assert_eq!(
            index.transactions(&a, None, 100).unwrap(),
            vec![vec![19u8; 3], vec![18; 3], vec![17; 3]]
        );
        assert_eq!(index.transaction(&HashBytes([12; 32])).unwrap(), None);
        assert_eq!(index.dst_transaction(&HashBytes([112; 32])).unwrap(), None);
        assert_eq!(index.smallest_known_lt().unwrap(), 17);
        // The newest `keep` stay even when older than the bound.
        assert_eq!(index.collect(19, 2, GC_BATCH_ROWS, || {}).unwrap(), 1);
        assert_eq!(index.transactions(&a, None, 100).unwrap().len(), 2);
        assert!(index.transaction(&HashBytes([19; 32])).unwrap().is_some());
        // Reopened: the same.
        drop(index);
        let index = TransactionsIndex::open(dir.path()).unwrap();
        assert_eq!(index.last_indexed_mc().unwrap(), Some(2));
        assert_eq!(index.smallest_known_lt().unwrap(), 19);
        assert_eq!(index.transactions(&a, None, 100).unwrap().len(), 2);
    }
}
