//! `apply`: the decision rules of ledger.md §2, in their order, made and written in one transaction (§3).
//!
//! validate → delivery_key (already processed: `Duplicate`) → floor (sequence at or below the context's
//! floor: `BelowFloor`) → edition_order (no current or newer: `Applied`; older: `Stale`) → digest_compare
//! (equal edition: `AlreadyCurrent` or `Conflict`). Rejections and the two read-only outcomes write nothing;
//! every other outcome writes the delivery mark together with its effect, or nothing at all.

use crate::db::TxnStep;
use crate::delivery::{Delivery, Digest};
use crate::error::Result;
use crate::ledger::{now_ms, Ledger};
use crate::outcome::{Decision, Outcome, OutcomeKind, RecordedOutcome, Stage};
use crate::tables::{
    ConflictRow, Conflicts, CourseKey, Current, CurrentRow, Deliveries, DeliverySequences,
    EditionKey, Empty, Floors, History, HistoryRow, ProcessedMark, SequenceKey,
};

/// What the edition and digest rules decide against the current record of a course.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ruling {
    /// No current record, or an older one (the edition it had).
    Applied { previous_edition: Option<u64> },
    /// Same edition, same digest.
    AlreadyCurrent,
    /// Same edition, other digest.
    Conflict { current_digest: Digest },
    /// Older than the current edition.
    Stale { current_edition: u64 },
}

impl Ruling {
    fn kind(self) -> OutcomeKind {
        match self {
            Self::Applied { .. } => OutcomeKind::Applied,
            Self::AlreadyCurrent => OutcomeKind::AlreadyCurrent,
            Self::Conflict { .. } => OutcomeKind::Conflict,
            Self::Stale { .. } => OutcomeKind::Stale,
        }
    }
}

/// §2 rules 2-5. Editions are compared as numbers.
fn rule(current: Option<&CurrentRow>, edition: u64, digest: &Digest) -> Ruling {
    match current {
        None => Ruling::Applied {
            previous_edition: None,
        },
        Some(current) if edition > current.edition => Ruling::Applied {
            previous_edition: Some(current.edition),
        },
        Some(current) if edition < current.edition => Ruling::Stale {
            current_edition: current.edition,
        },
        Some(current) if current.digest == *digest => Ruling::AlreadyCurrent,
        Some(current) => Ruling::Conflict {
            current_digest: current.digest,
        },
    }
}

impl Ledger {
    /// Applies one delivery at most once and returns what was decided and by which stage.
    ///
    /// Malformed input is `Rejected` and records nothing; an error is returned only when the database
    /// fails, and then nothing of this delivery was recorded either.
    pub fn apply(&self, delivery: &Delivery) -> Result<Outcome> {
        let checked = match delivery.validate() {
            Ok(checked) => checked,
            Err(reason) => {
                self.session.count(OutcomeKind::Rejected);
                return Ok(Outcome::rejected(Stage::Validate, None, reason));
            }
        };
        let key = checked.key;
        let course_key = CourseKey(checked.course.to_owned());

        let outcome = self.db.transact("applying a delivery", |txn| {
            if let Some(mark) = txn.get_for_update::<Deliveries>(&key)? {
                let original = recorded_outcome(mark);
                return Ok(TxnStep::ReadOnly(Outcome::new(
                    Stage::DeliveryKey,
                    Some(key),
                    Decision::Duplicate { original },
                )));
            }

            if let Some(sequence) = checked.sequence {
                if let Some(floor) = txn.get_for_update::<Floors>(&checked.context_id)? {
                    if sequence <= floor.floor {
                        return Ok(TxnStep::ReadOnly(Outcome::new(
                            Stage::Floor,
                            Some(key),
                            Decision::BelowFloor {
                                sequence,
                                floor: floor.floor,
                            },
                        )));
                    }
                }
            }

            let current = txn.get_for_update::<Current>(&course_key)?;
            let ruling = rule(current.as_ref(), checked.edition, &checked.digest);
            let now = now_ms();
            let edition_key = EditionKey {
                course: checked.course.to_owned(),
                edition: checked.edition,
                delivery_key: key,
            };
            let course = checked.course.to_owned();
            let (stage, decision) = match ruling {
                Ruling::Applied { previous_edition } => {
                    let row = CurrentRow {
                        edition: checked.edition,
                        digest: checked.digest,
                        delivery_key: key,
                        recorded_at_ms: now,
                    };
                    txn.put::<Current>(&course_key, &row)?;
                    txn.put::<History>(
                        &edition_key,
                        &HistoryRow {
                            outcome: OutcomeKind::Applied,
                            digest: checked.digest,
                            recorded_at_ms: now,
                        },
                    )?;
                    let decision = Decision::Applied {
                        course,
                        edition: checked.edition,
                        digest: checked.digest,
                        previous_edition,
                    };
                    (Stage::EditionOrder, decision)
                }
                Ruling::AlreadyCurrent => {
                    let decision = Decision::AlreadyCurrent {
                        course,
                        edition: checked.edition,
                        digest: checked.digest,
                    };
                    (Stage::DigestCompare, decision)
                }
                Ruling::Conflict { current_digest } => {
                    txn.put::<Conflicts>(
                        &edition_key,
                        &ConflictRow {
                            current_digest,
                            delivered_digest: checked.digest,
                            recorded_at_ms: now,
                        },
                    )?;
                    let decision = Decision::Conflict {
                        course,
                        edition: checked.edition,
                        current_digest,
                        delivered_digest: checked.digest,
                    };
                    (Stage::DigestCompare, decision)
                }
                Ruling::Stale { current_edition } => {
                    txn.put::<History>(
                        &edition_key,
                        &HistoryRow {
                            outcome: OutcomeKind::Stale,
                            digest: checked.digest,
                            recorded_at_ms: now,
                        },
                    )?;
                    let decision = Decision::Stale {
                        course,
                        edition: checked.edition,
                        digest: checked.digest,
                        current_edition,
                    };
                    (Stage::EditionOrder, decision)
                }
            };

            txn.put::<Deliveries>(
                &key,
                &ProcessedMark {
                    outcome: ruling.kind(),
                    context_id: checked.context_id,
                    sequence: checked.sequence,
                    edition: checked.edition,
                    digest: checked.digest,
                    recorded_at_ms: now,
                    course: checked.course.to_owned(),
                },
            )?;
            if let Some(sequence) = checked.sequence {
                let index_key = SequenceKey {
                    context_id: checked.context_id,
                    sequence,
                    delivery_key: key,
                };
                txn.put::<DeliverySequences>(&index_key, &Empty)?;
            }
            Ok(TxnStep::Commit(Outcome::new(stage, Some(key), decision)))
        })?;
        self.session.count(outcome.kind());
        Ok(outcome)
    }
}

/// The outcome stored with a processed delivery, as returned with a `Duplicate`.
pub(crate) fn recorded_outcome(mark: ProcessedMark) -> RecordedOutcome {
    RecordedOutcome {
        outcome: mark.outcome,
        // Stored marks only hold kinds that have a fixed stage (checked when the row is decoded).
        stage: mark.outcome.recorded_stage().unwrap_or(Stage::EditionOrder),
        course: mark.course,
        edition: mark.edition,
        digest: mark.digest,
        sequence: mark.sequence,
        recorded_at_ms: mark.recorded_at_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delivery_key::DeliveryKey;

    fn current(edition: u64, digest: u8) -> CurrentRow {
        CurrentRow {
            edition,
            digest: Digest([digest; 32]),
            delivery_key: DeliveryKey([0; 32]),
            recorded_at_ms: 0,
        }
    }

    #[test]
    fn rules_in_order() {
        let d1 = Digest([1; 32]);
        assert_eq!(
            rule(None, 1, &d1),
            Ruling::Applied {
                previous_edition: None
            }
        );
        assert_eq!(
            rule(Some(&current(1, 1)), 2, &d1),
            Ruling::Applied {
                previous_edition: Some(1)
            }
        );
        assert_eq!(rule(Some(&current(1, 1)), 1, &d1), Ruling::AlreadyCurrent);
        assert_eq!(
            rule(Some(&current(1, 2)), 1, &d1),
            Ruling::Conflict {
                current_digest: Digest([2; 32])
            }
        );
        assert_eq!(
            rule(Some(&current(2, 1)), 1, &d1),
            Ruling::Stale { current_edition: 2 }
        );
    }

    #[test]
    fn editions_compare_as_numbers() {
        // "10" < "2" as strings; as editions 10 is newer.
        assert_eq!(
            rule(Some(&current(2, 1)), 10, &Digest([3; 32])),
            Ruling::Applied {
                previous_edition: Some(2)
            }
        );
        assert_eq!(
            rule(Some(&current(10, 1)), 2, &Digest([3; 32])),
            Ruling::Stale {
                current_edition: 10
            }
        );
    }
}
