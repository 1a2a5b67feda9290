//! What an `apply` decided (ledger.md §2) and which stage decided it. Every [`Outcome`] carries its
//! [`Stage`]; a `Duplicate` carries the outcome originally recorded for the delivery.

use serde::Serialize;

use crate::delivery::Digest;
use crate::delivery_key::DeliveryKey;

/// The stages of a decision, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Turning outside input (a JSON line, hex, a number) into a [`crate::Delivery`]; used by front ends.
    Decode,
    /// Checking the delivery's fields (§2 rule 6).
    Validate,
    /// Looking the delivery key up among processed deliveries (§2 rule 1).
    DeliveryKey,
    /// Comparing the delivery's sequence with its context's floor (§4).
    Floor,
    /// Comparing the edition with the current one (§2 rules 2 and 5).
    EditionOrder,
    /// Comparing the digest of an equal edition with the current one (§2 rules 3 and 4).
    DigestCompare,
}

impl Stage {
    /// The stage's name as printed and serialised.
    pub fn name(self) -> &'static str {
        match self {
            Self::Decode => "decode",
            Self::Validate => "validate",
            Self::DeliveryKey => "delivery_key",
            Self::Floor => "floor",
            Self::EditionOrder => "edition_order",
            Self::DigestCompare => "digest_compare",
        }
    }
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The kind of an outcome, without its details.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeKind {
    /// The announcement became current.
    Applied,
    /// The same announcement was already current (another delivery of it).
    AlreadyCurrent,
    /// Same edition, different digest: stored as a conflict, nothing changed.
    Conflict,
    /// An edition older than the current one: kept in history, never current.
    Stale,
    /// This delivery was already processed.
    Duplicate,
    /// The delivery's sequence is at or below its context's floor: a replay.
    BelowFloor,
    /// Malformed input; nothing recorded.
    Rejected,
}

impl OutcomeKind {
    /// Every kind, in declaration order.
    pub const ALL: [OutcomeKind; 7] = [
        Self::Applied,
        Self::AlreadyCurrent,
        Self::Conflict,
        Self::Stale,
        Self::Duplicate,
        Self::BelowFloor,
        Self::Rejected,
    ];

    /// The kind's name as printed and serialised.
    pub fn name(self) -> &'static str {
        match self {
            Self::Applied => "applied",
            Self::AlreadyCurrent => "already_current",
            Self::Conflict => "conflict",
            Self::Stale => "stale",
            Self::Duplicate => "duplicate",
            Self::BelowFloor => "below_floor",
            Self::Rejected => "rejected",
        }
    }

    /// The stage that decides outcomes of this kind when they are recorded; `None` for kinds whose stage
    /// varies (`Rejected`) or which are never recorded.
    pub(crate) fn recorded_stage(self) -> Option<Stage> {
        match self {
            Self::Applied | Self::Stale => Some(Stage::EditionOrder),
            Self::AlreadyCurrent | Self::Conflict => Some(Stage::DigestCompare),
            Self::Duplicate | Self::BelowFloor | Self::Rejected => None,
        }
    }

    /// The byte stored for a recorded kind.
    pub(crate) fn code(self) -> u8 {
        match self {
            Self::Applied => 1,
            Self::AlreadyCurrent => 2,
            Self::Conflict => 3,
            Self::Stale => 4,
            Self::Duplicate => 5,
            Self::BelowFloor => 6,
            Self::Rejected => 7,
        }
    }

    /// The recorded kind stored as `code`.
    pub(crate) fn from_recorded_code(code: u8) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|kind| kind.code() == code && kind.recorded_stage().is_some())
    }
}

impl std::fmt::Display for OutcomeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The outcome recorded with a processed delivery, returned again with every `Duplicate`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RecordedOutcome {
    /// What was decided (`applied`, `already_current`, `conflict` or `stale`).
    pub outcome: OutcomeKind,
    /// The stage that decided it.
    pub stage: Stage,
    /// The course of the announcement.
    pub course: String,
    /// Its edition.
    pub edition: u64,
    /// Its digest.
    pub digest: Digest,
    /// The delivery's transport sequence, if it had one.
    pub sequence: Option<u64>,
    /// When it was decided (milliseconds since the Unix epoch).
    pub recorded_at_ms: u64,
}

/// The details of a decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Decision {
    /// The announcement became current.
    Applied {
        /// Course.
        course: String,
        /// The new current edition.
        edition: u64,
        /// Its digest.
        digest: Digest,
        /// The edition it replaced, if the course had one.
        previous_edition: Option<u64>,
    },
    /// The same (course, edition, digest) was already current.
    AlreadyCurrent {
        /// Course.
        course: String,
        /// The current edition.
        edition: u64,
        /// Its digest.
        digest: Digest,
    },
    /// The current edition was announced again with another digest; the conflict is stored.
    Conflict {
        /// Course.
        course: String,
        /// The contested edition.
        edition: u64,
        /// The digest that stays current.
        current_digest: Digest,
        /// The digest this delivery announced.
        delivered_digest: Digest,
    },
    /// An edition older than the current one; kept in history only.
    Stale {
        /// Course.
        course: String,
        /// The late edition.
        edition: u64,
        /// Its digest.
        digest: Digest,
        /// The edition that stays current.
        current_edition: u64,
    },
    /// The delivery was processed before; nothing changed.
    Duplicate {
        /// What was decided the first time.
        original: RecordedOutcome,
    },
    /// The delivery is at or below the floor of its context: treated as a replay, nothing changed.
    BelowFloor {
        /// The delivery's sequence.
        sequence: u64,
        /// The context's floor.
        floor: u64,
    },
    /// Malformed input; nothing recorded, a corrected retry can still apply.
    Rejected {
        /// What was wrong.
        reason: String,
    },
}

impl Decision {
    /// The kind of this decision.
    pub fn kind(&self) -> OutcomeKind {
        match self {
            Self::Applied { .. } => OutcomeKind::Applied,
            Self::AlreadyCurrent { .. } => OutcomeKind::AlreadyCurrent,
            Self::Conflict { .. } => OutcomeKind::Conflict,
            Self::Stale { .. } => OutcomeKind::Stale,
            Self::Duplicate { .. } => OutcomeKind::Duplicate,
            Self::BelowFloor { .. } => OutcomeKind::BelowFloor,
            Self::Rejected { .. } => OutcomeKind::Rejected,
        }
    }
}

/// The result of applying one delivery: the decision, the stage that made it and the delivery key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Outcome {
    #[serde(flatten)]
    decision: Decision,
    stage: Stage,
    #[serde(skip_serializing_if = "Option::is_none")]
    delivery_key: Option<DeliveryKey>,
}

impl Outcome {
    /// An outcome decided at `stage`.
    pub(crate) fn new(stage: Stage, delivery_key: Option<DeliveryKey>, decision: Decision) -> Self {
        Self {
            decision,
            stage,
            delivery_key,
        }
    }

    /// A rejection of malformed input at `stage` (`decode` or `validate`); nothing is recorded for it.
    pub fn rejected(
        stage: Stage,
        delivery_key: Option<DeliveryKey>,
        reason: impl Into<String>,
    ) -> Self {
        Self::new(
            stage,
            delivery_key,
            Decision::Rejected {
                reason: reason.into(),
            },
        )
    }

    /// The stage that decided.
    pub fn stage(&self) -> Stage {
        self.stage
    }

    /// The kind of outcome.
    pub fn kind(&self) -> OutcomeKind {
        self.decision.kind()
    }

    /// The details.
    pub fn decision(&self) -> &Decision {
        &self.decision
    }

    /// The delivery key, when the input got far enough to have one.
    pub fn delivery_key(&self) -> Option<DeliveryKey> {
        self.delivery_key
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (stage {})", self.kind(), self.stage)?;
        match &self.decision {
            Decision::Applied {
                course,
                edition,
                digest,
                previous_edition,
            } => {
                write!(f, ": course {course:?} edition {edition} digest {digest} is current")?;
                match previous_edition {
                    Some(previous) => write!(f, " (was edition {previous})"),
                    None => write!(f, " (first edition seen)"),
                }
            }
            Decision::AlreadyCurrent { course, edition, .. } => {
                write!(f, ": course {course:?} edition {edition} is already current with this digest")
            }
            Decision::Conflict {
                course,
                edition,
                current_digest,
                delivered_digest,
            } => write!(
                f,
                ": course {course:?} edition {edition} announced with digest {delivered_digest}, \
                 current digest is {current_digest}; conflict stored"
            ),
            Decision::Stale {
                course,
                edition,
                current_edition,
                ..
            } => write!(f, ": course {course:?} edition {edition} is older than current edition {current_edition}"),
            Decision::Duplicate { original } => write!(
                f,
                ": already processed as {} of course {:?} edition {}",
                original.outcome, original.course, original.edition
            ),
            Decision::BelowFloor { sequence, floor } => {
                write!(f, ": sequence {sequence} is at or below the floor {floor} of its context")
            }
            Decision::Rejected { reason } => write!(f, ": {reason}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_names_outcome_and_stage() {
        let outcome = Outcome::new(
            Stage::Floor,
            Some(DeliveryKey([1; 32])),
            Decision::BelowFloor {
                sequence: 400,
                floor: 500,
            },
        );
        let json = serde_json::to_value(&outcome).unwrap();
        assert_eq!(json["outcome"], "below_floor");
        assert_eq!(json["stage"], "floor");
        assert_eq!(json["floor"], 500);
        assert_eq!(json["delivery_key"], hex::encode([1u8; 32]));
        assert!(outcome.to_string().starts_with("below_floor (stage floor)"));
    }

    #[test]
    fn recorded_codes_round_trip() {
        for kind in OutcomeKind::ALL {
            let back = OutcomeKind::from_recorded_code(kind.code());
            assert_eq!(back.is_some(), kind.recorded_stage().is_some(), "{kind}");
            if let Some(back) = back {
                assert_eq!(back, kind);
            }
        }
        assert_eq!(OutcomeKind::from_recorded_code(0), None);
    }
}
