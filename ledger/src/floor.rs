//! Floors (ledger.md §4): the only way processed-delivery marks are ever removed. A floor is a watermark per
//! transport context that the transport adapter has proven closed (every sequence at or below it is final).
//! Raising it and pruning the marks below it happen in one transaction; afterwards any delivery of that
//! context whose sequence is at or below the floor is `BelowFloor`, so a pruned delivery can never apply
//! again. There is deliberately no pruning by age.

use serde::Serialize;

use crate::db::TxnStep;
use crate::delivery::check_id;
use crate::delivery_key::{ContextId, TransportContext};
use crate::error::{LedgerError, Result};
use crate::ledger::{now_ms, Ledger};
use crate::tables::{Deliveries, DeliverySequences, FloorRow, Floors, SequenceBound};

/// The effect of [`Ledger::raise_floor`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FloorChange {
    /// The context.
    pub context: TransportContext,
    /// Its id (hex in JSON).
    pub context_id: ContextId,
    /// The floor before the call, if there was one.
    pub previous_floor: Option<u64>,
    /// The floor after the call; a floor never goes down.
    pub floor: u64,
    /// Delivery marks pruned by this call.
    pub pruned: u64,
}

/// A floor as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FloorRecord {
    /// The context.
    pub context: TransportContext,
    /// Its id.
    pub context_id: ContextId,
    /// Every sequence at or below this is closed.
    pub floor: u64,
    /// Delivery marks pruned under this floor, in total.
    pub pruned_total: u64,
    /// When it was last raised (milliseconds since the Unix epoch).
    pub raised_at_ms: u64,
}

impl Ledger {
    /// Records that every sequence of `context` up to `watermark` is closed and prunes the marks of those
    /// deliveries, in one transaction. A watermark at or below the current floor lowers nothing; it only
    /// prunes marks that a concurrent apply may have left at or below the floor.
    pub fn raise_floor(&self, context: &TransportContext, watermark: u64) -> Result<FloorChange> {
        for (name, value) in context.fields() {
            check_id(name, value).map_err(|reason| LedgerError::InvalidArgument {
                field: "context",
                reason,
            })?;
        }
        let context_id = context.id();
        self.db.transact("raising a floor", |txn| {
            let existing = txn.get_for_update::<Floors>(&context_id)?;
            let previous_floor = existing.as_ref().map(|row| row.floor);
            let floor = previous_floor.map_or(watermark, |previous| previous.max(watermark));

            let closed = txn.keys_while::<DeliverySequences>(
                regolith_kv::KeyRange::from(&SequenceBound {
                    context_id,
                    sequence: 0,
                }),
                |key| key.context_id == context_id && key.sequence <= floor,
            )?;
            for index_key in &closed {
                txn.delete::<Deliveries>(&index_key.delivery_key)?;
                txn.delete::<DeliverySequences>(index_key)?;
            }
            let pruned = closed.len() as u64;
            let change = FloorChange {
                context: context.clone(),
                context_id,
                previous_floor,
                floor,
                pruned,
            };
            if previous_floor == Some(floor) && pruned == 0 {
                return Ok(TxnStep::ReadOnly(change));
            }
            let pruned_before = existing.as_ref().map_or(0, |row| row.pruned_total);
            txn.put::<Floors>(
                &context_id,
                &FloorRow {
                    floor,
                    raised_at_ms: now_ms(),
                    pruned_total: pruned_before.saturating_add(pruned),
                    context: context.clone(),
                },
            )?;
            Ok(TxnStep::Commit(change))
        })
    }

    /// Every floor, by context id.
    pub fn floors(&self) -> Result<Vec<FloorRecord>> {
        Ok(self
            .db
            .scan::<Floors>(regolith_kv::KeyRange::all())?
            .into_iter()
            .map(|(context_id, row)| FloorRecord {
                context: row.context,
                context_id,
                floor: row.floor,
                pruned_total: row.pruned_total,
                raised_at_ms: row.raised_at_ms,
            })
            .collect())
    }
}
