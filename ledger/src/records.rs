//! The read side of the journal: current editions, history, stored conflicts, processed deliveries and a
//! full export. Reads see committed decisions only.

use serde::Serialize;

use crate::decision::recorded_outcome;
use crate::delivery::{check_id, Digest};
use crate::delivery_key::{ContextId, DeliveryKey};
use crate::error::{LedgerError, Result};
use crate::floor::FloorRecord;
use crate::ledger::Ledger;
use crate::outcome::{OutcomeKind, RecordedOutcome};
use regolith_kv::KeyRange;

use crate::tables::{Conflicts, CourseKey, Current, CurrentRow, Deliveries, History};

/// The current edition of a course.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CurrentRecord {
    /// Course.
    pub course: String,
    /// Current edition.
    pub edition: u64,
    /// Its digest.
    pub digest: Digest,
    /// The delivery that made it current.
    pub delivery_key: DeliveryKey,
    /// When (milliseconds since the Unix epoch).
    pub recorded_at_ms: u64,
}

/// An applied or stale announcement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HistoryEntry {
    /// Course.
    pub course: String,
    /// Edition.
    pub edition: u64,
    /// `applied` or `stale`.
    pub outcome: OutcomeKind,
    /// The announced digest.
    pub digest: Digest,
    /// The delivery that announced it.
    pub delivery_key: DeliveryKey,
    /// When (milliseconds since the Unix epoch).
    pub recorded_at_ms: u64,
}

/// A stored conflict: an edition announced again with another digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConflictRecord {
    /// Course.
    pub course: String,
    /// The contested edition.
    pub edition: u64,
    /// The digest that stayed current.
    pub current_digest: Digest,
    /// The digest the conflicting delivery announced.
    pub delivered_digest: Digest,
    /// The conflicting delivery.
    pub delivery_key: DeliveryKey,
    /// When (milliseconds since the Unix epoch).
    pub recorded_at_ms: u64,
}

/// A processed delivery and what was decided for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProcessedDelivery {
    /// The delivery.
    pub delivery_key: DeliveryKey,
    /// Its transport context.
    pub context_id: ContextId,
    /// The recorded decision.
    pub recorded: RecordedOutcome,
}

/// The whole logical state of a ledger, every table decoded, in key order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Export {
    /// Current editions by course.
    pub courses: Vec<CurrentRecord>,
    /// History by (course, edition, delivery key).
    pub history: Vec<HistoryEntry>,
    /// Stored conflicts by (course, edition, delivery key).
    pub conflicts: Vec<ConflictRecord>,
    /// Processed deliveries by delivery key.
    pub deliveries: Vec<ProcessedDelivery>,
    /// Floors by context id.
    pub floors: Vec<FloorRecord>,
}

impl Ledger {
    /// The current edition of `course`, if any delivery applied one.
    pub fn current(&self, course: &str) -> Result<Option<CurrentRecord>> {
        check_course(course)?;
        let row = self.db.get::<Current>(&CourseKey(course.to_owned()))?;
        Ok(row.map(|row| current_record(course.to_owned(), row)))
    }

    /// The current edition of every course, by course id.
    pub fn courses(&self) -> Result<Vec<CurrentRecord>> {
        Ok(self
            .db
            .scan::<Current>(KeyRange::all())?
            .into_iter()
            .map(|(CourseKey(course), row)| current_record(course, row))
            .collect())
    }

    /// Every applied or stale announcement of `course`, by edition (numerically), then delivery key.
    pub fn history(&self, course: &str) -> Result<Vec<HistoryEntry>> {
        check_course(course)?;
        self.history_rows(KeyRange::prefix(&CourseKey(course.to_owned())))
    }

    fn history_rows(&self, range: KeyRange) -> Result<Vec<HistoryEntry>> {
        Ok(self
            .db
            .scan::<History>(range)?
            .into_iter()
            .map(|(key, row)| HistoryEntry {
                course: key.course,
                edition: key.edition,
                outcome: row.outcome,
                digest: row.digest,
                delivery_key: key.delivery_key,
                recorded_at_ms: row.recorded_at_ms,
            })
            .collect())
    }

    /// Every stored conflict, by course, edition and delivery key.
    pub fn conflicts(&self) -> Result<Vec<ConflictRecord>> {
        Ok(self
            .db
            .scan::<Conflicts>(KeyRange::all())?
            .into_iter()
            .map(|(key, row)| ConflictRecord {
                course: key.course,
                edition: key.edition,
                current_digest: row.current_digest,
                delivered_digest: row.delivered_digest,
                delivery_key: key.delivery_key,
                recorded_at_ms: row.recorded_at_ms,
            })
            .collect())
    }

    /// The whole logical state (audits, comparisons of two ledgers). Tables are read one after another, so
    /// take it while no apply runs when a consistent picture matters.
    pub fn export(&self) -> Result<Export> {
        let deliveries = self
            .db
            .scan::<Deliveries>(KeyRange::all())?
            .into_iter()
            .map(|(delivery_key, mark)| ProcessedDelivery {
                delivery_key,
                context_id: mark.context_id,
                recorded: recorded_outcome(mark),
            })
            .collect();
        Ok(Export {
            courses: self.courses()?,
            history: self.history_rows(KeyRange::all())?,
            conflicts: self.conflicts()?,
            deliveries,
            floors: self.floors()?,
        })
    }

    /// Every row of every table as raw bytes, tables in declaration order (byte-level comparisons in
    /// tests).
    #[cfg(feature = "test-utils")]
    pub fn raw_rows(&self) -> Result<Vec<regolith_kv::RawRow>> {
        self.db.raw_rows()
    }
}

fn check_course(course: &str) -> Result<()> {
    check_id("course", course).map_err(|reason| LedgerError::InvalidArgument {
        field: "course",
        reason,
    })
}

fn current_record(course: String, row: CurrentRow) -> CurrentRecord {
    CurrentRecord {
        course,
        edition: row.edition,
        digest: row.digest,
        delivery_key: row.delivery_key,
        recorded_at_ms: row.recorded_at_ms,
    }
}
