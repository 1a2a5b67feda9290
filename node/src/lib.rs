//! The regolith node: configuration, `init`, the start of a node ([`start`]), the apply pipeline every block
//! goes through ([`apply`]), `import` (blocks and the internal queue), `inspect`, `run` (the serving node) with
//! its sync, the receiver journal's CLI and benchmarks.
//! The `regolith` binary (`main.rs`) is a thin CLI over these modules; integration tests use them in-process.

pub mod apply;
pub mod bench;
pub mod block_check;
pub mod block_ref;
pub mod chain_cmd;
mod checked_batch;
pub mod cold_boot;
pub mod config;
mod crash;
pub mod devnet;
pub mod external_messages;
pub mod fixture;
pub mod gc;
pub mod genesis;
pub mod group_commit;
pub mod import;
pub mod init;
pub mod inspect;
pub mod key_blocks;
pub mod ledger_cmd;
pub mod live;
pub mod metrics_endpoint;
pub mod p2p;
pub mod progress;
pub mod proofs;
pub mod queue_state;
pub mod queue_sync;
pub mod relay;
pub mod run;
pub mod start;
pub mod state_import;
pub mod sync;

use anyhow::Result;

/// Opens the block storage for writing, explaining a held lock, and completes the genesis data (zerostate
/// proof and states) of a data dir made by an older build.
pub fn open_storage(config: regolith_storage::StorageConfig) -> Result<regolith_storage::Storage> {
    let root = config.root_dir.clone();
    let storage = open_storage_only(config)?;
    genesis::ensure_at_start(&storage, &root)?;
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
