//! regolith block storage (storage.md): block handles with atomic meta flags persisted through a merge
//! operator, the weak-ref handle cache, the key-block index, connections with waiting, block components,
//! archives, block GC and node state, all in the `core` RocksDB under the data directory.
//!
//! Open it with [`Storage::open`]; everything else hangs off the returned [`Storage`].

pub mod archive;
mod block_cache;
pub mod block_components;
pub mod block_connection;
pub mod block_handle;
pub mod block_meta;
pub mod cells;
pub mod config;
mod consistency;
pub mod error;
pub mod files;
mod gc;
mod migration;
pub mod node_state;
pub mod parsed;
pub mod persistent_state;
mod storage;
mod subscriptions;
// The raw database and its tables are the crate's own; tests that check or corrupt rows reach them with
// `test-utils` (which also arms the fail points).
regolith_kv::test_hook_modules!(db, tables);

pub use archive::{ArchiveId, ArchiveInfo, ArchiveStorage, ARCHIVE_CHUNK_SIZE};
pub use block_components::{BlockComponentStorage, StoreResult};
pub use block_connection::{BlockConnectionStorage, Direction};
pub use block_handle::{
    BlockHandle, BlockHandleStorage, HandleCache, HandleStatus, KeyBlocksDirection,
    MaybeExistingHandle, WeakBlockHandle,
};
pub use block_meta::{BlockFlags, BlockMeta, MetaSnapshot, NewBlockMeta};
pub use cells::{CellBatch, CellStorage};
pub use config::StorageConfig;
pub use consistency::ConsistencyStats;
pub use error::{Result, StorageError};
pub use gc::BlockGcStats;
pub use migration::MigrationStats;
pub use parsed::ParsedBlock;
pub use persistent_state::{
    PersistentStateRecord, PersistentStateStorage, StatePartRecord, StatesOpenStats,
    STATE_CHUNK_SIZE,
};
pub use regolith_formats::persistent_state::{StateKind, StatePart};
pub use regolith_kv::KvError;
pub use storage::{OpenStats, Storage};

/// Registers the storage's metrics with the installed recorder, so that a dashboard shows 0, not "no data",
/// before their first event.
pub fn register_metrics() {
    let _ = metrics::counter!("regolith_archives_committed_total");
    let _ = metrics::gauge!("regolith_storage_dangling_block_ids");
    let _ = metrics::gauge!("regolith_storage_quarantined_archive_files");
}
