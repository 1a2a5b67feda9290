//! `regolith bench sync`: a fresh `regolith run` child process syncs a chain from 1 and from 3 in-process
//! serving nodes on loopback QUIC, block by block (`sync.archives` false; batched, or against servers that
//! leave the batched query unanswered as stock nodes do) and from archives, optionally with every server
//! behind a relay that delays its datagrams (`--rtt-ms`). The chain is the fixture chain, a generated one
//! (`--chain DIR`), or one generated for the run (`--generate N`).
//! Prints, per run: blocks/s and MiB/s (block BOC bytes, at the chain's mean block size) over the time the
//! sync worked (`regolith_sync_step_seconds` _sum: no start-up, no idle pause), the seconds from the
//! process start to the last mc block, the node's CPU seconds per 1,000 mc blocks, its bytes written per mc
//! block and its peak RSS; with `--profile`, where its CPU went ([`super::profile`]).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use regolith_testbed::fixture::{ChainFiles, ChainServers, ServerOptions};
use regolith_testbed::process::{metric, metric_sum, RunningNode};

use crate::commands::chain::{ChainShapeArgs, GenerateArgs};

/// How long one run may take.
const RUN_DEADLINE: Duration = Duration::from_secs(3600);

/// Arguments of `regolith bench sync`.
#[derive(clap::Args, Debug, Clone)]
pub struct SyncBenchArgs {
    /// The fixtures directory (zerostate.boc, archive_1.bin).
    #[arg(long, default_value = "../shared/fixtures")]
    pub fixtures: PathBuf,
    /// Sync a chain `regolith chain generate` wrote into this directory instead of the fixture chain.
    #[arg(long, conflicts_with = "generate")]
    pub chain: Option<PathBuf>,
    /// Generate a chain of this many mc blocks (into a temp dir, with the fixture zerostate's config and
    /// the shape options below) and sync it.
    #[arg(long)]
    pub generate: Option<u32>,
    /// The shape of a `--generate`d chain.
    #[command(flatten)]
    pub shape: ChainShapeArgs,
    /// Serving nodes, one run each (comma-separated).
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 3])]
    pub peers: Vec<usize>,
    /// Modes, one run each (comma-separated): `block` and `archive` sync from genesis (block by block, or
    /// from archives); `block-stock` is `block` against servers that leave the batched query unanswered, as
    /// stock nodes do (getNextBlockFull only); `cold-boot` boots from the latest persistent state the servers
    /// serve, then syncs to the tip (its wall seconds are the figure to compare with the genesis syncs').
    #[arg(long, value_delimiter = ',', default_values_t = [String::from("block"), String::from("archive")])]
    pub modes: Vec<String>,
    /// Put every server behind a relay on loopback that delays each datagram by half this many
    /// milliseconds each way (the round trip the fault tests' relay gives); 0: no relay.
    #[arg(long, default_value_t = 0)]
    pub rtt_ms: u64,
    /// Print JSON rows.
    #[arg(long)]
    pub json: bool,
    /// Instead: a fresh `regolith run` syncs from a forging peer, per attack alone and beside an honest
    /// peer, next to the honest-only run (time to the tip, peak RSS, the forger's queries and scores).
    #[arg(long)]
    pub hostile: bool,
    /// A JSON object merged into the syncing child's `node.json` (objects key by key, other values
    /// replaced), e.g. `{"storage":{"blocks_cache":{"size":"64 MiB"}}}`: settings compared with the same command.
    #[arg(long, value_parser = parse_json_object)]
    pub node_config: Option<serde_json::Value>,
    /// Also record where each run's child spent its CPU (`perf record`, then the categories of
    /// docs/benchmarks.md).
    #[arg(long)]
    pub profile: bool,
}

fn parse_json_object(text: &str) -> Result<serde_json::Value, String> {
    match serde_json::from_str(text) {
        Ok(value @ serde_json::Value::Object(_)) => Ok(value),
        Ok(_) => Err("not a JSON object".into()),
        Err(e) => Err(format!("not JSON: {e}")),
    }
}

/// `patch` merged into `target`: objects key by key, any other value replaced.
fn merge_json(target: &mut serde_json::Value, patch: &serde_json::Value) {
    match (target, patch) {
        (serde_json::Value::Object(target), serde_json::Value::Object(patch)) => {
            for (key, value) in patch {
                merge_json(
                    target.entry(key.clone()).or_insert(serde_json::Value::Null),
                    value,
                );
            }
        }
        (target, patch) => *target = patch.clone(),
    }
}

/// One run.
#[derive(Debug, serde::Serialize)]
struct SyncRun {
    peers: usize,
    mode: String,
    blocks: u64,
    blocks_per_s: f64,
    mc_blocks_per_s: f64,
    mib_per_s: f64,
    sync_seconds: f64,
    wall_seconds: f64,
    /// The child's CPU seconds (user and system, from its start) per 1,000 mc blocks it synced.
    cpu_s_per_1000_mc: f64,
    /// The bytes the child wrote to storage (from its start) per mc block it synced.
    written_bytes_per_mc: f64,
    peak_rss_mib: f64,
    failures: f64,
    /// With `--profile`: the share of the child's CPU samples per category, percent.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    profile: Vec<(&'static str, f64)>,
    #[serde(skip)]
    cpu_seconds: f64,
    #[serde(skip)]
    written_bytes: u64,
}

/// Runs the benchmark.
pub(super) async fn sync(args: SyncBenchArgs) -> Result<()> {
    if args.hostile {
        return super::hostile_sync::bench(&args.fixtures, args.json).await;
    }
    for mode in &args.modes {
        if !["block", "block-stock", "archive", "cold-boot"].contains(&mode.as_str()) {
            bail!("--modes: {mode:?} is not block, block-stock, archive or cold-boot");
        }
    }
    let exe = std::env::current_exe().context("cannot find the regolith binary")?;
    let generated_dir = tempfile::tempdir()?;
    let (chain, what, last_mc) = if let Some(dir) = &args.chain {
        let last = generated_last_mc(dir)?;
        (ChainFiles::generated(dir)?, dir.display().to_string(), last)
    } else if let Some(mc_blocks) = args.generate {
        let out = generated_dir.path().join("chain");
        let generate = GenerateArgs {
            out: out.clone(),
            base_zerostate: args.fixtures.join("zerostate.boc"),
            mc_blocks,
            shape: args.shape.clone(),
            mc_blocks_per_archive: 100,
            json: false,
        };
        let started = Instant::now();
        let summary = crate::commands::chain::generate(&generate)?;
        if !args.json {
            println!(
                "generated {} mc blocks ({} blocks, {} key blocks, {} validator sets) in {:.1} s",
                summary.mc_blocks,
                summary.blocks,
                summary.key_blocks,
                summary.validator_sets,
                started.elapsed().as_secs_f64()
            );
        }
        let last = generated_last_mc(&out)?;
        (
            ChainFiles::generated(&out)?,
            "a generated chain".into(),
            last,
        )
    } else {
        (
            ChainFiles::fixture(&args.fixtures),
            "the fixture chain".into(),
            100,
        )
    };
    let fixture = args.chain.is_none() && args.generate.is_none();
    let (block_bytes, blocks_in_chain) = chain.block_bytes()?;
    let mean_block = block_bytes as f64 / blocks_in_chain.max(1) as f64;
    if !args.json {
        let link = if args.rtt_ms > 0 {
            format!(
                ", every server behind a relay of {} ms round trips",
                args.rtt_ms
            )
        } else {
            String::new()
        };
        println!(
            "regolith bench sync: a fresh `regolith run` syncs {what} ({} mc blocks, {blocks_in_chain} blocks, {:.1} MiB of block BOCs) on loopback QUIC{link}",
            last_mc,
            block_bytes as f64 / 1048576.0
        );
        println!(
            "{:>5}  {:>11}  {:>10}  {:>10}  {:>8}  {:>8}  {:>8}  {:>12}  {:>12}  {:>9}",
            "peers",
            "mode",
            "blocks/s",
            "mc blk/s",
            "MiB/s",
            "sync s",
            "wall s",
            "CPU s/1k mc",
            "written/mc",
            "peak RSS"
        );
    }
    let mut rows = Vec::new();
    for &peers in &args.peers {
        for mode in &args.modes {
            let archives = !mode.starts_with("block");
            let boot = if mode == "cold-boot" {
                regolith_node::boot::cold_boot::BootConfig::LatestPersistent
            } else {
                regolith_node::boot::cold_boot::BootConfig::Genesis
            };
            let options = ServerOptions {
                impairment: (args.rtt_ms > 0).then(|| regolith_testbed::relay::Impairment {
                    delay: Duration::from_millis(args.rtt_ms) / 2,
                    ..Default::default()
                }),
                no_batches: mode == "block-stock",
            };
            // The fixture chain is one archive: committed for archive mode, open (served block by block)
            // otherwise.
            let servers =
                ChainServers::start_chain_with(&chain, peers.max(1), fixture && archives, options)
                    .await?;
            let work = tempfile::tempdir()?;
            let run = sync_child(
                &exe,
                &chain,
                &servers,
                work.path(),
                (archives, args.node_config.as_ref(), args.profile),
                boot,
                last_mc,
            )
            .await;
            servers.shutdown().await;
            let mut run = run.with_context(|| format!("{peers} peers, {mode} mode"))?;
            run.peers = peers;
            run.mode = mode.clone();
            run.mib_per_s = run.blocks_per_s * mean_block / 1048576.0;
            run.mc_blocks_per_s = run.blocks_per_s * f64::from(last_mc) / blocks_in_chain as f64;
            // The mc blocks it synced: all of them from genesis, the share of its blocks after a cold boot.
            let mc_blocks = run.blocks as f64 * f64::from(last_mc) / blocks_in_chain.max(1) as f64;
            if mc_blocks >= 1.0 {
                run.cpu_s_per_1000_mc = run.cpu_seconds / mc_blocks * 1000.0;
                run.written_bytes_per_mc = run.written_bytes as f64 / mc_blocks;
            }
            if args.json {
                println!("{}", serde_json::to_string(&run)?);
            } else {
                println!(
                    "{:>5}  {:>11}  {:>10.0}  {:>10.0}  {:>8.2}  {:>8.2}  {:>8.2}  {:>12.2}  {:>8.1} KiB  {:>5.0} MiB{}",
                    run.peers,
                    run.mode,
                    run.blocks_per_s,
                    run.mc_blocks_per_s,
                    run.mib_per_s,
                    run.sync_seconds,
                    run.wall_seconds,
                    run.cpu_s_per_1000_mc,
                    run.written_bytes_per_mc / 1024.0,
                    run.peak_rss_mib,
                    if run.failures > 0.0 {
                        format!("  ({} failed steps)", run.failures)
                    } else {
                        String::new()
                    }
                );
                for (category, share) in &run.profile {
                    println!("         {share:>5.1}%  {category}");
                }
            }
            rows.push(run);
        }
    }
    Ok(())
}

/// The last mc seqno of a generated chain (its `chain.json`).
fn generated_last_mc(dir: &std::path::Path) -> Result<u32> {
    let path = dir.join("chain.json");
    let manifest: regolith_chain::ChainManifest = serde_json::from_slice(
        &std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?,
    )
    .with_context(|| format!("{}", path.display()))?;
    let id = regolith_formats::block_id::parse_block_id(&manifest.last_mc_block)
        .with_context(|| format!("{}: last_mc_block", path.display()))?;
    Ok(id.seqno)
}

/// A fresh `regolith run` in `work` syncs from `servers` until it has applied mc `target`.
async fn sync_child(
    exe: &std::path::Path,
    chain: &ChainFiles,
    servers: &ChainServers,
    work: &std::path::Path,
    (archives, node_config, profile): (bool, Option<&serde_json::Value>, bool),
    boot: regolith_node::boot::cold_boot::BootConfig,
    target: u32,
) -> Result<SyncRun> {
    let peers = servers
        .nodes
        .iter()
        .map(|s| serde_json::to_value(s.network.signed_peer_info(Duration::from_secs(3600))))
        .collect::<Result<_, _>>()?;
    let (data, metrics) =
        regolith_testbed::process::prepare(work, &chain.zerostate, peers, archives, boot)?;
    if let Some(patch) = node_config {
        let path = data.node_config();
        let mut config: serde_json::Value = serde_json::from_slice(&std::fs::read(&path)?)?;
        merge_json(&mut config, patch);
        regolith_node::files::write_secret_json(&path, &config)?;
    }
    let perf_dir = tempfile::tempdir()?;
    let recording = if profile {
        Some(super::profile::Recording::start(perf_dir.path())?)
    } else {
        None
    };
    let mut node = RunningNode::spawn(exe, &data, metrics)?;
    let started = Instant::now();
    let page = loop {
        if let Some(page) = node.scrape() {
            let reached = metric(&page, "regolith_sync_last_applied_mc_seqno", None).unwrap_or(0.0);
            if reached >= f64::from(target) {
                break page;
            }
        }
        if let Some(status) = node.exited()? {
            bail!(
                "the node exited ({status}); see {}",
                data.root.join("run.log").display()
            );
        }
        if started.elapsed() > RUN_DEADLINE {
            bail!(
                "the node did not reach mc {target} in {} s; see {}",
                RUN_DEADLINE.as_secs(),
                data.root.join("run.log").display()
            );
        }
        tokio::time::sleep(poll_interval(started.elapsed())).await;
    };
    let wall_seconds = started.elapsed().as_secs_f64();
    let peak_rss_mib = node.peak_rss_mib()?;
    let cpu_seconds = node.cpu_seconds()?;
    let written_bytes = node.written_bytes()?;
    let profile = match recording {
        Some(recording) => recording.finish(node.pid)?,
        None => Vec::new(),
    };
    node.stop().await?;
    let blocks = metric_sum(&page, "regolith_sync_blocks_total") as u64;
    // A cold boot from the tip's key block leaves nothing to sync.
    let sync_seconds = match metric(&page, "regolith_sync_step_seconds_sum", None) {
        Some(seconds) => seconds,
        None if blocks == 0 => 0.0,
        None => bail!("the node's metrics have no regolith_sync_step_seconds_sum"),
    };
    Ok(SyncRun {
        peers: 0,
        mode: String::new(),
        blocks,
        blocks_per_s: if blocks == 0 {
            0.0
        } else {
            blocks as f64 / sync_seconds.max(1e-6)
        },
        mc_blocks_per_s: 0.0,
        mib_per_s: 0.0,
        sync_seconds,
        wall_seconds,
        cpu_s_per_1000_mc: 0.0,
        written_bytes_per_mc: 0.0,
        peak_rss_mib,
        failures: metric_sum(&page, "regolith_sync_failures_total"),
        profile,
        cpu_seconds,
        written_bytes,
    })
}

/// How long to wait before scraping a syncing child again: 1% of the time it has run, between 20 and 250 ms.
/// Each scrape makes the child render its metrics (the quantiles of every summary among them), which took
/// about 2% of its CPU at one scrape per 20 ms; the wall time stays within 1% (sync seconds are the child's own).
fn poll_interval(elapsed: Duration) -> Duration {
    (elapsed / 100).clamp(Duration::from_millis(20), Duration::from_millis(250))
}
