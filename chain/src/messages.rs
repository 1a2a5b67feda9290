//! The transactions of one generated block and the block parts that list them, in the shapes a Tycho
//! collator gives them:
//!
//! - an **import**: an internal message from the queue reaches its destination account, whose ordinary
//!   transaction takes it as `in_msg` and credits its value (a message with a `StateInit` deploys the account);
//!   the block's `InMsgDescr` lists it as `InMsg::Final`, and when it came from this shard's own queue the
//!   `OutMsgDescr` lists it as `OutMsg::DequeueImmediate`;
//! - a **send**: an account's transaction creates one internal message (debiting its value), listed in the
//!   `OutMsgDescr` as `OutMsg::New`, the form the queue builds the block's diff from.
//!
//! - an **external**: an external inbound message reaches a deployed account, whose ordinary transaction takes
//!   it as `in_msg` (the live devnet's messages from wallets); the generator runs no code, so the transaction
//!   has an executed compute phase that accepted it and no actions, and changes nothing but the account's
//!   last transaction; the `InMsgDescr` lists it as `InMsg::External`.
//!
//! Imports come first in queue-key order, then externals in hash order, then sends; every transaction takes
//! the next logical times.
//! Fees are zero, so a block's value flow is `from_prev + imported = to_next + exported`.

use std::collections::BTreeMap;

use tycho_types::cell::{Cell, CellBuilder, CellFamily, CellSliceRange, Lazy, Store};
use tycho_types::dict::{AugDict, Dict};
use tycho_types::models::{
    AccountBlock, AccountBlocks, AccountStatus, AccountStatusChange, ActionPhase, ComputePhase,
    ComputePhaseSkipReason, CreditPhase, CurrencyCollection, ExecutedComputePhase, HashUpdate,
    ImportFees, InMsg, InMsgDescr, InMsgExternal, InMsgFinal, IntAddr, IntMsgInfo,
    IntermediateAddr, MessageLayout, MsgEnvelope, MsgInfo, OrdinaryTxInfo, OutAction, OutMsg,
    OutMsgDequeueImmediate, OutMsgDescr, OutMsgNew, OwnedMessage, SendMsgFlags,
    SkippedComputePhase, StateInit, StdAddr, StorageUsedShort, Transaction, TxInfo,
};
use tycho_types::num::{Uint15, VarUint56};
use tycho_types::prelude::HashBytes;

use crate::accounts::{active_account, ChainAccounts};
use crate::error::{build_err, ChainError};

/// Data bytes per cell of a message body (a cell holds 1023 bits).
const BODY_BYTES_PER_CELL: usize = 127;
/// Cells visited at most when a message's size is counted.
const MESSAGE_CELL_LIMIT: usize = 1024;

/// One message a block created.
pub struct CreatedMessage {
    /// The message cell.
    pub cell: Cell,
    /// Its logical time.
    pub lt: u64,
    /// Its hash.
    pub hash: HashBytes,
    /// The chain it goes to (the generator's chain index: 0 is the masterchain).
    pub route: usize,
}

/// A message to import: its cell and whether it comes from this chain's own queue.
pub(crate) struct Import {
    pub(crate) cell: Cell,
    pub(crate) same_shard: bool,
}

/// What a send is: source account (an index into the block's chain), destination, value, body, and the
/// state it deploys at the destination.
pub(crate) struct Send {
    pub(crate) src: usize,
    pub(crate) dst: StdAddr,
    pub(crate) route: usize,
    pub(crate) dst_in_shard: bool,
    pub(crate) value: u128,
    pub(crate) body: Vec<u8>,
    pub(crate) init: Option<StateInit>,
}

/// The transactions of a block and the block parts that list them.
pub struct BlockMessages {
    /// The new messages, in creation order.
    pub messages: Vec<CreatedMessage>,
    /// `InMsgDescr`: every import.
    pub in_msgs: InMsgDescr,
    /// `OutMsgDescr`: every new message and every dequeue of an own message.
    pub out_msgs: OutMsgDescr,
    /// The transactions, by account.
    pub account_blocks: AccountBlocks,
    /// The value of the imported messages.
    pub imported: CurrencyCollection,
    /// The value of the new messages.
    pub exported: CurrencyCollection,
    /// The last lt used.
    pub last_lt: u64,
}

/// Builds one block's transactions over `accounts` (which it updates), from `start_lt` on.
pub(crate) struct BlockBuilder {
    now: u32,
    lt: u64,
    messages: Vec<CreatedMessage>,
    in_msgs: InMsgDescr,
    out_msgs: OutMsgDescr,
    /// Per account: the hash before the block, and its transactions.
    touched: BTreeMap<usize, (HashBytes, Vec<(u64, Cell)>)>,
}

impl BlockBuilder {
    pub(crate) fn new(start_lt: u64, now: u32) -> Self {
        Self {
            now,
            lt: start_lt,
            messages: Vec::new(),
            in_msgs: InMsgDescr::new(),
            out_msgs: OutMsgDescr::new(),
            touched: BTreeMap::new(),
        }
    }

    /// Imports a message into its destination account of `accounts`.
    pub(crate) fn import(
        &mut self,
        accounts: &mut ChainAccounts,
        import: Import,
    ) -> Result<(), ChainError> {
        let hash = *import.cell.repr_hash();
        let what = || format!("the import of message {hash}");
        let message = import
            .cell
            .parse::<OwnedMessage>()
            .map_err(build_err(what()))?;
        let MsgInfo::Int(info) = &message.info else {
            return Err(ChainError::Build {
                what: what(),
                reason: "not an internal message".into(),
            });
        };
        let IntAddr::Std(dst) = &info.dst else {
            return Err(ChainError::Build {
                what: what(),
                reason: "not a standard destination".into(),
            });
        };
        let index = accounts
            .index_of(&dst.address)
            .ok_or_else(|| ChainError::Build {
                what: what(),
                reason: format!("{dst} is not an account of {}", accounts.shard),
            })?;
        let value = info.value.tokens.into_inner();
        let entry = &accounts.entries[index];
        let (orig_status, state) = match (&entry.account, &message.init) {
            (Some(account), _) => match &account.state {
                tycho_types::models::AccountState::Active(state) => {
                    (AccountStatus::Active, state.clone())
                }
                _ => unreachable!("generated accounts are active"),
            },
            (None, Some(init)) => (AccountStatus::NotExists, init.clone()),
            (None, None) => {
                return Err(ChainError::Build {
                    what: what(),
                    reason: format!("{dst} is not deployed and the message deploys nothing"),
                })
            }
        };
        let tx_lt = self.next_lt(1);
        let address = accounts.address(index);
        let account = active_account(
            &address,
            state,
            entry.balance() + value,
            tx_lt + 1,
            self.now,
        )?;
        let info = TxInfo::Ordinary(OrdinaryTxInfo {
            credit_first: !info.bounce,
            storage_phase: None,
            credit_phase: Some(CreditPhase {
                due_fees_collected: None,
                credit: CurrencyCollection::new(value),
            }),
            compute_phase: ComputePhase::Skipped(SkippedComputePhase {
                reason: ComputePhaseSkipReason::NoGas,
            }),
            action_phase: None,
            aborted: true,
            bounce_phase: None,
            destroyed: false,
        });
        let tx = self.transaction(
            accounts,
            index,
            account,
            tx_lt,
            orig_status,
            Some(import.cell.clone()),
            Dict::new(),
            info,
        )?;

        let envelope = Lazy::new(&MsgEnvelope {
            cur_addr: if import.same_shard {
                IntermediateAddr::FULL_DEST_SAME_WORKCHAIN
            } else {
                IntermediateAddr::FULL_SRC_SAME_WORKCHAIN
            },
            next_addr: IntermediateAddr::FULL_DEST_SAME_WORKCHAIN,
            fwd_fee_remaining: Default::default(),
            message: Lazy::from_raw(import.cell).map_err(build_err(what()))?,
        })
        .map_err(build_err(what()))?;
        let in_msg = InMsg::Final(InMsgFinal {
            in_msg_envelope: envelope.clone(),
            transaction: Lazy::from_raw(tx).map_err(build_err(what()))?,
            fwd_fee: Default::default(),
        });
        let fees: ImportFees = in_msg.compute_fees().map_err(build_err(what()))?;
        if import.same_shard {
            let out_msg = OutMsg::DequeueImmediate(OutMsgDequeueImmediate {
                out_msg_envelope: envelope,
                reimport: Lazy::new(&in_msg).map_err(build_err(what()))?,
            });
            self.out_msgs
                .set(hash, CurrencyCollection::ZERO, out_msg)
                .map_err(build_err("OutMsgDescr"))?;
        }
        self.in_msgs
            .set(hash, fees, in_msg)
            .map_err(build_err("InMsgDescr"))?;
        Ok(())
    }

    /// Account `index` of `accounts` (deployed) takes external inbound message `cell` (already checked to be
    /// one, addressed to it): a transaction that accepts it and does nothing else.
    pub(crate) fn external(
        &mut self,
        accounts: &mut ChainAccounts,
        index: usize,
        cell: Cell,
    ) -> Result<(), ChainError> {
        let hash = *cell.repr_hash();
        let what = || format!("external message {hash}");
        let entry = &accounts.entries[index];
        let Some(tycho_types::models::AccountState::Active(state)) =
            entry.account.as_ref().map(|a| a.state.clone())
        else {
            return Err(ChainError::Build {
                what: what(),
                reason: "its destination is not deployed".into(),
            });
        };
        let tx_lt = self.next_lt(1);
        let address = accounts.address(index);
        let account = active_account(&address, state, entry.balance(), tx_lt + 1, self.now)?;
        let info = TxInfo::Ordinary(OrdinaryTxInfo {
            credit_first: true,
            storage_phase: None,
            credit_phase: None,
            compute_phase: ComputePhase::Executed(accepted_compute_phase()),
            action_phase: Some(no_actions()),
            aborted: false,
            bounce_phase: None,
            destroyed: false,
        });
        let tx = self.transaction(
            accounts,
            index,
            account,
            tx_lt,
            AccountStatus::Active,
            Some(cell.clone()),
            Dict::new(),
            info,
        )?;
        let in_msg = InMsg::External(InMsgExternal {
            in_msg: Lazy::from_raw(cell).map_err(build_err(what()))?,
            transaction: Lazy::from_raw(tx).map_err(build_err(what()))?,
        });
        let fees: ImportFees = in_msg.compute_fees().map_err(build_err(what()))?;
        self.in_msgs
            .set(hash, fees, in_msg)
            .map_err(build_err("InMsgDescr"))?;
        Ok(())
    }

    /// A transaction of account `index` of `accounts` sends one message.
    pub(crate) fn send(
        &mut self,
        accounts: &mut ChainAccounts,
        send: Send,
    ) -> Result<(), ChainError> {
        let entry = &accounts.entries[send.src];
        let Some(tycho_types::models::AccountState::Active(state)) =
            entry.account.as_ref().map(|a| a.state.clone())
        else {
            return Err(ChainError::Build {
                what: format!("a message of {}", accounts.address(send.src)),
                reason: "the source account is not deployed".into(),
            });
        };
        let balance = entry.balance();
        let value = send.value.min(balance);
        let tx_lt = self.next_lt(2);
        let msg_lt = tx_lt + 1;
        let src = accounts.address(send.src);
        let body = body_cell(&send.body)?;
        let message = OwnedMessage {
            info: MsgInfo::Int(IntMsgInfo {
                ihr_disabled: true,
                bounce: false,
                bounced: false,
                src: IntAddr::Std(src.clone()),
                dst: IntAddr::Std(send.dst.clone()),
                value: CurrencyCollection::new(value),
                created_lt: msg_lt,
                created_at: self.now,
                ..Default::default()
            }),
            init: send.init,
            body: (CellSliceRange::full(body.as_ref()), body),
            layout: Some(MessageLayout {
                init_to_cell: true,
                body_to_cell: true,
            }),
        };
        let msg_cell = CellBuilder::build_from(&message).map_err(build_err("message"))?;
        let hash = *msg_cell.repr_hash();

        let mut out = Dict::<Uint15, Cell>::new();
        out.set(Uint15::new(0), msg_cell.clone())
            .map_err(build_err("transaction out messages"))?;
        let account = active_account(&src, state, balance - value, msg_lt + 1, self.now)?;
        let info = TxInfo::Ordinary(OrdinaryTxInfo {
            credit_first: true,
            storage_phase: None,
            credit_phase: None,
            compute_phase: ComputePhase::Executed(accepted_compute_phase()),
            action_phase: Some(send_action(&msg_cell)?),
            aborted: false,
            bounce_phase: None,
            destroyed: false,
        });
        let tx = self.transaction(
            accounts,
            send.src,
            account,
            tx_lt,
            AccountStatus::Active,
            None,
            out,
            info,
        )?;

        let envelope = MsgEnvelope {
            cur_addr: IntermediateAddr::FULL_SRC_SAME_WORKCHAIN,
            next_addr: if send.dst_in_shard {
                IntermediateAddr::FULL_DEST_SAME_WORKCHAIN
            } else {
                IntermediateAddr::FULL_SRC_SAME_WORKCHAIN
            },
            fwd_fee_remaining: Default::default(),
            message: Lazy::from_raw(msg_cell.clone()).map_err(build_err("envelope"))?,
        };
        let out_msg = OutMsg::New(OutMsgNew {
            out_msg_envelope: Lazy::new(&envelope).map_err(build_err("envelope"))?,
            transaction: Lazy::from_raw(tx).map_err(build_err("out msg transaction"))?,
        });
        let exported = out_msg
            .compute_exported_value()
            .map_err(build_err("OutMsgDescr"))?;
        self.out_msgs
            .set(hash, exported, out_msg)
            .map_err(build_err("OutMsgDescr"))?;
        self.messages.push(CreatedMessage {
            cell: msg_cell,
            lt: msg_lt,
            hash,
            route: send.route,
        });
        Ok(())
    }

    /// The logical time of the next transaction, which uses `count` lts.
    fn next_lt(&mut self, count: u64) -> u64 {
        let lt = self.lt;
        self.lt += count;
        lt
    }

    /// Builds a transaction of account `index` that leaves it as `account`, and records it.
    #[allow(clippy::too_many_arguments)]
    fn transaction(
        &mut self,
        accounts: &mut ChainAccounts,
        index: usize,
        account: tycho_types::models::Account,
        lt: u64,
        orig_status: AccountStatus,
        in_msg: Option<Cell>,
        out_msgs: Dict<Uint15, Cell>,
        info: TxInfo,
    ) -> Result<Cell, ChainError> {
        let entry = &accounts.entries[index];
        let (prev_trans_hash, prev_trans_lt) = entry.last_tx;
        let old = entry.hash;
        let (account_cell, new) = crate::accounts::account_cell(account.clone())?;
        let tx = Transaction {
            account: entry.id,
            lt,
            prev_trans_hash,
            prev_trans_lt,
            now: self.now,
            out_msg_count: Uint15::new(out_msgs.values().count() as u16),
            orig_status,
            end_status: AccountStatus::Active,
            in_msg,
            out_msgs,
            total_fees: CurrencyCollection::ZERO,
            state_update: Lazy::new(&HashUpdate { old, new })
                .map_err(build_err("transaction state update"))?,
            info: Lazy::new(&info).map_err(build_err("transaction info"))?,
        };
        let tx_cell = CellBuilder::build_from(&tx).map_err(build_err("transaction"))?;
        self.touched
            .entry(index)
            .or_insert_with(|| (old, Vec::new()))
            .1
            .push((lt, tx_cell.clone()));
        accounts.set(index, account, account_cell, (*tx_cell.repr_hash(), lt))?;
        Ok(tx_cell)
    }

    /// The block parts; `accounts` is the block's chain after it.
    pub(crate) fn finish(self, accounts: &ChainAccounts) -> Result<BlockMessages, ChainError> {
        let mut account_blocks = AccountBlocks::new();
        for (index, (old, txs)) in self.touched {
            let entry = &accounts.entries[index];
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
                account: entry.id,
                transactions,
                state_update: Lazy::new(&HashUpdate {
                    old,
                    new: entry.hash,
                })
                .map_err(build_err("account block state update"))?,
            };
            account_blocks
                .set(entry.id, CurrencyCollection::ZERO, block)
                .map_err(build_err("account blocks"))?;
        }
        Ok(BlockMessages {
            messages: self.messages,
            imported: self.in_msgs.root_extra().value_imported.clone(),
            exported: self.out_msgs.root_extra().clone(),
            in_msgs: self.in_msgs,
            out_msgs: self.out_msgs,
            account_blocks,
            last_lt: self.lt,
        })
    }
}

/// The compute phase of a generated transaction: the code ran (no TVM here: no gas, no steps) and succeeded.
fn accepted_compute_phase() -> ExecutedComputePhase {
    ExecutedComputePhase {
        success: true,
        msg_state_used: false,
        account_activated: false,
        gas_fees: Default::default(),
        gas_used: Default::default(),
        gas_limit: Default::default(),
        gas_credit: None,
        mode: 0,
        exit_code: 0,
        exit_arg: None,
        vm_steps: 0,
        vm_init_state_hash: HashBytes::ZERO,
        vm_final_state_hash: HashBytes::ZERO,
    }
}

/// The action phase of a transaction with an empty action list.
fn no_actions() -> ActionPhase {
    ActionPhase {
        success: true,
        valid: true,
        no_funds: false,
        status_change: AccountStatusChange::Unchanged,
        total_fwd_fees: None,
        total_action_fees: None,
        result_code: 0,
        result_arg: None,
        total_actions: 0,
        special_actions: 0,
        skipped_actions: 0,
        messages_created: 0,
        action_list_hash: *Cell::empty_cell_ref().repr_hash(),
        total_message_size: StorageUsedShort {
            cells: VarUint56::new(0),
            bits: VarUint56::new(0),
        },
    }
}

/// The action phase of a transaction whose one action sent `message`.
fn send_action(message: &Cell) -> Result<ActionPhase, ChainError> {
    let cx = Cell::empty_context();
    let mut list = CellBuilder::new();
    list.store_reference(Cell::empty_cell())
        .map_err(build_err("action list"))?;
    OutAction::SendMsg {
        mode: SendMsgFlags::empty(),
        out_msg: Lazy::from_raw(message.clone()).map_err(build_err("action list"))?,
    }
    .store_into(&mut list, cx)
    .map_err(build_err("action list"))?;
    let list = list.build().map_err(build_err("action list"))?;
    let stats = message
        .compute_unique_stats(MESSAGE_CELL_LIMIT)
        .ok_or_else(|| ChainError::Build {
            what: "a message".into(),
            reason: "too many cells".into(),
        })?;
    Ok(ActionPhase {
        success: true,
        valid: true,
        no_funds: false,
        status_change: AccountStatusChange::Unchanged,
        total_fwd_fees: None,
        total_action_fees: None,
        result_code: 0,
        result_arg: None,
        total_actions: 1,
        special_actions: 0,
        skipped_actions: 0,
        messages_created: 1,
        action_list_hash: *list.repr_hash(),
        total_message_size: StorageUsedShort {
            cells: VarUint56::new(stats.cell_count),
            bits: VarUint56::new(stats.bit_count),
        },
    })
}

/// A body of `bytes` as a chain of cells (127 bytes each).
fn body_cell(bytes: &[u8]) -> Result<Cell, ChainError> {
    let mut next: Option<Cell> = None;
    for chunk in bytes.chunks(BODY_BYTES_PER_CELL).rev() {
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
