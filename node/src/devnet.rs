//! `regolith devnet`: N separate `regolith run` processes on 127.0.0.1, with their data in `DIR/node1` …
//! `DIR/nodeN`. node1 imports the fixture chain; the others start from the zerostate alone and sync from their
//! peers (all from node1, or each from the one before it with `--line`). The command shows every node's
//! height until Ctrl-C (SIGINT) or SIGTERM, then stops the nodes cleanly.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::config::{write_json, write_secret_json, DataDir};

/// `regolith devnet` arguments.
#[derive(clap::Args, Debug, Clone)]
pub struct DevnetArgs {
    /// Number of nodes (node1 serves the imported chain, the others sync).
    #[arg(long, default_value_t = 3)]
    pub nodes: usize,
    /// Where the nodes' data directories live.
    #[arg(long, default_value = "devnet")]
    pub dir: PathBuf,
    /// Each node syncs from the one before it (a line), instead of all from node1 (a star).
    #[arg(long)]
    pub line: bool,
    /// The first node's QUIC port; node k listens on base + 2(k − 1) and serves metrics on the next port.
    #[arg(long, default_value_t = 30410)]
    pub base_port: u16,
    /// The zerostate of the chain.
    #[arg(long, default_value = "../shared/fixtures/zerostate.boc")]
    pub zerostate: PathBuf,
    /// Archives node1 imports.
    #[arg(long, default_value = "../shared/fixtures/archive_1.bin")]
    pub archive: Vec<PathBuf>,
    /// Stop once every node has the last block of node1 (otherwise run until a signal).
    #[arg(long)]
    pub exit_when_synced: bool,
}

struct Member {
    name: String,
    data: DataDir,
    listen: SocketAddr,
    metrics: SocketAddr,
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
                child: None,
            }
        })
        .collect();

    // Data directories: kept across runs (init and import are no-ops the second time).
    for member in &members {
        if !member.data.is_initialised() {
            let out = Command::new(&exe)
                .arg("--data")
                .arg(&member.data.root)
                .args(["init", "--zerostate"])
                .arg(&args.zerostate)
                .args(["--listen", &member.listen.to_string()])
                .args(["--metrics", &member.metrics.to_string()])
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
            write_secret_json(&member.data.node_config(), &config)?;
        }
    }
    let first = &members[0];
    let mut import = Command::new(&exe);
    import
        .arg("--data")
        .arg(&first.data.root)
        .args(["import", "--quiet"]);
    for archive in &args.archive {
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

    let shutdown = crate::run::Shutdown::install()?;
    for (k, member) in members.iter_mut().enumerate() {
        let log_path = member.data.root.join("run.log");
        let log = std::fs::File::create(&log_path)
            .with_context(|| format!("cannot create {}", log_path.display()))?;
        let child = run_command(&exe, &member.data.root)
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
            "  {}: QUIC {}  metrics http://{}/metrics",
            m.name, m.listen, m.metrics
        );
    }

    let result = watch(&mut members, shutdown, args.exit_when_synced).await;
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

/// Prints the heights every 2 s until a signal (or, with `exit_when_synced`, until all nodes are level).
async fn watch(
    members: &mut [Member],
    shutdown: crate::run::Shutdown,
    exit_when_synced: bool,
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
        let top = heights[0];
        if top.is_some() && heights.iter().all(|h| *h == top) {
            if !announced {
                println!(
                    "every node holds the chain: mc block {} after {} s",
                    top.unwrap_or_default(),
                    started.elapsed().as_secs()
                );
                announced = true;
            }
            if exit_when_synced {
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
    scrape_metrics(metrics)?
        .lines()
        .find(|l| l.starts_with("regolith_sync_last_applied_mc_seqno"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<f64>().ok())
        .map(|v| v as u64)
}

/// The Prometheus text page of a node's metrics endpoint, `None` while it does not answer.
/// `EXE --data DATA run` as a child that dies with this process, even when this process is killed: no
/// orphaned nodes.
pub(crate) fn run_command(exe: &std::path::Path, data: &std::path::Path) -> Command {
    let mut command = Command::new(exe);
    // SAFETY: the closure only calls prctl, which is async-signal-safe.
    unsafe {
        use std::os::unix::process::CommandExt;
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
    command.arg("--data").arg(data).arg("run");
    command
}

pub(crate) fn scrape_metrics(metrics: SocketAddr) -> Option<String> {
    let mut stream = TcpStream::connect_timeout(&metrics, Duration::from_millis(500)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: {metrics}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    Some(text)
}
