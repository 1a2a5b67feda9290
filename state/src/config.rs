//! The `states` section of a node's config (state.md §7.3, §7.5).

use serde::{Deserialize, Serialize};

/// How the node keeps its states.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StatesConfig {
    /// Store the states at every mc block whose seqno is a multiple of this (and at every key block, and
    /// when `max_fresh_cells` is reached). A restart re-applies the blocks after the last one stored, and
    /// block GC keeps them.
    pub checkpoint_every: u32,
    /// Store the states once the blocks applied since the last checkpoint made this many cells.
    pub max_fresh_cells: u64,
    /// Checkpoints whose states GC keeps (at least 1).
    pub keep_checkpoints: u32,
    /// Cell rows per batch of a state import (genesis, cold boot, `import --states`); the import resumes
    /// from the last batch written after a crash.
    pub import_batch_cells: u32,
}

impl Default for StatesConfig {
    fn default() -> Self {
        Self {
            checkpoint_every: 100,
            max_fresh_cells: 200_000,
            keep_checkpoints: 2,
            import_batch_cells: 100_000,
        }
    }
}

impl StatesConfig {
    /// Checks what serde cannot: every period and count is at least 1.
    pub fn validate(&self) -> Result<(), crate::StateError> {
        let zero = [
            ("states.checkpoint_every", self.checkpoint_every == 0),
            ("states.max_fresh_cells", self.max_fresh_cells == 0),
            ("states.keep_checkpoints", self.keep_checkpoints == 0),
            ("states.import_batch_cells", self.import_batch_cells == 0),
        ];
        match zero.iter().find(|(_, is_zero)| *is_zero) {
            Some((name, _)) => Err(crate::StateError::Inconsistent(format!(
                "{name} must be at least 1"
            ))),
            None => Ok(()),
        }
    }

    /// Whether the states are stored at mc block `seqno` (a key block or not), given the cells made since
    /// the last checkpoint.
    pub fn is_checkpoint(&self, seqno: u32, is_key_block: bool, fresh_cells: u64) -> bool {
        is_key_block
            || seqno.is_multiple_of(self.checkpoint_every.max(1))
            || fresh_cells >= self.max_fresh_cells
    }
}
