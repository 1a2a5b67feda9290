//! The [`Ledger`] handle: opening the database under a directory and the per-process counters. The decision
//! rules live in `decision.rs`, floors in `floor.rs`, the read side in `records.rs` and `stats.rs`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::db::LedgerDb;
use crate::error::Result;
use crate::outcome::OutcomeKind;

/// How a ledger is opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerOptions {
    /// Wait for the write-ahead log to reach the disk before a decision is returned (default). Without it a
    /// process crash still loses nothing, but a power loss may lose the last decisions.
    pub sync_writes: bool,
}

impl Default for LedgerOptions {
    fn default() -> Self {
        Self { sync_writes: true }
    }
}

/// The receiver journal: applies deliveries at most once and keeps current editions, history, conflicts
/// and floors in its own RocksDB. Share it between threads by reference (it is `Sync`).
pub struct Ledger {
    pub(crate) db: LedgerDb,
    pub(crate) session: SessionCounters,
    dir: PathBuf,
}

impl Ledger {
    /// Opens (creating if missing) the ledger database in `dir` with default options.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(dir, LedgerOptions::default())
    }

    /// Opens (creating if missing) the ledger database in `dir`.
    pub fn open_with(dir: impl AsRef<Path>, options: LedgerOptions) -> Result<Self> {
        let dir = dir.as_ref().to_path_buf();
        let db = LedgerDb::open(&dir, options.sync_writes)?;
        Ok(Self {
            db,
            session: SessionCounters::default(),
            dir,
        })
    }

    /// The directory of the database.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// Outcomes returned since open, per kind (duplicates and rejections leave no trace in the database).
#[derive(Debug, Default)]
pub(crate) struct SessionCounters {
    by_kind: [AtomicU64; OutcomeKind::ALL.len()],
}

impl SessionCounters {
    pub(crate) fn count(&self, kind: OutcomeKind) {
        self.by_kind[kind as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn get(&self, kind: OutcomeKind) -> u64 {
        self.by_kind[kind as usize].load(Ordering::Relaxed)
    }
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}
