//! Setting up a data directory with a chain (the fixture chain: zerostate + archive_1, or one that
//! `regolith chain generate` wrote), serving it, and syncing a fresh node from such servers: for the
//! benchmarks and the in-process network tests.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use regolith_node::config::{DataDir, NodeConfig};
use regolith_node::run::{start_node, Node};
use regolith_node::sync::SyncStats;
use regolith_storage::{NewBlockMeta, Storage};
use tycho_types::models::{BlockId, ShardIdent};
use tycho_types::prelude::HashBytes;

/// How long [`sync_fresh_node`] waits for the target.
const SYNC_DEADLINE: Duration = Duration::from_secs(300);

fn loopback() -> std::net::SocketAddr {
    std::net::SocketAddr::from(([127, 0, 0, 1], 0))
}

/// The files of a chain: its mc zerostate, its archives in order and the persistent states beside them.
#[derive(Debug, Clone)]
pub struct ChainFiles {
    /// The mc zerostate (`init --zerostate`).
    pub zerostate: PathBuf,
    /// The archives, in the order they are imported.
    pub archives: Vec<PathBuf>,
    /// A directory of persistent state files (`import --states`), if any.
    pub states: Option<PathBuf>,
}

impl ChainFiles {
    /// The fixture chain: `fixtures/zerostate.boc` and `fixtures/archive_1.bin`.
    pub fn fixture(fixtures: &Path) -> Self {
        Self {
            zerostate: fixtures.join("zerostate.boc"),
            archives: vec![fixtures.join("archive_1.bin")],
            states: None,
        }
    }

    /// A chain `regolith chain generate` wrote into `dir`: `zerostate.boc`, `archives/*` in name order,
    /// `states/`.
    pub fn generated(dir: &Path) -> Result<Self> {
        let archives_dir = dir.join("archives");
        let mut archives = std::fs::read_dir(&archives_dir)
            .with_context(|| format!("cannot list {}", archives_dir.display()))?
            .map(|e| Ok(e?.path()))
            .collect::<std::io::Result<Vec<_>>>()
            .with_context(|| format!("cannot list {}", archives_dir.display()))?;
        archives.retain(|p| p.extension().is_some_and(|e| e == "archive"));
        archives.sort();
        if archives.is_empty() {
            bail!("{} holds no archive", archives_dir.display());
        }
        let states = dir.join("states");
        Ok(Self {
            zerostate: dir.join("zerostate.boc"),
            archives,
            states: states.is_dir().then_some(states),
        })
    }

    /// The bytes of every block BOC in the archives, and how many blocks they hold.
    pub fn block_bytes(&self) -> Result<(u64, u64)> {
        use regolith_formats::archive::{ArchiveEntryType, ArchiveReader};
        let (mut bytes, mut blocks) = (0u64, 0u64);
        for path in &self.archives {
            let file = std::fs::File::open(path)
                .with_context(|| format!("cannot open {}", path.display()))?;
            let mut reader = ArchiveReader::new_compressed(std::io::BufReader::new(file))
                .with_context(|| format!("{}", path.display()))?;
            while let Some(e) = reader
                .next_entry()
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?
            {
                if e.ty == ArchiveEntryType::Block {
                    bytes += e.data.len() as u64;
                    blocks += 1;
                }
            }
        }
        Ok((bytes, blocks))
    }
}

/// Initialises `root` from `fixtures/zerostate.boc` and imports `fixtures/archive_1.bin`; the node config
/// listens on `listen` with metrics off. Returns the data dir, its config and the open storage.
pub async fn import_fixture_chain(
    root: &Path,
    fixtures: &Path,
    listen: std::net::SocketAddr,
) -> Result<(DataDir, NodeConfig, Storage)> {
    import_chain(root, &ChainFiles::fixture(fixtures), listen).await
}

/// Initialises `root` from the chain's zerostate, imports its archives in order (writing the persistent
/// states of its persistent key blocks) and stores the chain's persistent states it lacks; the node config listens on `listen` with metrics off. Returns the data dir, its config and the
/// open storage.
pub async fn import_chain(
    root: &Path,
    chain: &ChainFiles,
    listen: std::net::SocketAddr,
) -> Result<(DataDir, NodeConfig, Storage)> {
    let data = DataDir::new(root);
    regolith_node::init::init(&data, &chain.zerostate, &Default::default())?;
    let mut config = data.load_node_config()?;
    config.listen_address = listen;
    config.metrics_address = None;
    let regolith_node::start::Started { storage, queue, .. } =
        regolith_node::start::start(&data.root, &config, Default::default()).await?;
    let progress = regolith_node::progress::Progress::new(true);
    let mut pipeline = regolith_node::apply::Pipeline::new(&storage, &queue, &Default::default())?;
    for archive in &chain.archives {
        regolith_node::apply::import::import_archive_into(
            &mut pipeline,
            &storage,
            archive,
            &progress,
        )
        .await
        .with_context(|| format!("importing {}", archive.display()))?;
    }
    // The node's own persistent states of the chain's persistent key blocks: the chain's files for the same
    // blocks are then already present, and the node serves what it made.
    pipeline.wait_for_persistent_save().await;
    if let Some(states) = &chain.states {
        regolith_node::boot::state_import::import_states(&storage, states).await?;
    }
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

/// Nodes on loopback QUIC serving a chain, each from a data dir of its own, each knowing the ones started
/// before it.
pub struct ChainServers {
    /// The serving nodes.
    pub nodes: Vec<Node>,
    dirs: Vec<tempfile::TempDir>,
    _relays: Vec<crate::relay::Relay>,
}

/// How [`ChainServers::start_chain_with`] sets its servers up.
#[derive(Debug, Clone, Copy, Default)]
pub struct ServerOptions {
    /// Every server behind a relay on loopback that impairs its datagrams this way (the address it
    /// announces is the relay's).
    pub impairment: Option<crate::relay::Impairment>,
    /// Leave the batched query (`regolith.getNextBlocksFull`) unanswered, as a stock node does.
    pub no_batches: bool,
}

impl ChainServers {
    /// Starts `count` servers of the fixture chain. With `archived`, archive 1 is committed (a client can
    /// download it); otherwise it is still open and served block by block.
    pub async fn start(fixtures: &Path, count: usize, archived: bool) -> Result<Self> {
        Self::start_with(
            &ChainFiles::fixture(fixtures),
            count,
            archived,
            ServerOptions::default(),
        )
        .await
    }

    /// Starts `count` servers of a generated chain: every archive but the last is committed, the blocks
    /// after the last key block are served one by one.
    pub async fn start_chain(chain: &ChainFiles, count: usize) -> Result<Self> {
        Self::start_with(chain, count, false, ServerOptions::default()).await
    }

    /// [`Self::start_chain`] with `options`; for the fixture chain (`chain.json` absent), archive 1 is
    /// committed when `commit_last`.
    pub async fn start_chain_with(
        chain: &ChainFiles,
        count: usize,
        commit_last: bool,
        options: ServerOptions,
    ) -> Result<Self> {
        Self::start_with(chain, count, commit_last, options).await
    }

    async fn start_with(
        chain: &ChainFiles,
        count: usize,
        commit_last: bool,
        options: ServerOptions,
    ) -> Result<Self> {
        let keys = vec![None; count];
        Ok(Self::start_keyed(chain, &keys, commit_last, options)
            .await?
            .0)
    }

    /// Starts one server of a generated chain per key in `keys`, each with that node key (a validator's
    /// secret key makes the server that validator on the network). Each records the valid external
    /// messages it receives.
    pub async fn start_as(
        chain: &ChainFiles,
        keys: &[[u8; 32]],
    ) -> Result<(Self, Vec<Arc<ReceivedMessages>>)> {
        let keys: Vec<Option<[u8; 32]>> = keys.iter().copied().map(Some).collect();
        Self::start_keyed(chain, &keys, false, ServerOptions::default()).await
    }

    async fn start_keyed(
        chain: &ChainFiles,
        keys: &[Option<[u8; 32]>],
        commit_last: bool,
        options: ServerOptions,
    ) -> Result<(Self, Vec<Arc<ReceivedMessages>>)> {
        let mut nodes: Vec<Node> = Vec::new();
        let mut dirs = Vec::new();
        let mut received = Vec::new();
        let mut relays = Vec::new();
        for key in keys {
            let dir = tempfile::tempdir()?;
            let (data, mut config, storage) = import_chain(dir.path(), chain, loopback()).await?;
            if commit_last {
                start_next_archive(&storage).await?;
            }
            if let Some(key) = key {
                config.node_secret_key = hex::encode(key);
            }
            (config.overlay, config.dht) = regolith_rpc::network::quick_discovery();
            config.blockchain_rpc_service.serve_next_blocks_batch = !options.no_batches;
            // The relay's socket is bound first: its address is the one the node announces.
            let front = match options.impairment {
                Some(_) => {
                    let socket = std::net::UdpSocket::bind((std::net::Ipv4Addr::LOCALHOST, 0))?;
                    config.public_address = Some(socket.local_addr()?);
                    Some(socket)
                }
                None => None,
            };
            let mut global = data.load_global_config()?;
            for other in &nodes {
                global.bootstrap_peers.push(serde_json::to_value(
                    other.network.signed_peer_info(Duration::from_secs(3600)),
                )?);
            }
            let messages = Arc::new(ReceivedMessages::default());
            let service = regolith_node::run::make_service_with_listener(
                &config,
                &storage,
                messages.clone(),
            )?;
            let node =
                regolith_node::run::start_node_with_service(&config, &global, storage, service)?;
            if let (Some(front), Some(impairment)) = (front, options.impairment) {
                relays.push(crate::relay::Relay::start_on(
                    front,
                    node.network.network.local_addr(),
                    impairment,
                )?);
            }
            nodes.push(node);
            dirs.push(dir);
            received.push(messages);
        }
        Ok((
            Self {
                nodes,
                dirs,
                _relays: relays,
            },
            received,
        ))
    }

    /// The servers' data dirs, in start order.
    pub fn roots(&self) -> Vec<&Path> {
        self.dirs.iter().map(tempfile::TempDir::path).collect()
    }

    /// Stops the servers and removes their data.
    pub async fn shutdown(self) {
        for node in &self.nodes {
            node.shutdown().await;
        }
        drop(self.dirs);
    }
}

/// The valid external messages a server received (BOCs, in arrival order).
#[derive(Default)]
pub struct ReceivedMessages(pub parking_lot::Mutex<Vec<bytes::Bytes>>);

#[async_trait::async_trait]
impl regolith_rpc::BroadcastListener for ReceivedMessages {
    async fn handle_message(
        &self,
        _meta: Arc<tycho_network::InboundRequestMeta>,
        message: bytes::Bytes,
    ) {
        self.0.lock().push(message);
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

/// A fresh node on loopback that knows `servers` as its bootstrap peers and has them as neighbours.
pub struct FreshNode {
    /// Its data dir.
    pub data: DataDir,
    /// Its storage.
    pub storage: Storage,
    /// Its queue.
    pub queue: regolith_node::queue_sync::NodeQueue,
    /// The node (serving, not syncing).
    pub node: Node,
    /// Its blockchain RPC client.
    pub client: regolith_rpc::client::BlockchainRpcClient,
}

impl FreshNode {
    /// Initialises `root` from `zerostate`, starts the node and waits until the servers are neighbours.
    pub async fn start(root: &Path, zerostate: &Path, servers: &[Node]) -> Result<Self> {
        let data = DataDir::new(root);
        regolith_node::init::init(&data, zerostate, &Default::default())?;
        let mut config = data.load_node_config()?;
        config.listen_address = loopback();
        config.metrics_address = None;
        (config.overlay, config.dht) = regolith_rpc::network::quick_discovery();
        let mut global = data.load_global_config()?;
        global.bootstrap_peers = servers
            .iter()
            .map(|s| serde_json::to_value(s.network.signed_peer_info(Duration::from_secs(3600))))
            .collect::<Result<_, _>>()?;
        let regolith_node::start::Started { storage, queue, .. } =
            regolith_node::start::start(&data.root, &config, Default::default()).await?;
        let node = start_node(&config, &global, storage.clone())?;
        let client = regolith_node::run::rpc_client(&node, &config)?;
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
        Ok(Self {
            data,
            storage,
            queue,
            node,
            client,
        })
    }
}

/// Initialises a fresh data dir at `root` from `zerostate` and syncs it from `servers` (its bootstrap
/// peers) until its last applied mc block is `target`; the node is stopped when this returns.
pub async fn sync_fresh_node(
    root: &Path,
    zerostate: &Path,
    servers: &[Node],
    target: u32,
) -> Result<SyncedNode> {
    FreshNode::start(root, zerostate, servers)
        .await?
        .sync_until(target)
        .await
}

impl FreshNode {
    /// Syncs from the neighbours until the last applied mc block is `target`; the node is stopped when this
    /// returns.
    pub async fn sync_until(self, target: u32) -> Result<SyncedNode> {
        let FreshNode {
            data,
            storage,
            queue,
            node,
            client,
        } = self;
        let sync = regolith_node::sync::Sync::new(storage.clone(), queue, client, &data.root)?;
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
}
