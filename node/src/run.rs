//! The running node (what `regolith run` runs): its main job. Starts the node's data ([`crate::start`]: the storage with its
//! startup check and archive recovery, the internal queue's start procedure and GC task, the boot), starts
//! tycho-network (QUIC, DHT, overlay service,
//! peer resolver) with the blockchain public overlay serving blockchain RPC from the storage, exposes
//! Prometheus metrics, runs block GC on schedule and stays up until SIGINT/SIGTERM. Blocks come from the sync
//! (peers), or on a live node (`live.json`, [`crate::live`]) from the node's own generated chain. What the
//! operator should see (the start banner, a finished cold boot) goes to the caller's [`RunEvents`].

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use regolith_rpc::network::{now_sec, BlockchainNetwork, NetworkSettings};
use regolith_rpc::providers::S3Settings;
use regolith_rpc::{
    BlockchainRpcService, HybridProvider, NoopBroadcastListener, RpcDataProvider, S3Provider,
    StorageProvider,
};
use regolith_storage::Storage;

use crate::config::{DataDir, GlobalConfig, NodeConfig};

/// A started node: storage and network. Dropping it does not stop the network; call [`Node::shutdown`].
pub struct Node {
    /// The block storage.
    pub storage: Storage,
    /// The network stack with the blockchain overlay.
    pub network: BlockchainNetwork,
    /// The blockchain overlay id.
    pub overlay_id: [u8; 32],
    /// The bootstrap peers it started with (valid signed infos).
    pub bootstrap_peers: Vec<tycho_network::PeerInfo>,
}

/// `<data>/peers.json`: the overlay client's bans and recent neighbours.
pub const PEERS_FILE: &str = "peers.json";

/// Reads parallelism of persistent-state files.
const STATE_READS: usize = 8;

/// The data provider §4.4 asks for: storage, with S3 behind it when both S3 sections exist.
pub fn make_provider(config: &NodeConfig, storage: &Storage) -> Result<Arc<dyn RpcDataProvider>> {
    let local = StorageProvider::new(storage.clone(), STATE_READS);
    match (&config.s3_client, &config.blockchain_rpc_service.s3_proxy) {
        (Some(client), Some(proxy)) => {
            let s3 = S3Provider::new(
                &S3Settings {
                    client: client.clone(),
                    max_frame_size: config.network.max_frame_size.as_u64(),
                },
                Some(proxy),
            )?
            .with_storage_key_blocks(storage.clone());
            if s3.chunk_size() != regolith_rpc::providers::STORAGE_CHUNK_SIZE {
                tracing::warn!(
                    s3_chunk = s3.chunk_size(),
                    storage_chunk = regolith_rpc::providers::STORAGE_CHUNK_SIZE,
                    "storage and S3 chunk sizes differ: an object must not be served by both"
                );
            }
            tracing::info!(endpoint = %client.endpoint, bucket = %client.bucket, "serving archives and states from storage with S3 fallback");
            Ok(Arc::new(HybridProvider::new(local, Some(s3))))
        }
        _ => Ok(Arc::new(local)),
    }
}

/// Starts the serving part of a node over an open storage (used by `run` and in-process tests).
pub fn start_node(config: &NodeConfig, global: &GlobalConfig, storage: Storage) -> Result<Node> {
    let service = make_service(config, &storage)?;
    start_node_with_service(config, global, storage, service)
}

/// The blockchain RPC service of a node over `storage`, as `config` sets it up; received external messages
/// are dropped after validation.
pub fn make_service(config: &NodeConfig, storage: &Storage) -> Result<BlockchainRpcService> {
    make_service_with_listener(config, storage, NoopBroadcastListener)
}

/// [`make_service`] handing the valid external messages it receives to `listener`.
pub fn make_service_with_listener(
    config: &NodeConfig,
    storage: &Storage,
    listener: impl regolith_rpc::BroadcastListener,
) -> Result<BlockchainRpcService> {
    let provider = make_provider(config, storage)?;
    Ok(BlockchainRpcService::builder()
        .with_storage(storage.clone())
        .with_provider(provider)
        .with_broadcast_listener(listener)
        .with_config(config.blockchain_rpc_service.clone())
        .with_max_frame_size(config.network.max_frame_size.as_u64() as usize)
        .build())
}

/// [`start_node`] with a given service (the hostile benchmarks put a forging layer in front of the real one).
pub fn start_node_with_service<S>(
    config: &NodeConfig,
    global: &GlobalConfig,
    storage: Storage,
    service: S,
) -> Result<Node>
where
    S: tycho_network::Service<
            tycho_network::ServiceRequest,
            QueryResponse = tycho_network::Response,
        > + Send
        + Sync
        + Clone
        + 'static,
{
    config.validate()?;
    let secret_key = config.secret_key()?;
    let own_id = regolith_rpc::network::peer_id_of(&secret_key);
    let now = now_sec();
    let bootstrap_peers = global
        .parse_bootstrap_peers()?
        .into_iter()
        .filter(|peer| {
            if peer.id == own_id {
                return false;
            }
            let valid = peer.verify(now);
            if !valid {
                tracing::warn!(peer_id = %peer.id, "skipping an invalid or expired bootstrap peer");
            }
            valid
        })
        .collect::<Vec<_>>();
    let overlay_id = crate::init::overlay_id(&global.zerostate);
    // With port 0 the crate announces the address it actually bound.
    let announced = config.announced_address();
    let network = BlockchainNetwork::start(
        NetworkSettings {
            bind_address: config.listen_address,
            remote_address: (announced.port() != 0).then_some(announced),
            secret_key,
            network: config.network.clone(),
            dht: config.dht.clone(),
            overlay: config.overlay.clone(),
            peer_resolver: config.peer_resolver.clone(),
            bootstrap_peers: bootstrap_peers.clone(),
            overlay_id,
            rate_limits: config.blockchain_rpc_service.rate_limits.clone(),
        },
        service,
    )?;
    Ok(Node {
        storage,
        network,
        overlay_id,
        bootstrap_peers,
    })
}

impl Node {
    /// Stops the network.
    pub async fn shutdown(&self) {
        self.network.network.shutdown().await;
    }
}

/// The blockchain RPC client of a started node: its overlay client over the node's own network.
pub fn rpc_client(
    node: &Node,
    config: &NodeConfig,
) -> Result<regolith_rpc::client::BlockchainRpcClient> {
    // Bans and the neighbours used last live in the data dir: they outlast neighbour refreshes and
    // restarts, and the bootstrap and recent peers are always tried, whatever the overlay's entries say.
    let path = node.storage.config().root_dir.join(PEERS_FILE);
    let book =
        regolith_rpc::client::PeerBook::open(&path, &config.public_overlay_client.neighbors)?
            .with_bootstrap_peers(node.bootstrap_peers.iter().cloned());
    let overlay = regolith_rpc::client::PublicOverlayClient::with_peer_book(
        node.network.network.clone(),
        node.network.overlay.clone(),
        config.public_overlay_client.clone(),
        Arc::new(book),
    );
    regolith_rpc::client::BlockchainRpcClient::builder()
        .with_overlay_client(overlay)
        .with_config(config.blockchain_rpc_client.clone())
        .with_max_frame_size(config.network.max_frame_size.as_u64())
        .build()
        .context("cannot build the RPC client")
}

/// What a node that serves tells whoever started it (the command line prints it as the start banner).
#[derive(Debug, Clone)]
pub struct NodeInfo {
    /// The data directory.
    pub data_root: std::path::PathBuf,
    /// The last applied mc block at the start.
    pub last_applied_mc_seqno: u32,
    /// The QUIC address it listens on.
    pub quic_address: std::net::SocketAddr,
    /// Its peer id.
    pub peer_id: tycho_network::PeerId,
    /// The blockchain overlay id.
    pub overlay_id: [u8; 32],
    /// Its signed peer info (for another node's `bootstrap_peers`).
    pub peer_info: tycho_network::PeerInfo,
    /// The metrics endpoint, when on.
    pub metrics_address: Option<std::net::SocketAddr>,
    /// The HTTP API, when on.
    pub api_address: Option<std::net::SocketAddr>,
    /// The live chain it makes (one line), when it is a live node.
    pub live_chain: Option<String>,
}

/// What [`run`] reports as it goes, besides its logs.
pub trait RunEvents: Send + Sync + 'static {
    /// The node has started and serves.
    fn started(&self, node: &NodeInfo);
    /// A cold boot finished: the sync goes on from its block.
    fn cold_booted(&self, report: &crate::boot::cold_boot::BootReport);
}

/// Runs until a shutdown signal. `boot` overrides node.json `boot` for this start.
pub async fn run(
    data: &DataDir,
    boot: Option<crate::boot::cold_boot::BootConfig>,
    events: Arc<dyn RunEvents>,
) -> Result<()> {
    // Handlers first: a signal that arrives while the node starts must stop it cleanly, not kill it.
    let shutdown = Shutdown::install()?;
    let node_config = data.load_node_config()?;
    let global = data.load_global_config()?;
    let live = crate::live::LiveConfig::load(data)?;
    if let Some(address) = node_config.metrics_address {
        crate::metrics_endpoint::install(address).with_context(|| {
            format!(
                "the metrics address {address} is set by `metrics_address` in {} (another node on this \
                 machine? `regolith init --metrics ADDR|off` picks another)",
                data.node_config().display()
            )
        })?;
    }
    let crate::start::Started {
        storage,
        queue,
        queue_start,
        last_applied: last_mc,
    } = crate::start::start(
        &data.root,
        &node_config,
        crate::start::StartOptions {
            queue_gc: true,
            boot: crate::start::Boot::Genesis,
        },
    )
    .await?;
    let stats = storage.open_stats();
    // External messages from peers and from the HTTP API go to the validator targets.
    let relay = crate::external_messages::ExternalRelay::new();
    // The account API (and `POST /v1/messages`) reads the newest states the pipeline publishes.
    let newest_states = regolith_state::NewestStates::default();
    let synced = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let index = match (node_config.api_address, node_config.api.transactions_index) {
        (Some(_), true) => {
            let path = data.root.join("api");
            Some(
                regolith_api::index::TransactionsIndex::open(&path).with_context(|| {
                    format!("cannot open the transactions index {}", path.display())
                })?,
            )
        }
        _ => None,
    };
    let api = match node_config.api_address {
        Some(address) => {
            let backend = crate::account_api::NodeApi::new(
                storage.clone(),
                newest_states.clone(),
                synced.clone(),
                relay.clone(),
                index.clone(),
            );
            let config = node_config.api.at(address);
            let server = regolith_api::serve(
                config,
                backend,
                crate::account_api::messages_route(relay.clone()),
            )
            .await
            .with_context(|| {
                format!(
                    "cannot serve the HTTP API on {address} (set by `api_address` in {}; another node on \
                     this machine? `regolith init --api ADDR|off` picks another)",
                    data.node_config().display()
                )
            })?;
            tracing::info!(%address, "HTTP API: JSON-RPC and protobuf on /, /rpc, /proto; POST /v1/messages");
            Some(server)
        }
        None => None,
    };
    let service = make_service_with_listener(&node_config, &storage, relay.clone())?;
    let node = start_node_with_service(&node_config, &global, storage.clone(), service).map_err(|e| {
        match e.downcast_ref::<regolith_rpc::network::NetworkError>() {
            Some(regolith_rpc::network::NetworkError::Bind { address, .. }) => anyhow::anyhow!(
                "cannot listen on {address} (QUIC): {}\n(the address is set by `listen_address` in {}; \
                 another node on this machine? `regolith init --listen ADDR` picks another)",
                e.root_cause(),
                data.node_config().display()
            ),
            _ => e.context("cannot start the network"),
        }
    })?;
    let peer_info = node.network.signed_peer_info(node_config.peer_info_ttl);
    tracing::info!(
        data = %data.root.display(),
        zerostate = %global.zerostate.as_block_id(),
        overlay_id = %hex::encode(node.overlay_id),
        peer_id = %node.network.peer_id(),
        address = %node.network.network.local_addr(),
        last_applied_mc = last_mc.seqno,
        orphaned_flags = stats.consistency.orphaned_flags_count,
        restored_flags = stats.consistency.restored_flags_count,
        archives = stats.archives.archive_count,
        queue_reapplied = queue_start.reapplied_diffs,
        "node started"
    );
    events.started(&NodeInfo {
        data_root: data.root.clone(),
        last_applied_mc_seqno: last_mc.seqno,
        quic_address: node.network.network.local_addr(),
        peer_id: node.network.peer_id(),
        overlay_id: node.overlay_id,
        peer_info: peer_info.clone(),
        metrics_address: node_config.metrics_address,
        api_address: node_config.api_address,
        live_chain: live.as_ref().map(crate::live::LiveConfig::describe),
    });

    metrics::gauge!("regolith_sync_last_applied_mc_seqno").set(f64::from(last_mc.seqno));
    let gc = crate::gc::GcTasks::start(&storage);
    let (stop_sync, stop_rx) = tokio::sync::watch::channel(false);
    let client = rpc_client(&node, &node_config)?;
    // The broadcast targets follow the validator set of the newest applied key block.
    tokio::spawn(crate::trust::key_blocks::track_validator_set(
        storage.clone(),
        client.overlay_client().clone(),
        stop_rx.clone(),
    ));
    relay.connect(client.clone());
    if let Some(index) = index {
        tokio::spawn(crate::tx_index::run(
            storage.clone(),
            index,
            newest_states.clone(),
            node_config.api.index_gc,
            stop_rx.clone(),
        ));
    }
    // A live node makes its own chain (live.json); any other node follows its peers.
    let mut task = match live {
        Some(live) => {
            // A live node makes the chain: it is always at the tip.
            synced.store(true, std::sync::atomic::Ordering::Release);
            // It collates the external messages it relays.
            let (externals_tx, externals_rx) =
                tokio::sync::mpsc::channel(crate::live::EXTERNALS_QUEUE);
            relay.deliver_locally_to(externals_tx);
            let producer = crate::live::LiveProducer::new(live, data, &storage, &queue)?
                .with_states(&node_config.states)
                .publishing_states_to(newest_states.clone())
                .taking_externals_from(externals_rx);
            tokio::spawn(producer.run(stop_rx))
        }
        None => {
            let boot = crate::boot::cold_boot::wanted(
                &storage,
                &data.root,
                boot.unwrap_or(node_config.boot),
            )?;
            let boot_parts = (
                storage.clone(),
                queue.clone(),
                client.clone(),
                data.root.clone(),
            );
            let sync = crate::sync::Sync::new(storage.clone(), queue.clone(), client, &data.root)?
                .with_config(&node_config.sync)
                .with_states(&node_config.states)
                .publishing_states_to(newest_states.clone())
                .marking_synced(synced.clone());
            tokio::spawn(async move {
                if boot {
                    // A boot that fails (no neighbour could prove a key block or serve a state that
                    // checks out) is tried again; the liars are punished meanwhile.
                    let (storage, queue, client, root) = boot_parts;
                    let mut stop = stop_rx.clone();
                    loop {
                        let booted = tokio::select! {
                            booted = boot_when_connected(&storage, &queue, &client, &root, &*events) => booted,
                            _ = stop.changed() => return Ok(()),
                        };
                        match booted {
                            Ok(()) => break,
                            Err(e) => tracing::warn!(
                                error = %format!("{e:#}"),
                                "cold boot failed; trying again in 5 s"
                            ),
                        }
                        tokio::select! {
                            _ = tokio::time::sleep(Duration::from_secs(5)) => {}
                            _ = stop.changed() => return Ok(()),
                        }
                    }
                }
                sync.run(stop_rx).await;
                Ok(())
            })
        }
    };
    let ended = tokio::select! {
        _ = shutdown.wait() => None,
        ended = &mut task => Some(ended),
    };
    tracing::info!("shutting down");
    let outcome = match ended {
        // The live chain failed (its replay, or a block the pipeline refused): the node stops with its error.
        Some(ended) => ended
            .map_err(|e| anyhow::anyhow!("the block task ended: {e}"))
            .and_then(|r| r),
        None => {
            // The sync (or the live chain) finishes the group it is applying: a stop never leaves half a
            // step for the start check.
            let _ = stop_sync.send(true);
            match tokio::time::timeout(Duration::from_secs(30), task).await {
                Ok(Ok(result)) => result,
                Ok(Err(e)) => Err(anyhow::anyhow!("the block task ended: {e}")),
                Err(_) => {
                    tracing::warn!("the block task did not stop in 30 s");
                    Ok(())
                }
            }
        }
    };
    if let Some(api) = api {
        api.shutdown().await;
    }
    gc.stop().await;
    node.shutdown().await;
    queue.stop_gc();
    storage.archives().wait_for_archive_commit().await;
    outcome
}

/// Waits for a neighbour, then cold-boots (the sync goes on from the boot block, or from genesis when the
/// network serves no persistent state).
async fn boot_when_connected(
    storage: &Storage,
    queue: &crate::queue_sync::NodeQueue,
    client: &regolith_rpc::client::BlockchainRpcClient,
    root: &std::path::Path,
    events: &dyn RunEvents,
) -> Result<()> {
    while client.overlay_client().neighbours().is_empty() {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    if let Some(report) = crate::boot::cold_boot::cold_boot(storage, queue, client, root).await? {
        tracing::info!(
            block = %report.block,
            key_blocks = report.key_blocks,
            states = report.states,
            bytes = report.bytes,
            elapsed_s = report.elapsed.as_secs_f64(),
            "cold boot finished"
        );
        events.cold_booted(&report);
    }
    Ok(())
}

/// SIGINT and SIGTERM, installed before the node reports that it runs.
pub struct Shutdown {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

impl Shutdown {
    /// Installs the handlers.
    pub fn install() -> Result<Self> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Self {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        })
    }

    /// Resolves at the first SIGINT or SIGTERM.
    pub async fn wait(mut self) {
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
        }
    }
}
