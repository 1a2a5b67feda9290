//! Internal messages between the generated accounts: each is created by a transaction of its source account
//! and listed in the block's `OutMsgDescr` as `OutMsg::New` (envelope and transaction), the form the queue
//! builds a network block's diff from.

use tycho_types::cell::{Cell, CellBuilder, CellFamily, CellSliceRange, Lazy};
use tycho_types::dict::{AugDict, Dict};
use tycho_types::models::{
    AccountBlock, AccountStatus, CurrencyCollection, HashUpdate, IntAddr, IntMsgInfo,
    IntermediateAddr, MsgEnvelope, MsgInfo, OrdinaryTxInfo, OutMsg, OutMsgDescr, OutMsgNew,
    OwnedMessage, ShardIdent, StdAddr, Transaction, TxInfo,
};
use tycho_types::models::{
    AccountBlocks, ComputePhase, ComputePhaseSkipReason, MessageLayout, SkippedComputePhase,
};
use tycho_types::num::Uint15;
use tycho_types::prelude::HashBytes;

use crate::error::{build_err, ChainError};

/// Value each generated message carries (nanotokens).
const MESSAGE_VALUE: u128 = 1_000_000;
/// Data bytes per cell of a message body (a cell holds 1023 bits).
const BODY_BYTES_PER_CELL: usize = 127;

/// The fixed accounts of one chain (a shard, or the masterchain).
#[derive(Clone, Debug)]
pub struct Accounts {
    /// The chain.
    pub shard: ShardIdent,
    /// Account ids, all inside the shard.
    pub ids: Vec<HashBytes>,
}

impl Accounts {
    /// `count` account ids of `shard` derived from the seed: the shard's prefix bits, then hash bits.
    pub fn derive(seed: u64, shard: ShardIdent, count: usize) -> Self {
        let prefix = shard.prefix();
        let len = u32::from(shard.prefix_len());
        let keep_mask = if len == 0 { 0 } else { !0u64 << (64 - len) };
        let ids = (0..count as u64)
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
        Self { shard, ids }
    }
}

/// One generated message with the transaction that created it.
pub struct CreatedMessage {
    /// The message cell.
    pub cell: Cell,
    /// Its logical time.
    pub lt: u64,
    /// Its hash.
    pub hash: HashBytes,
}

/// The messages of one block and the block parts that list them.
pub struct BlockMessages {
    /// The messages, in creation order.
    pub messages: Vec<CreatedMessage>,
    /// `OutMsgDescr` with an `OutMsg::New` per message.
    pub out_msgs: OutMsgDescr,
    /// The transactions, by account.
    pub account_blocks: AccountBlocks,
    /// The last lt used.
    pub last_lt: u64,
}

/// What a message is: source, destination, time, body.
pub struct MessageSpec {
    /// Source account (in the block's shard).
    pub src: StdAddr,
    /// Destination account.
    pub dst: StdAddr,
    /// The body bytes.
    pub body: Vec<u8>,
}

fn std_addr(addr: &StdAddr) -> IntAddr {
    IntAddr::Std(addr.clone())
}

/// A body of `bytes` as a chain of cells (127 bytes each).
fn body_cell(bytes: &[u8]) -> Result<Cell, ChainError> {
    let mut next: Option<Cell> = None;
    let chunks: Vec<&[u8]> = bytes.chunks(BODY_BYTES_PER_CELL).collect();
    for chunk in chunks.iter().rev() {
        let mut b = CellBuilder::new();
        b.store_raw(chunk, (chunk.len() * 8) as u16)
            .map_err(build_err("message body"))?;
        if let Some(child) = next.take() {
            b.store_reference(child)
                .map_err(build_err("message body"))?;
        }
        next = Some(b.build().map_err(build_err("message body"))?);
    }
    match next {
        Some(cell) => Ok(cell),
        None => Ok(Cell::empty_cell()),
    }
}

/// Builds the messages of a block: message `i` is created at lt `start_lt + 2i + 1` by a transaction of its
/// source at lt `start_lt + 2i`. `prev_tx` gives and takes each account's last transaction (hash, lt).
pub fn build_block_messages(
    specs: Vec<MessageSpec>,
    start_lt: u64,
    now: u32,
    prev_tx: &mut std::collections::HashMap<HashBytes, (HashBytes, u64)>,
) -> Result<BlockMessages, ChainError> {
    let mut out_msgs = OutMsgDescr::new();
    let mut by_account: std::collections::BTreeMap<HashBytes, Vec<(u64, Cell)>> =
        std::collections::BTreeMap::new();
    let mut messages = Vec::with_capacity(specs.len());
    let mut lt = start_lt;
    for spec in specs {
        let tx_lt = lt;
        let msg_lt = lt + 1;
        lt += 2;
        let body = body_cell(&spec.body)?;
        let same_workchain = spec.src.workchain == spec.dst.workchain;
        let message = OwnedMessage {
            info: MsgInfo::Int(IntMsgInfo {
                ihr_disabled: true,
                bounce: false,
                bounced: false,
                src: std_addr(&spec.src),
                dst: std_addr(&spec.dst),
                value: CurrencyCollection::new(MESSAGE_VALUE),
                created_lt: msg_lt,
                created_at: now,
                ..Default::default()
            }),
            init: None,
            body: (CellSliceRange::full(body.as_ref()), body),
            layout: Some(MessageLayout {
                init_to_cell: false,
                body_to_cell: true,
            }),
        };
        let msg_cell = CellBuilder::build_from(&message).map_err(build_err("message"))?;
        let hash = *msg_cell.repr_hash();

        let mut out = Dict::<Uint15, Cell>::new();
        out.set(Uint15::new(0), msg_cell.clone())
            .map_err(build_err("transaction out messages"))?;
        let account = spec.src.address;
        let (prev_trans_hash, prev_trans_lt) = prev_tx.get(&account).copied().unwrap_or_default();
        let tx = Transaction {
            account,
            lt: tx_lt,
            prev_trans_hash,
            prev_trans_lt,
            now,
            out_msg_count: Uint15::new(1),
            orig_status: AccountStatus::Active,
            end_status: AccountStatus::Active,
            in_msg: None,
            out_msgs: out,
            total_fees: CurrencyCollection::ZERO,
            state_update: Lazy::new(&HashUpdate {
                old: HashBytes::ZERO,
                new: HashBytes::ZERO,
            })
            .map_err(build_err("transaction state update"))?,
            info: Lazy::new(&TxInfo::Ordinary(OrdinaryTxInfo {
                credit_first: true,
                storage_phase: None,
                credit_phase: None,
                compute_phase: ComputePhase::Skipped(SkippedComputePhase {
                    reason: ComputePhaseSkipReason::NoState,
                }),
                action_phase: None,
                aborted: false,
                bounce_phase: None,
                destroyed: false,
            }))
            .map_err(build_err("transaction info"))?,
        };
        let tx_cell = CellBuilder::build_from(&tx).map_err(build_err("transaction"))?;
        prev_tx.insert(account, (*tx_cell.repr_hash(), tx_lt));
        by_account
            .entry(account)
            .or_default()
            .push((tx_lt, tx_cell.clone()));

        let envelope = MsgEnvelope {
            cur_addr: IntermediateAddr::FULL_SRC_SAME_WORKCHAIN,
            next_addr: if same_workchain {
                IntermediateAddr::FULL_DEST_SAME_WORKCHAIN
            } else if spec.dst.workchain == -1 {
                IntermediateAddr::FULL_MASTERCHAIN
            } else {
                IntermediateAddr::FULL_DEST_SAME_WORKCHAIN
            },
            fwd_fee_remaining: Default::default(),
            message: Lazy::from_raw(msg_cell.clone()).map_err(build_err("envelope"))?,
        };
        let out_msg = OutMsg::New(OutMsgNew {
            out_msg_envelope: Lazy::new(&envelope).map_err(build_err("envelope"))?,
            transaction: Lazy::from_raw(tx_cell).map_err(build_err("out msg transaction"))?,
        });
        out_msgs
            .set(hash, CurrencyCollection::ZERO, out_msg)
            .map_err(build_err("OutMsgDescr"))?;
        messages.push(CreatedMessage {
            cell: msg_cell,
            lt: msg_lt,
            hash,
        });
    }

    let mut account_blocks = AccountBlocks::new();
    for (account, txs) in by_account {
        let mut transactions = AugDict::<u64, CurrencyCollection, Lazy<Transaction>>::new();
        for (tx_lt, cell) in txs {
            transactions
                .set(
                    tx_lt,
                    CurrencyCollection::ZERO,
                    Lazy::from_raw(cell).map_err(build_err("account block"))?,
                )
                .map_err(build_err("account block"))?;
        }
        let block = AccountBlock {
            account,
            transactions,
            state_update: Lazy::new(&HashUpdate {
                old: HashBytes::ZERO,
                new: HashBytes::ZERO,
            })
            .map_err(build_err("account block state update"))?,
        };
        account_blocks
            .set(account, CurrencyCollection::ZERO, block)
            .map_err(build_err("account blocks"))?;
    }
    Ok(BlockMessages {
        messages,
        out_msgs,
        account_blocks,
        last_lt: lt,
    })
}
