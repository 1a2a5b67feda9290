//! regolith shard states (state.md, Part B): the cell store with exact reference counts in the `core`
//! database, the newest state of every chain kept in memory and advanced by each block's state update,
//! checkpoints that store those states, states GC, and the checker of every count.
//!
//! - [`StateStore`]: reads stored states lazily ([`StateStore::load_state`]), stores states in one batch
//!   ([`StateStore::write_states`]) and removes one ([`StateStore::remove_state`]).
//! - [`ChainStates`]: the newest states; [`ChainStates::apply`] checks and applies a block's update.
//! - [`import::import_states`]: a whole state imported through a journal, [`import::resume`] after a crash.
//! - [`gc::collect`]: states GC; [`check::check`]: the checker (`regolith inspect state --check`).
//! - [`StateBoc`]: a stored state as the BOC of its persistent state file, read from the rows.
//! - [`NewestStates`]: the newest applied states, published for readers.
//! - [`StatesConfig`]: the `states` section of a node's config.

mod cell_row;
mod chain_states;
pub mod check;
mod config;
mod error;
pub mod gc;
pub mod import;
mod newest;
mod state_boc;
mod store;
mod stored_cell;

pub use chain_states::{top_shard_blocks, ChainState, ChainStates};
pub use check::CheckReport;
pub use config::StatesConfig;
pub use error::StateError;
pub use newest::NewestStates;
pub use state_boc::StateBoc;
pub use store::{PinnedRoot, RemoveStats, StateStore, WriteStats};

/// Registers the state metrics with the installed recorder, so that a dashboard shows 0 before their first
/// event.
pub fn register_metrics() {
    let _ = metrics::counter!("regolith_states_cells_stored_total");
    let _ = metrics::counter!("regolith_states_checkpoints_total");
    let _ = metrics::counter!("regolith_states_checkpoint_bytes_total");
    let _ = metrics::histogram!("regolith_states_checkpoint_seconds");
    let _ = metrics::histogram!("regolith_states_apply_seconds");
    let _ = metrics::counter!("regolith_states_imported_cells_total");
    let _ = metrics::histogram!("regolith_states_import_seconds");
    let _ = metrics::counter!("regolith_states_gc_removed_total");
    let _ = metrics::counter!("regolith_states_gc_cells_deleted_total");
    let _ = metrics::counter!("regolith_states_persistent_bytes_total");
    let _ = metrics::histogram!("regolith_states_persistent_seconds");
    let _ = metrics::counter!("regolith_states_persistent_failures_total");
}
