//! Setting up a data directory with the fixture chain (zerostate + archive_1), serving it, and syncing a
//! fresh node from such servers: for the benchmarks and the in-process network tests.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use regolith_storage::{NewBlockMeta, Storage};
use tycho_types::models::{BlockId, ShardIdent};
use tycho_types::prelude::HashBytes;

use crate::config::{DataDir, NodeConfig};
use crate::run::{start_node, Node};
use crate::sync::SyncStats;

/// How long [`sync_fresh_node`] waits for the target.
const SYNC_DEADLINE: Duration = Duration::from_secs(300);

fn loopback() -> std::net::SocketAddr {
    std::net::SocketAddr::from(([127, 0, 0, 1], 0))
}

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
    let crate::start::Started { storage, queue, .. } =
        crate::start::start(&data.root, &config, Default::default()).await?;
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

/// Nodes on loopback QUIC serving the fixture chain, each from a data dir of its own, each knowing the ones
/// started before it.
pub struct FixtureServers {
    /// The serving nodes.
    pub nodes: Vec<Node>,
    dirs: Vec<tempfile::TempDir>,
}

impl FixtureServers {
    /// Starts `count` servers. With `archived`, archive 1 is committed (a client can download it);
    /// otherwise it is still open and served block by block.
    pub async fn start(fixtures: &Path, count: usize, archived: bool) -> Result<Self> {
        let mut nodes: Vec<Node> = Vec::new();
        let mut dirs = Vec::new();
        for _ in 0..count {
            let dir = tempfile::tempdir()?;
            let (data, mut config, storage) =
                import_fixture_chain(dir.path(), fixtures, loopback()).await?;
            if archived {
                start_next_archive(&storage).await?;
            }
            (config.overlay, config.dht) = regolith_rpc::network::quick_discovery();
            let mut global = data.load_global_config()?;
            for other in &nodes {
                global.bootstrap_peers.push(serde_json::to_value(
                    other.network.signed_peer_info(Duration::from_secs(3600)),
                )?);
            }
            nodes.push(start_node(&config, &global, storage)?);
            dirs.push(dir);
        }
        Ok(Self { nodes, dirs })
    }

    /// Stops the servers and removes their data.
    pub async fn shutdown(self) {
        for node in &self.nodes {
            node.shutdown().await;
        }
        drop(self.dirs);
    }
}

/// A finished [`sync_fresh_node`].
pub struct SyncedNode {
    /// The synced node's storage.
    pub storage: Storage,
    /// Its sync counters.
    pub stats: Arc<SyncStats>,
    /// From the sync's start to the target.
    pub elapsed: Duration,
}

/// Initialises a fresh data dir at `root` from the fixture zerostate and syncs it from `servers` (its
/// bootstrap peers) until its last applied mc block is `target`; the node is stopped when this returns.
pub async fn sync_fresh_node(
    root: &Path,
    fixtures: &Path,
    servers: &[Node],
    target: u32,
) -> Result<SyncedNode> {
    let data = DataDir::new(root);
    crate::init::init(&data, &fixtures.join("zerostate.boc"), &Default::default())?;
    let mut config = data.load_node_config()?;
    config.listen_address = loopback();
    config.metrics_address = None;
    (config.overlay, config.dht) = regolith_rpc::network::quick_discovery();
    let mut global = data.load_global_config()?;
    global.bootstrap_peers = servers
        .iter()
        .map(|s| serde_json::to_value(s.network.signed_peer_info(Duration::from_secs(3600))))
        .collect::<Result<_, _>>()?;
    let crate::start::Started { storage, queue, .. } =
        crate::start::start(&data.root, &config, Default::default()).await?;
    let node = start_node(&config, &global, storage.clone())?;
    let client = crate::run::rpc_client(&node, &config)?;
    tokio::time::timeout(
        Duration::from_secs(60),
        client.overlay_client().wait_for_peers(
            servers
                .len()
                .min(config.public_overlay_client.neighbors.keep),
        ),
    )
    .await
    .context("the servers did not become neighbours in 60 s")?;
    let sync = crate::sync::Sync::new(storage.clone(), queue, client, &data.root)?;
    let stats = sync.stats();
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let started = Instant::now();
    let task = tokio::spawn(sync.run(stop_rx));
    let reached = loop {
        let last = storage
            .node_state()
            .load_last_mc_block_id()?
            .map_or(0, |id| id.seqno);
        if last >= target {
            break Ok(started.elapsed());
        }
        if started.elapsed() > SYNC_DEADLINE {
            break Err(last);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let _ = stop.send(true);
    let _ = task.await;
    node.shutdown().await;
    match reached {
        Ok(elapsed) => Ok(SyncedNode {
            storage,
            stats,
            elapsed,
        }),
        Err(last) => bail!(
            "the sync reached only mc {last} in {} s",
            SYNC_DEADLINE.as_secs()
        ),
    }
}
