//! `<data>/boot.json`: the record of a cold boot (its block, whether it began to store, whether it finished).
//! The cold boot writes it; the queue's start and `inspect` read it.

use std::path::Path;

use anyhow::{anyhow, Context, Result};
use regolith_formats::BlockId;
use serde::{Deserialize, Serialize};

/// `<data>/boot.json`: the cold boot's block, and whether the boot finished.
pub const BOOT_FILE: &str = "boot.json";

/// `<data>/boot.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct BootRecord {
    /// The boot block (an mc key block), text form.
    pub block: String,
    /// Whether the boot finished (the block is the node's first applied mc block).
    pub complete: bool,
    /// Whether the boot has begun to store (from then on a restart resumes this block; before, it chooses
    /// again, so that a block whose states nobody serves any more cannot hold the node).
    #[serde(default)]
    pub storing: bool,
    /// Shard states stored.
    pub shard_states: usize,
    /// Queue states imported.
    pub queue_states: usize,
    /// Compressed state bytes downloaded.
    pub bytes: u64,
}

impl BootRecord {
    /// The record of `data_root`, if the node ever started a cold boot.
    pub fn load(data_root: &Path) -> Result<Option<Self>> {
        let path = data_root.join(BOOT_FILE);
        match std::fs::read(&path) {
            Ok(raw) => Ok(Some(serde_json::from_slice(&raw).with_context(|| {
                format!("{} is not a boot record", path.display())
            })?)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(anyhow!("cannot read {}: {e}", path.display())),
        }
    }

    pub(crate) fn store(&self, data_root: &Path) -> Result<()> {
        crate::files::write_json(&data_root.join(BOOT_FILE), self)
    }

    pub(crate) fn block_id(&self) -> Result<BlockId> {
        regolith_formats::block_id::parse_block_id(&self.block)
            .map_err(|e| anyhow!("{BOOT_FILE}: block {:?}: {e}", self.block))
    }
}
