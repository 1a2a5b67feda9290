//! `regolith bench sync`: a fresh node syncs the fixture chain from 1 and from 3 in-process serving nodes on
//! loopback QUIC, block by block (archive 1 still open) and from the committed archive. Prints blocks/s and
//! MiB/s (block BOC bytes applied) of the sync alone, from its start to the last mc block.

use std::path::PathBuf;
use std::sync::atomic::Ordering;

use anyhow::Result;

use crate::fixture::{sync_fresh_node, FixtureServers};

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
            let servers = FixtureServers::start(&args.fixtures, peers.max(1), archived).await?;
            let dir = tempfile::tempdir()?;
            let synced = sync_fresh_node(dir.path(), &args.fixtures, &servers.nodes, 100).await?;
            servers.shutdown().await;
            let elapsed = synced.elapsed;
            let blocks = synced.stats.from_archives.load(Ordering::Relaxed)
                + synced.stats.from_blocks.load(Ordering::Relaxed);
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
