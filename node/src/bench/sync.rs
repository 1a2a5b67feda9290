//! `regolith bench sync`: a fresh node syncs the fixture chain from 1 and from 3 in-process serving nodes on
//! loopback QUIC, block by block (archive 1 still open) and from the committed archive. Prints blocks/s and
//! MiB/s (block BOC bytes applied) of the sync alone, from its start to the last mc block.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::config::DataDir;
use crate::run::{start_node, Node};

/// Arguments of `regolith bench sync`.
#[derive(clap::Args, Debug, Clone)]
pub struct SyncBenchArgs {
    /// The fixtures directory (zerostate.boc, archive_1.bin).
    #[arg(long, default_value = "../shared/fixtures")]
    pub fixtures: PathBuf,
    /// Serving nodes, one run each (comma-separated).
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 3])]
    pub peers: Vec<usize>,
    /// Print JSON rows.
    #[arg(long)]
    pub json: bool,
    /// Instead: a fresh `regolith run` syncs from a forging peer, per attack alone and beside an honest
    /// peer, next to the honest-only run (time to the tip, peak RSS, the forger's queries and scores).
    #[arg(long)]
    pub hostile: bool,
}

fn loopback() -> std::net::SocketAddr {
    std::net::SocketAddr::from(([127, 0, 0, 1], 0))
}

async fn servers(
    args: &SyncBenchArgs,
    count: usize,
    archived: bool,
) -> Result<(Vec<Node>, Vec<tempfile::TempDir>)> {
    let mut nodes: Vec<Node> = Vec::new();
    let mut dirs = Vec::new();
    for _ in 0..count {
        let dir = tempfile::tempdir()?;
        let (data, mut config, storage) =
            crate::fixture::import_fixture_chain(dir.path(), &args.fixtures, loopback()).await?;
        if archived {
            crate::fixture::start_next_archive(&storage).await?;
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
    Ok((nodes, dirs))
}

/// Syncs a fresh node from `servers` to mc `target`; returns the wall time and the counters.
async fn sync_once(
    args: &SyncBenchArgs,
    servers: &[Node],
    target: u32,
) -> Result<(Duration, u64, u64)> {
    let dir = tempfile::tempdir()?;
    let data = DataDir::new(dir.path());
    crate::init::init(
        &data,
        &args.fixtures.join("zerostate.boc"),
        &Default::default(),
    )?;
    let mut config = data.load_node_config()?;
    config.listen_address = loopback();
    config.metrics_address = None;
    (config.overlay, config.dht) = regolith_rpc::network::quick_discovery();
    let mut global = data.load_global_config()?;
    global.bootstrap_peers = servers
        .iter()
        .map(|s| serde_json::to_value(s.network.signed_peer_info(Duration::from_secs(3600))))
        .collect::<Result<_, _>>()?;
    let storage = crate::open_storage(config.storage.clone())?;
    let (queue, _) =
        crate::queue_sync::start(&data.root, &storage, config.internal_queue, false).await?;
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
    loop {
        let last = storage
            .node_state()
            .load_last_mc_block_id()?
            .map_or(0, |id| id.seqno);
        if last >= target {
            break;
        }
        if started.elapsed() > Duration::from_secs(300) {
            bail!("the sync reached only mc {last} in 300 s");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let elapsed = started.elapsed();
    let _ = stop.send(true);
    let _ = task.await;
    node.shutdown().await;
    Ok((
        elapsed,
        stats.from_archives.load(Ordering::Relaxed),
        stats.from_blocks.load(Ordering::Relaxed),
    ))
}

/// Runs the benchmark.
pub async fn sync(args: SyncBenchArgs) -> Result<()> {
    if args.hostile {
        return super::hostile_sync::bench(&args.fixtures, args.json).await;
    }
    let archive_bytes: u64 = {
        let file = std::fs::File::open(args.fixtures.join("archive_1.bin"))?;
        let mut reader = regolith_formats::archive::ArchiveReader::new_compressed(
            std::io::BufReader::new(file),
        )?;
        let mut total = 0u64;
        while let Some(e) = reader.next_entry().map_err(|e| anyhow::anyhow!("{e}"))? {
            if e.ty == regolith_formats::archive::ArchiveEntryType::Block {
                total += e.data.len() as u64;
            }
        }
        total
    };
    let mut rows = Vec::new();
    if !args.json {
        println!("regolith bench sync: a fresh node syncs the fixture chain (107 blocks, {archive_bytes} B of block BOCs) on loopback QUIC");
        println!(
            "{:>5}  {:>8}  {:>10}  {:>10}  {:>8}",
            "peers", "mode", "blocks/s", "MiB/s", "seconds"
        );
    }
    for &peers in &args.peers {
        for (mode, archived) in [("block", false), ("archive", true)] {
            let (nodes, _dirs) = servers(&args, peers.max(1), archived).await?;
            let (elapsed, from_archives, from_blocks) = sync_once(&args, &nodes, 100).await?;
            for n in &nodes {
                n.shutdown().await;
            }
            let blocks = from_archives + from_blocks;
            let secs = elapsed.as_secs_f64().max(1e-6);
            let blocks_per_s = blocks as f64 / secs;
            let mib_per_s = archive_bytes as f64 / (1024.0 * 1024.0) / secs;
            if args.json {
                rows.push(serde_json::json!({"peers": peers, "mode": mode, "blocks_per_s": blocks_per_s, "mib_per_s": mib_per_s, "seconds": secs, "blocks": blocks}));
            } else {
                println!(
                    "{peers:>5}  {mode:>8}  {blocks_per_s:>10.1}  {mib_per_s:>10.3}  {secs:>8.2}"
                );
            }
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    }
    Ok(())
}
