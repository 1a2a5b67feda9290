//! The regolith node's runtime, as a library: its configuration ([`config`], composed from the sections the
//! modules below declare), the start of a node in order ([`start`]), boot ([`boot`]: genesis, cold boot, state
//! imports), the chain of trust it checks blocks against ([`trust`]: proofs and key blocks), the block sources
//! ([`sync`] from peers, [`live`] from its own generated chain, [`apply::import`] from archive files), the apply
//! pipeline every block goes through ([`apply`], with its group commit), the internal queue kept in step
//! ([`queue_sync`]), GC schedules ([`gc`]), external messages, the account API's data source ([`account_api`]), the metrics endpoint and the running node
//! ([`run`]).
//!
//! A block's path: a source forms groups (`sync/`, `live.rs`, `apply/import.rs`) → each block is checked once
//! (`sync/block_check.rs`, `apply/group.rs`) → the group is applied and stored (`apply/mod.rs`) → made durable
//! with the queue committed on it (`apply/group_commit.rs`, `queue_sync.rs`) → served (`run.rs`, regolith-rpc).
//!
//! The `regolith` command line (regolith-cli) is a thin layer over this crate; nothing here parses arguments.

pub mod account_api;
pub mod apply;
pub mod boot;
pub mod boot_record;
pub mod config;
mod crash;
pub mod external_messages;
pub mod files;
pub mod gc;
pub mod init;
pub mod live;
pub mod metrics_endpoint;
pub mod progress;
pub mod queue_sync;
pub mod run;
pub mod start;
mod stored_group;
pub mod sync;
pub mod trust;
pub mod tx_index;

use anyhow::Result;

/// Opens the block storage for writing, explaining a held lock, and completes the genesis data (zerostate
/// proof and states) of a data dir made by an older build.
pub fn open_storage(config: regolith_storage::StorageConfig) -> Result<regolith_storage::Storage> {
    let root = config.root_dir.clone();
    let storage = open_storage_only(config)?;
    boot::genesis::ensure_at_start(&storage, &root)?;
    Ok(storage)
}

fn open_storage_only(config: regolith_storage::StorageConfig) -> Result<regolith_storage::Storage> {
    let root = config.root_dir.clone();
    regolith_storage::Storage::open(config).map_err(|e| {
        if e.is_locked() {
            anyhow::anyhow!(
                "{e}\n(is a regolith node already running on {}? stop it first)",
                root.display()
            )
        } else {
            e.into()
        }
    })
}
