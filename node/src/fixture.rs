//! Setting up a data directory with the fixture chain (zerostate + archive_1), for the RPC benchmark and
//! the in-process network tests.

use std::path::Path;

use anyhow::{Context, Result};
use regolith_storage::{NewBlockMeta, Storage};
use tycho_types::models::{BlockId, ShardIdent};
use tycho_types::prelude::HashBytes;

use crate::config::{DataDir, NodeConfig};

/// Initialises `root` from `fixtures/zerostate.boc` and imports `fixtures/archive_1.bin`; the node config
/// listens on `listen` with metrics off. Returns the data dir, its config and the open storage.
pub async fn import_fixture_chain(
    root: &Path,
    fixtures: &Path,
    listen: std::net::SocketAddr,
) -> Result<(DataDir, NodeConfig, Storage)> {
    let data = DataDir::new(root);
    crate::init::init(&data, &fixtures.join("zerostate.boc"), &Default::default())?;
    let mut config = data.load_node_config()?;
    config.listen_address = listen;
    config.metrics_address = None;
    let storage = crate::open_storage(config.storage.clone())?;
    let (queue, _) =
        crate::queue_sync::start(data.root.as_path(), &storage, config.internal_queue, false)
            .await?;
    let progress = crate::progress::Progress::new(true);
    crate::import::import_archive(&storage, &queue, &fixtures.join("archive_1.bin"), &progress)
        .await
        .context("importing archive_1")?;
    Ok((data, config, storage))
}

/// Starts archive 101 with a placeholder mc block so that archive 1 is no longer the last one, and waits
/// until archive 1 is committed.
pub async fn start_next_archive(storage: &Storage) -> Result<()> {
    let id = BlockId {
        shard: ShardIdent::MASTERCHAIN,
        seqno: 101,
        root_hash: HashBytes([0xa1; 32]),
        file_hash: HashBytes([0xa2; 32]),
    };
    let (handle, _) = storage.handles().create_or_load_handle(
        &id,
        NewBlockMeta {
            is_key_block: false,
            gen_utime: 0,
            ref_by_mc_seqno: 101,
        },
    )?;
    storage.archives().move_into_archive(&handle, false)?;
    storage.archives().wait_for_archive_commit().await;
    Ok(())
}
