//! Counts of what the ledger holds (from its tables) and of what this process decided since open.

use serde::Serialize;

use crate::error::Result;
use crate::ledger::Ledger;
use crate::outcome::OutcomeKind;
use crate::tables::{Conflicts, Current, Deliveries, DeliverySequences, Floors, History};

/// What [`Ledger::stats`] reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Stats {
    /// Courses with a current edition.
    pub courses: u64,
    /// Processed deliveries still recorded (not pruned).
    pub deliveries: u64,
    /// Of those, deliveries with a sequence (prunable below a floor).
    pub sequenced_deliveries: u64,
    /// Recorded deliveries per recorded outcome.
    pub recorded: RecordedCounts,
    /// History rows (applied and stale announcements).
    pub history_rows: u64,
    /// Stored conflicts.
    pub conflicts: u64,
    /// Contexts with a floor.
    pub floors: u64,
    /// Delivery marks pruned under floors, in total.
    pub pruned_total: u64,
    /// What this process decided since it opened the ledger.
    pub session: SessionStats,
}

/// Recorded deliveries per outcome.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RecordedCounts {
    /// Applied.
    pub applied: u64,
    /// Already current.
    pub already_current: u64,
    /// Conflict.
    pub conflict: u64,
    /// Stale.
    pub stale: u64,
}

/// Outcomes returned by this process since open, and commit conflicts it retried.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SessionStats {
    /// Applied.
    pub applied: u64,
    /// Already current.
    pub already_current: u64,
    /// Conflict.
    pub conflict: u64,
    /// Stale.
    pub stale: u64,
    /// Duplicate.
    pub duplicate: u64,
    /// Below floor.
    pub below_floor: u64,
    /// Rejected.
    pub rejected: u64,
    /// Transactions run again because a concurrent commit touched what they read.
    pub commit_retries: u64,
}

impl Ledger {
    /// Counts of the tables (a full scan of each) and of this session's outcomes.
    pub fn stats(&self) -> Result<Stats> {
        let mut recorded = RecordedCounts::default();
        for (_, mark) in self.db.scan::<Deliveries>(regolith_kv::KeyRange::all())? {
            match mark.outcome {
                OutcomeKind::Applied => recorded.applied += 1,
                OutcomeKind::AlreadyCurrent => recorded.already_current += 1,
                OutcomeKind::Conflict => recorded.conflict += 1,
                OutcomeKind::Stale => recorded.stale += 1,
                // Decoding admits recorded kinds only.
                OutcomeKind::Duplicate | OutcomeKind::BelowFloor | OutcomeKind::Rejected => {}
            }
        }
        let floors = self.floors()?;
        let session = &self.session;
        Ok(Stats {
            courses: self.db.count::<Current>()?,
            deliveries: recorded.applied
                + recorded.already_current
                + recorded.conflict
                + recorded.stale,
            sequenced_deliveries: self.db.count::<DeliverySequences>()?,
            recorded,
            history_rows: self.db.count::<History>()?,
            conflicts: self.db.count::<Conflicts>()?,
            floors: self.db.count::<Floors>()?,
            pruned_total: floors.iter().map(|floor| floor.pruned_total).sum(),
            session: SessionStats {
                applied: session.get(OutcomeKind::Applied),
                already_current: session.get(OutcomeKind::AlreadyCurrent),
                conflict: session.get(OutcomeKind::Conflict),
                stale: session.get(OutcomeKind::Stale),
                duplicate: session.get(OutcomeKind::Duplicate),
                below_floor: session.get(OutcomeKind::BelowFloor),
                rejected: session.get(OutcomeKind::Rejected),
                commit_retries: self.db.commit_retries(),
            },
        })
    }
}
