//! [`QueueStorage`]: the opened `int_queue` database, the queue-wide lock L and per-shard mutexes (§9), and
//! the background compaction worker that runs range compactions outside every lock.

use std::collections::HashMap;
use std::path::Path;
use std::sync::mpsc;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use regolith_formats::{BlockId, HashBytes, ShardIdent};

use regolith_kv::{Db, KeyRange, Table};

use crate::db::{QueueDb, QueueSnapshot};
use crate::error::Result;
use crate::import::{self, ImportSummary};
use crate::tables::QueueTables;

/// Name of the queue database directory inside the node's data directory.
pub const QUEUE_DB_DIR: &str = "int_queue";

/// A range compaction to run after a range delete: (table, from, to).
#[derive(Debug, Clone)]
pub(crate) struct CompactionJob {
    pub range: KeyRange,
    pub compact: fn(&Db<QueueTables>, &KeyRange),
}

impl CompactionJob {
    /// A compaction of `range` of table `T`.
    pub(crate) fn of<T: Table<Schema = QueueTables>>(range: KeyRange) -> Self {
        Self {
            range,
            compact: |db, range| db.compact_range::<T>(range),
        }
    }
}

/// Runs compactions on a background thread; dropping it waits for the thread to finish.
struct Compactor {
    tx: Option<mpsc::Sender<Vec<CompactionJob>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Compactor {
    fn start(db: Arc<QueueDb>) -> Self {
        let (tx, rx) = mpsc::channel::<Vec<CompactionJob>>();
        let thread = std::thread::Builder::new()
            .name("queue-compaction".into())
            .spawn(move || {
                while let Ok(jobs) = rx.recv() {
                    run_compactions(&db, &jobs);
                }
            })
            .expect("spawning the queue compaction thread");
        Self {
            tx: Some(tx),
            thread: Some(thread),
        }
    }
}

impl Drop for Compactor {
    fn drop(&mut self) {
        self.tx.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

pub(crate) fn run_compactions(db: &QueueDb, jobs: &[CompactionJob]) {
    for job in jobs {
        (job.compact)(db, &job.range);
    }
}

/// The queue database with its locks. Opened once per node; shared by the facade, GC and import.
pub struct QueueStorage {
    db: Arc<QueueDb>,
    pub(crate) global: Arc<RwLock<()>>,
    shard_locks: Mutex<HashMap<ShardIdent, Arc<Mutex<()>>>>,
    compactor: Compactor,
}

impl QueueStorage {
    /// Opens `<data_dir>/int_queue`, creating it if missing.
    pub fn open(data_dir: &Path) -> Result<Arc<Self>> {
        Self::open_at(&data_dir.join(QUEUE_DB_DIR))
    }

    /// Opens an existing `<data_dir>/int_queue` read-only, for tools beside a running node.
    pub fn open_read_only(data_dir: &Path) -> Result<Arc<Self>> {
        let db = Arc::new(crate::db::open_read_only(&data_dir.join(QUEUE_DB_DIR))?);
        Ok(Arc::new(Self {
            compactor: Compactor::start(db.clone()),
            db,
            global: Arc::new(RwLock::new(())),
            shard_locks: Mutex::new(HashMap::new()),
        }))
    }

    /// Everything a tool shows about the queue, from one snapshot (see [`QueueOverview`]); `with_digest`
    /// also hashes the whole content, which reads every message.
    pub fn overview(&self, with_digest: bool) -> Result<crate::QueueOverview> {
        crate::overview::overview(&self.snapshot(), with_digest)
    }

    /// Every shard with at least one stored diff, in either zone.
    pub fn shards_with_diffs(&self) -> Result<std::collections::BTreeSet<ShardIdent>> {
        crate::overview::shards_with_records(&self.snapshot())
    }

    /// Opens the queue database at exactly `path`.
    pub fn open_at(path: &Path) -> Result<Arc<Self>> {
        let db = Arc::new(crate::db::open(path)?);
        Ok(Arc::new(Self {
            compactor: Compactor::start(db.clone()),
            db,
            global: Arc::new(RwLock::new(())),
            shard_locks: Mutex::new(HashMap::new()),
        }))
    }

    /// The raw database, for tests that check rows or arm fail points.
    #[cfg(feature = "test-utils")]
    pub fn db(&self) -> &Arc<QueueDb> {
        &self.db
    }

    /// The database.
    #[cfg(not(feature = "test-utils"))]
    pub(crate) fn db(&self) -> &Arc<QueueDb> {
        &self.db
    }

    /// Every (table, key, value) of every table, for byte-level comparisons in tests.
    #[cfg(feature = "test-utils")]
    pub fn dump(&self) -> Vec<(String, Vec<u8>, Vec<u8>)> {
        self.db
            .raw_rows()
            .unwrap_or_default()
            .into_iter()
            .map(|row| (row.table.to_string(), row.key, row.value))
            .collect()
    }

    /// A snapshot of the current state.
    pub(crate) fn snapshot(&self) -> Arc<QueueSnapshot> {
        Arc::new(QueueSnapshot::new(self.db.clone()))
    }

    /// The mutex of a shard, created on first use.
    pub(crate) fn shard_lock(&self, shard: ShardIdent) -> Arc<Mutex<()>> {
        self.shard_locks.lock().entry(shard).or_default().clone()
    }

    /// Hands compactions to the background worker (never run under a queue lock).
    pub(crate) fn compact_in_background(&self, jobs: Vec<CompactionJob>) {
        if jobs.is_empty() {
            return;
        }
        if let Some(tx) = &self.compactor.tx {
            if tx.send(jobs).is_err() {
                tracing::warn!("queue compaction worker is gone; skipping compaction");
            }
        }
    }

    /// Cold-boot import of a persistent queue state (§5.9): parses and checks `data` (an uncompressed TL
    /// `block.queueState`), then writes everything in one batch under the exclusive lock. Blocking: call it
    /// from a blocking thread. Any error writes nothing.
    pub fn import_queue_state(
        &self,
        block_id: &BlockId,
        expected_diff_hash: &HashBytes,
        expected_tail_len: u32,
        data: &[u8],
    ) -> Result<ImportSummary> {
        let _exclusive = self.global.write();
        import::import(
            &self.db,
            block_id,
            expected_diff_hash,
            expected_tail_len,
            data,
            true,
        )
    }

    /// Reads a queue-state file and imports it (see [`Self::import_queue_state`]).
    pub fn import_queue_state_file(
        &self,
        block_id: &BlockId,
        expected_diff_hash: &HashBytes,
        expected_tail_len: u32,
        path: &Path,
    ) -> Result<ImportSummary> {
        let data = std::fs::read(path).map_err(|source| crate::QueueError::Io {
            context: format!("reading queue state {}", path.display()),
            source,
        })?;
        self.import_queue_state(block_id, expected_diff_hash, expected_tail_len, &data)
    }

    /// Runs every check of the import on `data` without writing anything.
    pub fn validate_queue_state(
        &self,
        block_id: &BlockId,
        expected_diff_hash: &HashBytes,
        expected_tail_len: u32,
        data: &[u8],
    ) -> Result<ImportSummary> {
        import::import(
            &self.db,
            block_id,
            expected_diff_hash,
            expected_tail_len,
            data,
            false,
        )
    }
}
