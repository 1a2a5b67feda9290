//! Node state (`state` table): last applied mc block, init mc block, zerostate id and proof, db version.

use std::sync::Arc;

use regolith_formats::{decode_block_id, encode_block_id, BlockId};

use crate::db::CoreDb;
use crate::error::{Result, StorageError};
use crate::tables::{NameKey, RawBytes, State};

/// The key of the last applied mc block.
pub(crate) const LAST_MC_BLOCK: NameKey = NameKey("last_mc_block");
const INIT_MC_BLOCK: NameKey = NameKey("init_mc_block");
const ZEROSTATE_ID: NameKey = NameKey("zerostate_id");
/// The key of the zerostate proof.
pub const ZEROSTATE_PROOF: NameKey = NameKey("zerostate_proof");
const DB_VERSION: NameKey = NameKey("db_version");

/// The version this build writes and accepts. 0.2: `block_handles` values carry the file hash.
pub const DB_VERSION_CURRENT: [u8; 3] = [0, 2, 0];
/// The layout (major.minor) this build migrates from when it opens a data dir for writing.
const DB_VERSION_MIGRATED: [u8; 2] = [0, 1];

/// The block id stored under `key` in the `state` table.
pub(crate) fn load_id(db: &CoreDb, key: NameKey) -> Result<Option<BlockId>> {
    match db.get::<State>(&key)? {
        Some(raw) => decode_block_id(&raw.0)
            .map(Some)
            .map_err(|e| StorageError::corruption(format!("node state {}", key.0), e)),
        None => Ok(None),
    }
}

/// A block id as a `state` value (80 bytes LE).
pub(crate) fn id_value(id: &BlockId) -> RawBytes {
    RawBytes(encode_block_id(id).to_vec())
}

/// What the stored db version asks of the open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum VersionCheck {
    /// The current layout (or a fresh database, now marked with it).
    Current,
    /// An older layout this build migrates from.
    Migrate([u8; 3]),
}

/// Typed access to the node-state table.
pub struct NodeStateStorage {
    db: Arc<CoreDb>,
}

impl NodeStateStorage {
    pub(crate) fn new(db: Arc<CoreDb>) -> Self {
        Self { db }
    }

    fn get_id(&self, key: NameKey) -> Result<Option<BlockId>> {
        load_id(&self.db, key)
    }

    fn set_id(&self, key: NameKey, id: &BlockId) -> Result<()> {
        Ok(self.db.put::<State>(&key, &id_value(id))?)
    }

    /// The last applied mc block.
    pub fn load_last_mc_block_id(&self) -> Result<Option<BlockId>> {
        self.get_id(LAST_MC_BLOCK)
    }

    /// Records the last applied mc block: the last write of an applied block group. Like the group's other
    /// writes it is not synced; [`crate::Storage::sync_wal`] makes it, and everything before it, durable.
    pub fn store_last_mc_block_id(&self, id: &BlockId) -> Result<()> {
        self.set_id(LAST_MC_BLOCK, id)
    }

    /// The mc block the node was initialised from.
    pub fn load_init_mc_block_id(&self) -> Result<Option<BlockId>> {
        self.get_id(INIT_MC_BLOCK)
    }

    /// Records the init mc block.
    pub fn store_init_mc_block_id(&self, id: &BlockId) -> Result<()> {
        self.set_id(INIT_MC_BLOCK, id)
    }

    /// The zerostate id.
    pub fn load_zerostate_id(&self) -> Result<Option<BlockId>> {
        self.get_id(ZEROSTATE_ID)
    }

    /// Records the zerostate id.
    pub fn store_zerostate_id(&self, id: &BlockId) -> Result<()> {
        self.set_id(ZEROSTATE_ID, id)
    }

    /// The zerostate proof bytes.
    pub fn load_zerostate_proof(&self) -> Result<Option<Vec<u8>>> {
        Ok(self.db.get::<State>(&ZEROSTATE_PROOF)?.map(|v| v.0))
    }

    /// Records the zerostate proof bytes.
    pub fn store_zerostate_proof(&self, proof: &[u8]) -> Result<()> {
        Ok(self
            .db
            .put::<State>(&ZEROSTATE_PROOF, &RawBytes(proof.to_vec()))?)
    }

    /// Checks the stored db version (writing the current one into a fresh database). A layout this build
    /// migrates from is [`VersionCheck::Migrate`]; any other is `UnsupportedVersion`.
    pub(crate) fn check_db_version(&self, read_only: bool) -> Result<VersionCheck> {
        match self.db.get::<State>(&DB_VERSION)? {
            None if read_only => Ok(VersionCheck::Current),
            None => {
                self.store_db_version()?;
                Ok(VersionCheck::Current)
            }
            Some(raw) => {
                let found: [u8; 3] = raw.0.as_slice().try_into().map_err(|_| {
                    StorageError::corruption("db_version", format!("{} bytes", raw.0.len()))
                })?;
                if found[..2] == DB_VERSION_CURRENT[..2] {
                    Ok(VersionCheck::Current)
                } else if found[..2] == DB_VERSION_MIGRATED {
                    Ok(VersionCheck::Migrate(found))
                } else {
                    Err(StorageError::UnsupportedVersion {
                        found,
                        expected: DB_VERSION_CURRENT,
                    })
                }
            }
        }
    }

    /// Marks the database with the current version (a fresh one, or one just migrated).
    pub(crate) fn store_db_version(&self) -> Result<()> {
        Ok(self
            .db
            .put::<State>(&DB_VERSION, &RawBytes(DB_VERSION_CURRENT.to_vec()))?)
    }
}
