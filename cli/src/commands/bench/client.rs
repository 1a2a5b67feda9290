//! `regolith bench client`: the blockchain RPC client downloading from 1 and from 3 serving peers on loopback
//! QUIC. Prints the MiB/s of a 2.5 MiB block download (3 chunks) and of an archive download (streaming
//! verification included), and the p50/p99 latency of a small getBlockFull.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use async_trait::async_trait;
use bytes::Bytes;
use regolith_formats::archive::{ArchiveEntryType, ArchiveWriter};
use regolith_rpc::client::{
    ArchiveSearch, BlockchainRpcClient, DataRequirement, PublicOverlayClient,
};
use regolith_rpc::network::{BlockchainNetwork, NetworkSettings, Silent};
use regolith_rpc::{
    ArchiveLookup, BlockStorageView, BlockchainRpcService, HandleFlags, ProviderError,
    ProviderResult, RpcDataProvider, StateChunkRequest, StateInfo, StateKind,
};
use tycho_types::models::{BlockId, ShardIdent};
use tycho_types::prelude::HashBytes;

/// Arguments of `regolith bench client`.
#[derive(clap::Args, Debug, Clone)]
pub struct ClientBenchArgs {
    /// Serving peers, one run each (comma-separated).
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 3])]
    pub peers: Vec<usize>,
    /// Downloads per measured case.
    #[arg(long, default_value_t = 20)]
    pub rounds: usize,
    /// getBlockFull requests for the latency figures.
    #[arg(long, default_value_t = 500)]
    pub requests: usize,
    /// Size of the synthetic archive, in MiB (decompressed).
    #[arg(long, default_value_t = 16)]
    pub archive_mib: usize,
    /// Print JSON rows.
    #[arg(long)]
    pub json: bool,
}

const MIB: f64 = 1024.0 * 1024.0;

/// What every serving peer holds: a 2.5 MiB block, a small block and one archive.
struct Content {
    big: (BlockId, Bytes),
    small: (BlockId, Bytes),
    archive: Bytes,
}

fn id(seqno: u32, fill: u8) -> BlockId {
    BlockId {
        shard: ShardIdent::MASTERCHAIN,
        seqno,
        root_hash: HashBytes([fill; 32]),
        file_hash: HashBytes([fill.wrapping_add(1); 32]),
    }
}

fn random(len: usize, seed: u64) -> Vec<u8> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    (0..len).map(|_| rng.gen()).collect()
}

impl Content {
    fn build(archive_mib: usize) -> Result<Self> {
        // Random bytes do not compress: the stored blob is ~2.5 MiB, served in 3 chunks of 1 MiB.
        let big = Bytes::from(zstd::encode_all(&random(5 << 19, 1)[..], 1)?);
        let small = Bytes::from(zstd::encode_all(&random(4096, 2)[..], 1)?);
        let mut writer = ArchiveWriter::new(Vec::new())?;
        for seqno in 1..=(archive_mib * 16) as u32 {
            let entry = random(64 << 10, u64::from(seqno) + 3);
            writer.write_entry(&id(seqno, 7), ArchiveEntryType::Block, &entry)?;
        }
        let archive = Bytes::from(zstd::encode_all(&writer.finish()[..], 1)?);
        Ok(Self {
            big: (id(1, 1), big),
            small: (id(2, 2), small),
            archive,
        })
    }

    fn block(&self, id: &BlockId) -> Option<&Bytes> {
        [&self.big, &self.small]
            .into_iter()
            .find(|(b, _)| b == id)
            .map(|(_, data)| data)
    }
}

struct View(Arc<Content>);

#[async_trait]
impl BlockStorageView for View {
    async fn handle(&self, id: &BlockId) -> ProviderResult<Option<HandleFlags>> {
        Ok(self.0.block(id).map(|_| HandleFlags {
            has_data: true,
            has_proof: true,
            has_queue_diff: true,
            has_next1: false,
            is_removed: false,
        }))
    }
    async fn block_data_range(
        &self,
        id: &BlockId,
        offset: u64,
        len: u64,
    ) -> ProviderResult<Option<Bytes>> {
        Ok(self.0.block(id).map(|data| {
            let start = (offset as usize).min(data.len());
            let end = start.saturating_add(len as usize).min(data.len());
            data.slice(start..end)
        }))
    }
    async fn block_data_size(&self, id: &BlockId) -> ProviderResult<Option<u64>> {
        Ok(self.0.block(id).map(|d| d.len() as u64))
    }
    async fn proof(&self, id: &BlockId) -> ProviderResult<Option<Bytes>> {
        Ok(self.0.block(id).map(|_| Bytes::from_static(b"proof")))
    }
    async fn queue_diff(&self, id: &BlockId) -> ProviderResult<Option<Bytes>> {
        Ok(self.0.block(id).map(|_| Bytes::from_static(b"diff")))
    }
    async fn next1(&self, _: &BlockId) -> ProviderResult<Option<BlockId>> {
        Ok(None)
    }
    async fn key_blocks_from(&self, _: u32, _: usize) -> ProviderResult<Vec<BlockId>> {
        Ok(Vec::new())
    }
    async fn zerostate_proof(&self) -> ProviderResult<Option<Bytes>> {
        Ok(None)
    }
}

struct Provider(Arc<Content>);

#[async_trait]
impl RpcDataProvider for Provider {
    async fn archive_info(&self, _: u32) -> ProviderResult<ArchiveLookup> {
        Ok(ArchiveLookup::Found {
            id: 1,
            size: self.0.archive.len() as u64,
            chunk_size: 1 << 20,
        })
    }
    async fn archive_chunk(&self, archive_id: u32, offset: u64) -> ProviderResult<Bytes> {
        if archive_id != 1 {
            return Err(ProviderError::ArchiveNotFound(archive_id.into()));
        }
        let data = &self.0.archive;
        let start = (offset as usize).min(data.len());
        let end = (start + (1 << 20)).min(data.len());
        Ok(data.slice(start..end))
    }
    async fn state_info(&self, _: &BlockId, _: StateKind) -> ProviderResult<Option<StateInfo>> {
        Ok(None)
    }
    async fn state_chunk(&self, _: &StateChunkRequest) -> ProviderResult<Option<Bytes>> {
        Ok(None)
    }
}

fn settings(bootstrap: Vec<tycho_network::PeerInfo>, overlay_id: [u8; 32]) -> NetworkSettings {
    let mut secret_key = [0u8; 32];
    rand::Rng::fill(&mut rand::thread_rng(), &mut secret_key);
    // Peers find each other in seconds.
    let (overlay, dht) = regolith_rpc::network::quick_discovery();
    NetworkSettings {
        bind_address: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
        remote_address: None,
        secret_key,
        network: Default::default(),
        dht,
        overlay,
        peer_resolver: Default::default(),
        bootstrap_peers: bootstrap,
        overlay_id,
        rate_limits: None,
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[at.min(sorted.len() - 1)]
}

/// Runs the benchmark.
pub(super) async fn client(args: ClientBenchArgs) -> Result<()> {
    let content = Arc::new(Content::build(args.archive_mib.max(1))?);
    let mut rows = Vec::new();
    if !args.json {
        println!(
            "regolith bench client: {} rounds per case, block {:.2} MiB compressed, archive {:.2} MiB compressed, loopback QUIC",
            args.rounds,
            content.big.1.len() as f64 / MIB,
            content.archive.len() as f64 / MIB
        );
        println!(
            "{:>5}  {:>18}  {:>20}  {:>14}  {:>14}",
            "peers", "block MiB/s", "archive MiB/s", "full p50", "full p99"
        );
    }
    for &peers in &args.peers {
        let peers = peers.max(1);
        let mut overlay_id = [0u8; 32];
        rand::Rng::fill(&mut rand::thread_rng(), &mut overlay_id);
        let mut servers: Vec<BlockchainNetwork> = Vec::new();
        for _ in 0..peers {
            let bootstrap = servers
                .iter()
                .map(|s| s.signed_peer_info(Duration::from_secs(3600)))
                .collect();
            let service = BlockchainRpcService::builder()
                .with_storage(View(content.clone()))
                .with_provider(Provider(content.clone()))
                .without_broadcast_listener()
                .build();
            servers.push(BlockchainNetwork::start(
                settings(bootstrap, overlay_id),
                service,
            )?);
        }
        let bootstrap = servers
            .iter()
            .map(|s| s.signed_peer_info(Duration::from_secs(3600)))
            .collect();
        let node = BlockchainNetwork::start(settings(bootstrap, overlay_id), Silent)?;
        let overlay = PublicOverlayClient::new(
            node.network.clone(),
            node.overlay.clone(),
            Default::default(),
        );
        tokio::time::timeout(Duration::from_secs(60), overlay.wait_for_peers(peers))
            .await
            .map_err(|_| anyhow!("{peers} neighbours did not join in 60 s"))?;
        let client = BlockchainRpcClient::builder()
            .with_overlay_client(overlay)
            .build()
            .context("the client")?;

        let started = Instant::now();
        for _ in 0..args.rounds {
            let got = client
                .get_block_full(&content.big.0, DataRequirement::Required)
                .await?;
            if got.data.is_none() {
                bail!("the 2.5 MiB block was not found");
            }
        }
        let block_mibs =
            (content.big.1.len() * args.rounds) as f64 / MIB / started.elapsed().as_secs_f64();

        let started = Instant::now();
        for _ in 0..args.rounds {
            let ArchiveSearch::Found(found) = client.find_archive(1).await? else {
                bail!("the archive is too new");
            };
            client
                .download_archive(&found, std::io::sink(), |_| {})
                .await?;
        }
        let archive_mibs =
            (content.archive.len() * args.rounds) as f64 / MIB / started.elapsed().as_secs_f64();

        let mut latencies = Vec::with_capacity(args.requests);
        for _ in 0..args.requests.max(1) {
            let started = Instant::now();
            client
                .get_block_full(&content.small.0, DataRequirement::Required)
                .await?;
            latencies.push(started.elapsed());
        }
        latencies.sort();
        let (p50, p99) = (percentile(&latencies, 0.5), percentile(&latencies, 0.99));
        if args.json {
            for (case, value, unit) in [
                ("block download 2.5 MiB", block_mibs, "MiB/s"),
                ("archive download", archive_mibs, "MiB/s"),
                ("getBlockFull p50", p50.as_secs_f64() * 1e3, "ms"),
                ("getBlockFull p99", p99.as_secs_f64() * 1e3, "ms"),
            ] {
                rows.push(
                    serde_json::json!({"peers": peers, "case": case, "value": value, "unit": unit}),
                );
            }
        } else {
            println!(
                "{peers:>5}  {block_mibs:>18.1}  {archive_mibs:>20.1}  {:>11.2} ms  {:>11.2} ms",
                p50.as_secs_f64() * 1e3,
                p99.as_secs_f64() * 1e3
            );
        }
        node.network.shutdown().await;
        for s in &servers {
            s.network.shutdown().await;
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    }
    Ok(())
}
