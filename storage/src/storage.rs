//! The block storage facade: opens the `core` database and wires handles, connections, components,
//! archives, node state and GC together.

use std::sync::Arc;
use std::time::{Duration, Instant};

use regolith_formats::BlockId;

use crate::archive::{ArchiveOpenStats, ArchiveStorage};
use crate::block_cache::BlockCache;
use crate::block_components::BlockComponentStorage;
use crate::block_connection::BlockConnectionStorage;
use crate::block_handle::BlockHandleStorage;
use crate::cells::CellStorage;
use crate::config::StorageConfig;
use crate::consistency::{self, ConsistencyStats};
use crate::db::CoreDb;
use crate::error::{Result, StorageError};
use crate::gc::{self, BlockGcStats};
use crate::migration::MigrationStats;
use crate::node_state::{NodeStateStorage, VersionCheck};
use crate::parsed::ParsedBlock;
use crate::persistent_state::{PersistentStateStorage, StatesOpenStats};

/// What `open` found: a layout migration, the startup check and archive recovery counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct OpenStats {
    /// The migration from an older data-dir layout, if one ran.
    pub migration: Option<MigrationStats>,
    /// The startup consistency check.
    pub consistency: ConsistencyStats,
    /// Archive recovery.
    pub archives: ArchiveOpenStats,
    /// The persistent-state index.
    pub states: StatesOpenStats,
}

struct Inner {
    config: StorageConfig,
    db: Arc<CoreDb>,
    handles: Arc<BlockHandleStorage>,
    connections: BlockConnectionStorage,
    components: BlockComponentStorage,
    node_state: NodeStateStorage,
    cells: CellStorage,
    archives: ArchiveStorage,
    states: PersistentStateStorage,
    open_stats: OpenStats,
}

/// The block storage. Cheap to clone.
#[derive(Clone)]
pub struct Storage(Arc<Inner>);

impl Storage {
    /// Opens (or creates) the storage under `config.root_dir`, running the startup check and archive
    /// recovery before anything else can use it.
    pub fn open(config: StorageConfig) -> Result<Self> {
        Self::open_inner(config, false)
    }

    /// Opens an existing storage read-only (e.g. while a node runs on it): the startup check only counts,
    /// archive recovery only reads, and every write fails.
    pub fn open_read_only(config: StorageConfig) -> Result<Self> {
        Self::open_inner(config, true)
    }

    fn open_inner(config: StorageConfig, read_only: bool) -> Result<Self> {
        config.validate()?;
        let core_dir = config.root_dir.join("core");
        if !read_only {
            std::fs::create_dir_all(&core_dir)
                .map_err(StorageError::io(format!("creating {}", core_dir.display())))?;
        }
        let db = Arc::new(crate::db::open(&core_dir, &config, read_only)?);
        let node_state = NodeStateStorage::new(db.clone());
        let migration = match node_state.check_db_version(read_only)? {
            VersionCheck::Current => None,
            // A read-only open reads an older layout as it is (storage::migration says how).
            VersionCheck::Migrate(_) if read_only => None,
            VersionCheck::Migrate(from) => {
                let stats = crate::migration::migrate(&db, from)?;
                node_state.store_db_version()?;
                Some(stats)
            }
        };

        let consistency = consistency::check(&db, !read_only)?;
        let handles = Arc::new(BlockHandleStorage::new(
            db.clone(),
            config.each_key_block_is_persistent,
        ));
        let (archives, archive_stats) = ArchiveStorage::open(
            db.clone(),
            handles.clone(),
            &config.root_dir,
            &config.archives,
            read_only,
        )?;
        let (states, states_stats) =
            PersistentStateStorage::open(db.clone(), handles.clone(), &config.root_dir, read_only)?;
        let cache = BlockCache::new(config.blocks_cache.size.as_u64(), config.blocks_cache.ttl);
        let components = BlockComponentStorage::new(
            db.clone(),
            handles.clone(),
            cache,
            config.components.zstd_level,
            config.list_blocks_page.max(1),
        );
        Ok(Self(Arc::new(Inner {
            cells: CellStorage::new(db.clone(), handles.clone()),
            connections: BlockConnectionStorage::new(db.clone()),
            components,
            node_state,
            archives,
            states,
            handles,
            db,
            open_stats: OpenStats {
                migration,
                consistency,
                archives: archive_stats,
                states: states_stats,
            },
            config,
        })))
    }

    /// The configuration.
    pub fn config(&self) -> &StorageConfig {
        &self.0.config
    }

    /// What the startup check and archive recovery found.
    pub fn open_stats(&self) -> OpenStats {
        self.0.open_stats
    }

    /// Handles, setters and the key-block index.
    pub fn handles(&self) -> &BlockHandleStorage {
        &self.0.handles
    }

    /// Block connections.
    pub fn connections(&self) -> &BlockConnectionStorage {
        &self.0.connections
    }

    /// Block components.
    pub fn components(&self) -> &BlockComponentStorage {
        &self.0.components
    }

    /// Archives.
    pub fn archives(&self) -> &ArchiveStorage {
        &self.0.archives
    }

    /// Persistent states: the index and the state files.
    pub fn persistent_states(&self) -> &PersistentStateStorage {
        &self.0.states
    }

    /// The cell rows of the stored shard states.
    pub fn cells(&self) -> &CellStorage {
        &self.0.cells
    }

    /// Node state.
    pub fn node_state(&self) -> &NodeStateStorage {
        &self.0.node_state
    }

    /// Makes every write to the core database so far durable (one sync of its write-ahead log, which is a
    /// single sequence: a crash, even a power loss, keeps a prefix of the writes). The apply path calls it
    /// once per group of applied blocks (see the node's group commit); single writes are not synced.
    pub fn sync_wal(&self) -> Result<()> {
        Ok(self.0.db.sync_wal()?)
    }

    /// Flushes the memtables of every table to SST files (benchmarks measure reads from files this way).
    pub fn flush(&self) -> Result<()> {
        Ok(self.0.db.flush_all()?)
    }

    /// The raw database, for tests that check or corrupt rows.
    #[cfg(feature = "test-utils")]
    pub fn db(&self) -> &CoreDb {
        &self.0.db
    }

    /// Waits for the Next1 of `prev_id` and then for its data, under one overall deadline.
    pub async fn wait_for_next_block(
        &self,
        prev_id: &BlockId,
        timeout: Option<Duration>,
    ) -> Result<(crate::BlockHandle, Arc<ParsedBlock>)> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let next = self.0.connections.wait_for_next1(prev_id, timeout).await?;
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        self.0.components.wait_for_block(&next, left).await
    }

    /// Removes every block below `target` that GC does not keep, on the blocking pool (the block GC's step).
    pub async fn remove_blocks(
        &self,
        target: u32,
        shard_heights: Vec<(regolith_formats::ShardIdent, u32)>,
    ) -> Result<BlockGcStats> {
        let this = self.clone();
        let max = self
            .0
            .config
            .blocks_gc
            .as_ref()
            .map_or(100_000, |c| c.max_blocks_per_batch);
        tokio::task::spawn_blocking(move || {
            gc::remove_blocks(
                &this.0.db,
                this.0.handles.cache(),
                this.0.components.block_cache(),
                target,
                &shard_heights,
                max,
            )
        })
        .await
        .map_err(|e| StorageError::Inconsistent(format!("block GC task failed: {e}")))?
    }

    /// Removes outdated blocks below `target`, clamped so that no uncommitted archive loses a block (§9.1) and
    /// no block after the state checkpoint goes.
    pub async fn remove_outdated_blocks(&self, target: u32) -> Result<BlockGcStats> {
        let mut target = target;
        if self.0.config.archives.enabled {
            if let Some(x) = self.0.archives.first_uncommitted_archive_id() {
                target = target.min(x.saturating_sub(1));
            }
        }
        // The blocks after the state checkpoint are what a restart applies again to restore the states
        // (state.md §7.3).
        if let Some(checkpoint) = self.0.cells.checkpoint()? {
            target = target.min(checkpoint.seqno);
        }
        // A persistent save reads the blocks of each chain's diff tail: block GC waits for it.
        if self.0.cells.pending_persistent()?.is_some() {
            return Ok(BlockGcStats::default());
        }
        if target == 0 {
            return Ok(BlockGcStats::default());
        }
        let mc = self
            .0
            .components
            .find_mc_block_data(target)?
            .ok_or_else(|| {
                StorageError::Inconsistent(format!(
                    "GC target mc block {target} has no stored data"
                ))
            })?;
        let heights = mc.shard_heights()?;
        self.remove_blocks(target, heights).await
    }
}
