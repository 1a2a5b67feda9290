//! `regolith devnet`: N separate `regolith run` processes on 127.0.0.1, with their data in `DIR/node1` …
//! `DIR/nodeN`. node1 imports the fixture chain, or with `--live` makes a new chain while it runs (a generated
//! zerostate, `live.json` in its data dir: see [`regolith_node::live`]); the others start from the zerostate alone and
//! sync from their peers (all from node1, or each from the one before it with `--line`). The command shows
//! every node's height until Ctrl-C (SIGINT) or SIGTERM, then stops the nodes cleanly.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use regolith_node::config::DataDir;
use regolith_node::files::{write_atomically, write_json, write_secret_json};
use regolith_node::live::LiveConfig;

use crate::commands::chain::ChainShapeArgs;

/// The help heading of the live chain's options.
const LIVE_HEADING: &str = "Live chain (with --live)";

/// `regolith devnet` arguments.
#[derive(clap::Args, Debug, Clone)]
pub struct DevnetArgs {
    /// Number of nodes (node1 serves the chain, imported or made with `--live`; the others sync).
    #[arg(long, default_value_t = 3)]
    pub nodes: usize,
    /// Where the nodes' data directories live.
    #[arg(long, default_value = "devnet")]
    pub dir: PathBuf,
    /// Each node syncs from the one before it (a line), instead of all from node1 (a star).
    #[arg(long)]
    pub line: bool,
    /// The first node's QUIC port; node k listens on base + 2(k − 1) (QUIC, and its account API on the same TCP
    /// port) and serves metrics on the next port.
    #[arg(long, default_value_t = 30410)]
    pub base_port: u16,
    /// The zerostate of the chain (with `--live`: the base whose config the generated zerostate uses).
    #[arg(long, default_value = "../shared/fixtures/zerostate.boc")]
    pub zerostate: PathBuf,
    /// Archives node1 imports (not with `--live`).
    #[arg(long, default_value = "../shared/fixtures/archive_1.bin")]
    pub archive: Vec<PathBuf>,
    /// Stop once every node has the last block of node1 (otherwise run until a signal); with `--live
    /// --mc-blocks N`, once every node has mc block N.
    #[arg(long)]
    pub exit_when_synced: bool,
    /// node1 makes a new chain while it runs, one mc block per `--block-interval`, and the other nodes
    /// follow it: a generated zerostate (`DIR/zerostate.boc`), the generator's options in node1's
    /// `live.json`.
    #[arg(long)]
    pub live: bool,
    /// One mc block (with a block of every shard) per interval.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration, help_heading = LIVE_HEADING)]
    pub block_interval: Duration,
    /// node1 makes no block after this mc block (default: it runs on).
    #[arg(long, help_heading = LIVE_HEADING)]
    pub mc_blocks: Option<u32>,
    /// The generated chain (fixed once node1 exists: the same options resume it).
    #[command(flatten, next_help_heading = LIVE_HEADING)]
    pub chain: ChainShapeArgs,
}

struct Member {
    name: String,
    data: DataDir,
    listen: SocketAddr,
    metrics: SocketAddr,
    /// The account API (TCP, the QUIC port's number).
    api: SocketAddr,
    child: Option<Child>,
}

/// Runs the devnet.
pub async fn run(args: DevnetArgs) -> Result<()> {
    if args.nodes == 0 {
        bail!("--nodes must be at least 1");
    }
    let exe = std::env::current_exe().context("cannot find the regolith binary")?;
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("cannot create {}", args.dir.display()))?;
    let mut members: Vec<Member> = (0..args.nodes)
        .map(|k| {
            let port = args.base_port + 2 * k as u16;
            Member {
                name: format!("node{}", k + 1),
                data: DataDir::new(args.dir.join(format!("node{}", k + 1))),
                listen: SocketAddr::from(([127, 0, 0, 1], port)),
                metrics: SocketAddr::from(([127, 0, 0, 1], port + 1)),
                api: SocketAddr::from(([127, 0, 0, 1], port)),
                child: None,
            }
        })
        .collect();

    if args.mc_blocks.is_some() && !args.live {
        bail!("--mc-blocks is an option of --live");
    }
    let live = args.live.then(|| live_config(&args)).transpose()?;
    let zerostate = match &live {
        Some((_, base)) => write_live_zerostate(&args, base)?,
        None => args.zerostate.clone(),
    };
    // Data directories: kept across runs (init and import are no-ops the second time).
    for member in &members {
        if !member.data.is_initialised() {
            let out = Command::new(&exe)
                .arg("--data")
                .arg(&member.data.root)
                .args(["init", "--zerostate"])
                .arg(&zerostate)
                .args(["--listen", &member.listen.to_string()])
                .args(["--metrics", &member.metrics.to_string()])
                .args(["--api", &member.api.to_string()])
                .output()
                .context("cannot run regolith init")?;
            if !out.status.success() {
                bail!(
                    "init of {} failed: {}",
                    member.name,
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            // Nodes on one machine: DHT and overlay periods of seconds instead of minutes.
            let mut config = member.data.load_node_config()?;
            (config.overlay, config.dht) = regolith_rpc::network::quick_discovery();
            // The devnet's chains are dated in the past (from the fixture zerostate's time on): transactions
            // GC, whose TTL counts from the wall clock, would keep only the newest key block's transactions,
            // and a wallet polling for its message's transaction could miss it. The index keeps them all.
            config.api.index_gc = None;
            write_secret_json(&member.data.node_config(), &config)?;
        }
        // A devnet made before nodes had the account API gets it now.
        let mut config = member.data.load_node_config()?;
        if config.api_address.is_none() {
            config.api_address = Some(member.api);
            write_secret_json(&member.data.node_config(), &config)?;
        }
    }
    let first = &members[0];
    match &live {
        Some((config, base)) => {
            config.install(&first.data, base)?;
            println!("node1 makes a live chain: {}", config.describe());
        }
        None => import(&exe, &first.data, &args.archive)?,
    }
    // Bootstrap: every node knows its source (node1, or the previous node) and node1 knows everybody.
    let infos: Vec<serde_json::Value> = members
        .iter()
        .map(|m| own_peer_info(&m.data))
        .collect::<Result<_>>()?;
    for (k, member) in members.iter().enumerate() {
        let mut global = member.data.load_global_config()?;
        let mut peers = vec![infos[k].clone()];
        if k > 0 {
            peers.push(infos[if args.line { k - 1 } else { 0 }].clone());
        }
        if k + 1 < members.len() && args.line {
            peers.push(infos[k + 1].clone());
        }
        global.bootstrap_peers = peers;
        write_json(&member.data.global_config(), &global)?;
    }

    let shutdown = regolith_node::run::Shutdown::install()?;
    for (k, member) in members.iter_mut().enumerate() {
        let log_path = member.data.root.join("run.log");
        let log = std::fs::File::create(&log_path)
            .with_context(|| format!("cannot create {}", log_path.display()))?;
        let child = regolith_testbed::process::node_command(&exe, &member.data.root)
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "info,tycho_network=warn".into()),
            )
            .stdout(Stdio::null())
            .stderr(log.try_clone()?)
            .spawn()
            .with_context(|| format!("cannot start {}", member.name))?;
        member.child = Some(child);
        if k == 0 {
            // The others bootstrap from node1: it answers before they start.
            let deadline = Instant::now() + Duration::from_secs(60);
            while height(member.metrics).is_none() {
                if Instant::now() > deadline {
                    bail!("node1 did not start in 60 s; see {}", log_path.display());
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
    println!(
        "devnet of {} nodes in {} ({}): logs in nodeK/run.log, metrics on the ports below. Ctrl-C stops it.",
        members.len(),
        args.dir.display(),
        if args.line { "line" } else { "star from node1" }
    );
    for m in &members {
        println!(
            "  {}: QUIC {}  metrics http://{}/metrics  API http://{}/",
            m.name, m.listen, m.metrics, m.api
        );
    }

    let goal = match &live {
        // A live chain without an end: nodes are level only for an instant, which is not worth a line.
        Some((config, _)) => Goal::Live {
            stop_at: config.stop_at,
            exit: args.exit_when_synced,
        },
        None => Goal::Fixture {
            exit: args.exit_when_synced,
        },
    };
    let result = watch(&mut members, shutdown, goal).await;
    for member in &mut members {
        if let Some(child) = &member.child {
            // SAFETY: kill only sends a signal to the child's pid.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        }
    }
    for member in &mut members {
        if let Some(mut child) = member.child.take() {
            let status = child.wait()?;
            if !status.success() {
                eprintln!("{} exited with {status}", member.name);
            }
        }
    }
    result
}

/// node1's `live.json` from the arguments, and the base zerostate.
fn live_config(args: &DevnetArgs) -> Result<(LiveConfig, Vec<u8>)> {
    let base = std::fs::read(&args.zerostate)
        .with_context(|| format!("cannot read {}", args.zerostate.display()))?;
    let shape = args.chain.shape();
    shape.validate()?;
    if args.block_interval.is_zero() {
        bail!("--block-interval must be above 0");
    }
    Ok((
        LiveConfig {
            chain: shape,
            block_interval: args.block_interval,
            stop_at: args.mc_blocks,
        },
        base,
    ))
}

/// Writes the live chain's zerostate to `DIR/zerostate.boc` (every node is initialised from it) and returns
/// its path.
fn write_live_zerostate(args: &DevnetArgs, base: &[u8]) -> Result<PathBuf> {
    let options = args.chain.options(
        0,
        regolith_chain::ChainOptions::default().mc_blocks_per_archive,
    );
    let generator = regolith_chain::Generator::new(options, base)
        .context("cannot generate the live chain's zerostate")?;
    let path = args.dir.join("zerostate.boc");
    if std::fs::read(&path).ok().as_deref() != Some(generator.genesis.boc.as_slice()) {
        write_atomically(&path, &generator.genesis.boc)?;
    }
    Ok(path)
}

/// `regolith import` of the fixture archives into node1.
fn import(exe: &std::path::Path, data: &DataDir, archives: &[PathBuf]) -> Result<()> {
    let mut import = Command::new(exe);
    import
        .arg("--data")
        .arg(&data.root)
        .args(["import", "--quiet"]);
    for archive in archives {
        import.arg(archive);
    }
    let out = import.output().context("cannot run regolith import")?;
    if !out.status.success() {
        bail!(
            "node1 could not import the chain: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    print!("{}", String::from_utf8_lossy(&out.stdout));
    Ok(())
}

/// When the devnet has reached what it shows, and whether it then exits.
#[derive(Clone, Copy)]
enum Goal {
    /// The imported chain: every node at node1's height.
    Fixture { exit: bool },
    /// A live chain: every node at `stop_at` (or, without it, level with node1 at some instant).
    Live { stop_at: Option<u32>, exit: bool },
}

impl Goal {
    /// Whether `heights` (node1 first) reach the goal, and whether that is worth a line.
    fn reached(self, heights: &[Option<u64>]) -> (bool, bool) {
        let top = heights[0];
        let level = top.is_some() && heights.iter().all(|h| *h == top);
        match self {
            Self::Fixture { .. } => (level, true),
            Self::Live {
                stop_at: Some(stop_at),
                ..
            } => (level && top == Some(u64::from(stop_at)), true),
            Self::Live {
                stop_at: None,
                exit,
            } => (level, exit),
        }
    }

    fn exits(self) -> bool {
        match self {
            Self::Fixture { exit } | Self::Live { exit, .. } => exit,
        }
    }
}

/// Prints the heights every 2 s until a signal (or, when the goal says so, until it is reached).
async fn watch(
    members: &mut [Member],
    shutdown: regolith_node::run::Shutdown,
    goal: Goal,
) -> Result<()> {
    let started = Instant::now();
    let stop = shutdown.wait();
    tokio::pin!(stop);
    let mut ticker = tokio::time::interval(Duration::from_secs(2));
    let mut announced = false;
    loop {
        tokio::select! {
            _ = &mut stop => return Ok(()),
            _ = ticker.tick() => {}
        }
        for member in members.iter_mut() {
            if let Some(child) = &mut member.child {
                if let Some(status) = child.try_wait()? {
                    bail!(
                        "{} stopped ({status}); see {}",
                        member.name,
                        member.data.root.join("run.log").display()
                    );
                }
            }
        }
        let heights: Vec<Option<u64>> = members.iter().map(|m| height(m.metrics)).collect();
        let line = members
            .iter()
            .zip(&heights)
            .map(|(m, h)| {
                format!(
                    "{} {}",
                    m.name,
                    h.map_or_else(|| "-".into(), |h| h.to_string())
                )
            })
            .collect::<Vec<_>>()
            .join("  ");
        println!(
            "[{:>4}s] last applied mc block: {line}",
            started.elapsed().as_secs()
        );
        let (reached, worth_a_line) = goal.reached(&heights);
        if reached {
            if !announced && worth_a_line {
                println!(
                    "every node holds the chain: mc block {} after {} s",
                    heights[0].unwrap_or_default(),
                    started.elapsed().as_secs()
                );
                announced = true;
            }
            if goal.exits() {
                return Ok(());
            }
        }
    }
}

/// The node's own signed peer info, as `init` wrote it into its global config.
fn own_peer_info(data: &DataDir) -> Result<serde_json::Value> {
    let global = data.load_global_config()?;
    let key = data.load_node_config()?.secret_key()?;
    let id = regolith_rpc::network::peer_id_of(&key).to_string();
    global
        .bootstrap_peers
        .into_iter()
        .find(|p| p["id"] == id.as_str())
        .with_context(|| {
            format!(
                "{} holds no peer info of its own node",
                data.global_config().display()
            )
        })
}

/// `regolith_sync_last_applied_mc_seqno` from a node's metrics endpoint.
fn height(metrics: SocketAddr) -> Option<u64> {
    regolith_testbed::process::scrape_metrics(metrics)?
        .lines()
        .find(|l| l.starts_with("regolith_sync_last_applied_mc_seqno"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<f64>().ok())
        .map(|v| v as u64)
}
