//! `regolith bench rpc --hostile`: a `regolith run` child process serves the fixture chain; one honest client
//! (127.0.0.2) downloads its blocks with getBlockFull at a steady rate while K hostile clients (127.0.0.10 …)
//! send as fast as they can: random bodies, truncated queries, unknown constructors, offsets past the end and
//! frames at the size limit. Four phases: rate limits off and on (the §9 defaults), each without and with the
//! flood. Per phase: the honest success rate and p50/p99 latency, the node's CPU and RSS (from /proc of the
//! child), and what became of the flood (answered, or dropped by the limiter per the node's metrics).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use regolith_formats::archive::{ArchiveEntryType, ArchiveReader};
use regolith_formats::BlockId;
use regolith_node::config::DataDir;
use regolith_node::files::write_secret_json;
use regolith_rpc::proto::{self, rpc, OverlayResponse};
use regolith_rpc::RawOverlayClient;
use regolith_testbed::process::{free_tcp_port, process_usage};
use serde::Serialize;

/// What the hostile clients send, in turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum HostileKind {
    /// Random bytes of random length (mostly no known constructor).
    RandomBody,
    /// A valid request cut short.
    Truncated,
    /// A random u32 that is no request constructor, then random bytes.
    UnknownConstructor,
    /// Well-formed requests for data past the end: block, archive and state chunks at huge offsets.
    OffsetPastEnd,
    /// A getBlockFull padded with trailing bytes (accepted, §2.1) to just under the frame limit, or a body
    /// just over it.
    FrameAtLimit,
}

impl HostileKind {
    /// Every kind, in the order the hostile clients cycle through them.
    pub(super) const ALL: [HostileKind; 5] = [
        Self::RandomBody,
        Self::Truncated,
        Self::UnknownConstructor,
        Self::OffsetPastEnd,
        Self::FrameAtLimit,
    ];

    fn name(self) -> &'static str {
        match self {
            Self::RandomBody => "random bodies",
            Self::Truncated => "truncated queries",
            Self::UnknownConstructor => "unknown constructors",
            Self::OffsetPastEnd => "offsets past the end",
            Self::FrameAtLimit => "frames at the size limit",
        }
    }
}

/// One hostile body. `frame_limit` is the network's `max_frame_size`; one frame-at-limit body in 16 goes
/// over it, the others stay 1 KiB under (the frame also carries the overlay prefix and the request header).
pub(super) fn hostile_body(
    kind: HostileKind,
    i: u64,
    ids: &[BlockId],
    frame_limit: usize,
    rng: &mut impl rand::Rng,
) -> Bytes {
    let id = ids[(i as usize) % ids.len()];
    let valid = |rng: &mut dyn rand::RngCore| -> Vec<u8> {
        match rng.next_u32() % 4 {
            0 => tl_proto::serialize(rpc::GetBlockFull { block_id: id }),
            1 => tl_proto::serialize(rpc::GetBlockDataChunk {
                block_id: id,
                offset: 0,
            }),
            2 => tl_proto::serialize(rpc::GetNextKeyBlockIds {
                block_id: id,
                max_size: 8,
            }),
            _ => tl_proto::serialize(rpc::GetArchiveChunk {
                archive_id: 1,
                offset: 0,
            }),
        }
    };
    Bytes::from(match kind {
        HostileKind::RandomBody => {
            let len = rng.gen_range(0..512);
            (0..len).map(|_| rng.gen::<u8>()).collect::<Vec<u8>>()
        }
        HostileKind::Truncated => {
            let mut body = valid(rng);
            let keep = rng.gen_range(0..body.len());
            body.truncate(keep);
            body
        }
        HostileKind::UnknownConstructor => {
            let mut id = rng.gen::<u32>();
            while proto::Method::from_id(id).is_some() {
                id = rng.gen();
            }
            let mut body = id.to_le_bytes().to_vec();
            body.extend((0..rng.gen_range(0..128)).map(|_| rng.gen::<u8>()));
            body
        }
        HostileKind::OffsetPastEnd => match i % 4 {
            0 => tl_proto::serialize(rpc::GetBlockDataChunk {
                block_id: id,
                offset: u32::MAX - rng.gen_range(0..1 << 20),
            }),
            1 => tl_proto::serialize(rpc::GetArchiveChunk {
                archive_id: 1,
                offset: (1 << 40) + (u64::from(rng.gen::<u16>()) << 20),
            }),
            2 => tl_proto::serialize(rpc::GetPersistentShardStateChunk {
                block_id: id,
                offset: u64::MAX - 1,
            }),
            _ => tl_proto::serialize(rpc::GetPersistentQueueStateChunk {
                block_id: id,
                offset: 1 << 50,
            }),
        },
        HostileKind::FrameAtLimit => {
            let mut body = tl_proto::serialize(rpc::GetBlockFull { block_id: id });
            let len = if (i / HostileKind::ALL.len() as u64) % 160 == 150 {
                frame_limit + 1
            } else {
                frame_limit - 1024
            };
            body.resize(len, 0xa5);
            body
        }
    })
}

/// How long a flooder waits for an answer: most of its queries get none, and it sends the next one instead.
const FLOOD_QUERY_TIMEOUT: Duration = Duration::from_millis(250);

/// The kind of the i-th flood query: the five kinds in turn, except that only every 10th frame-at-limit turn
/// sends one (8 MiB bodies would otherwise make the flood a bandwidth test); the others send random bodies.
fn flood_slot(i: u64) -> usize {
    let n = HostileKind::ALL.len() as u64;
    let slot = (i % n) as usize;
    if HostileKind::ALL[slot] == HostileKind::FrameAtLimit && !(i / n).is_multiple_of(10) {
        0
    } else {
        slot
    }
}

#[derive(Debug, Default)]
struct KindCounters {
    sent: AtomicU64,
    answered: AtomicU64,
}

/// The flood's figures for one kind of body.
#[derive(Debug, Clone, Serialize)]
pub(super) struct FloodKindReport {
    /// Kind of body.
    pub kind: HostileKind,
    /// Queries sent.
    pub sent: u64,
    /// Queries that got an answer.
    pub answered: u64,
}

/// One phase of the benchmark.
#[derive(Debug, Clone, Serialize)]
pub(super) struct PhaseReport {
    /// Whether `blockchain_rpc_service.rate_limits` was set (to its defaults).
    pub rate_limits: bool,
    /// Whether the hostile clients flooded the node.
    pub flood: bool,
    /// Wall time of the phase.
    pub seconds: f64,
    /// getBlockFull queries of the honest client.
    pub honest_queries: u64,
    /// ... answered with the right block.
    pub honest_ok: u64,
    /// Honest success rate (%).
    pub honest_success_pct: f64,
    /// Honest latency, median (ms).
    pub honest_p50_ms: f64,
    /// Honest latency, 99th percentile (ms).
    pub honest_p99_ms: f64,
    /// CPU time of the node process over the phase / wall time (%; 200 = both cores).
    pub node_cpu_pct: f64,
    /// Resident set of the node process at the end of the phase (MiB).
    pub node_rss_mib: f64,
    /// Peak resident set of the node process so far (MiB).
    pub node_peak_rss_mib: f64,
    /// Flood queries sent.
    pub flood_sent: u64,
    /// Flood queries answered.
    pub flood_answered: u64,
    /// Requests the node's limiter dropped during the phase (`regolith_rpc_rate_limit_drops_total`).
    pub limited: u64,
    /// Requests that reached the service (`regolith_rpc_requests_total`).
    pub served_requests: u64,
    /// The flood by kind.
    pub flood_kinds: Vec<FloodKindReport>,
}

/// Settings of the hostile benchmark (from `regolith bench rpc`).
#[derive(Debug, Clone)]
pub(super) struct HostileSettings {
    /// The fixtures directory.
    pub fixtures: PathBuf,
    /// Hostile clients, each from its own loopback IP.
    pub clients: usize,
    /// Queries in flight per hostile client.
    pub concurrency: usize,
    /// Seconds per phase.
    pub seconds: u64,
    /// getBlockFull queries per second of the honest client.
    pub honest_rps: u32,
    /// Print JSON instead of the table.
    pub json: bool,
}

/// The `regolith run` child and what the clients need to reach it.
struct ServingNode {
    child: Child,
    pid: u32,
    metrics: SocketAddr,
    overlay_id: [u8; 32],
    server: Arc<tycho_network::PeerInfo>,
}

impl Drop for ServingNode {
    fn drop(&mut self) {
        // A clean stop (SIGTERM), so that the next phase opens the data dir without recovery; SIGKILL after 30 s.
        // SAFETY: kill only sends a signal to the child's pid.
        unsafe { libc::kill(self.pid as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(30);
        while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_udp_port() -> Result<u16> {
    Ok(std::net::UdpSocket::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// `init` + `import` of the fixture chain into `root` through the binary itself.
fn prepare(exe: &Path, root: &Path, fixtures: &Path) -> Result<(SocketAddr, SocketAddr)> {
    let listen = SocketAddr::from(([127, 0, 0, 1], free_udp_port()?));
    let metrics = SocketAddr::from(([127, 0, 0, 1], free_tcp_port()?));
    for args in [
        vec![
            "init".to_string(),
            "--zerostate".into(),
            fixtures.join("zerostate.boc").display().to_string(),
            "--listen".into(),
            listen.to_string(),
            "--metrics".into(),
            metrics.to_string(),
        ],
        vec![
            "import".to_string(),
            "--quiet".into(),
            fixtures.join("archive_1.bin").display().to_string(),
        ],
    ] {
        let out = Command::new(exe)
            .arg("--data")
            .arg(root)
            .args(&args)
            .stdout(Stdio::null())
            .output()
            .with_context(|| format!("cannot run {} {}", exe.display(), args[0]))?;
        if !out.status.success() {
            bail!(
                "regolith {} failed: {}",
                args[0],
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    Ok((listen, metrics))
}

fn start_node(
    exe: &Path,
    data: &DataDir,
    listen: SocketAddr,
    metrics: SocketAddr,
    rate_limits: bool,
) -> Result<ServingNode> {
    let path = data.node_config();
    let mut config: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
    config["blockchain_rpc_service"]["rate_limits"] = if rate_limits {
        serde_json::json!({})
    } else {
        serde_json::Value::Null
    };
    write_secret_json(&path, &config)?;
    let node_config = data.load_node_config()?;
    let global = data.load_global_config()?;

    let log = std::fs::File::create(data.root.join("run.log"))?;
    let child = regolith_testbed::process::node_command(exe, &data.root)
        .env("RUST_LOG", "warn,tycho_network=off")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .context("cannot start regolith run")?;
    let pid = child.id();
    let node = ServingNode {
        child,
        pid,
        metrics,
        overlay_id: regolith_node::init::overlay_id(&global.zerostate),
        server: Arc::new(regolith_rpc::network::sign_peer_info(
            &node_config.secret_key()?,
            listen,
            Duration::from_secs(3600),
        )),
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while regolith_testbed::process::scrape_metrics(metrics).is_none() {
        if Instant::now() > deadline {
            bail!(
                "the node did not start in 60 s; see {}",
                data.root.join("run.log").display()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(node)
}

/// The sum of a counter over all its labels in a Prometheus text page.
fn counter_sum(text: &str, name: &str) -> u64 {
    text.lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

async fn run_phase(
    node: &ServingNode,
    ids: &Arc<Vec<BlockId>>,
    settings: &HostileSettings,
    flood: bool,
) -> Result<PhaseReport> {
    let frame_limit = tycho_network::NetworkConfig::default()
        .max_frame_size
        .as_u64() as usize;
    let connect = |ip: Ipv4Addr| {
        RawOverlayClient::connect(
            SocketAddr::new(IpAddr::V4(ip), 0),
            node.overlay_id,
            node.server.clone(),
            Default::default(),
        )
    };
    let honest = connect(Ipv4Addr::new(127, 0, 0, 2))?;
    let stop = Arc::new(AtomicBool::new(false));
    let counters: Arc<Vec<KindCounters>> = Arc::new(
        HostileKind::ALL
            .iter()
            .map(|_| Default::default())
            .collect(),
    );
    let mut flooders = Vec::new();
    if flood {
        for c in 0..settings.clients.max(1) {
            let client = Arc::new(connect(Ipv4Addr::new(127, 0, 0, 10 + c as u8))?);
            for k in 0..settings.concurrency.max(1) {
                let (client, ids, stop, counters) =
                    (client.clone(), ids.clone(), stop.clone(), counters.clone());
                flooders.push(tokio::spawn(async move {
                    use rand::SeedableRng;
                    let mut rng = rand::rngs::StdRng::seed_from_u64((c * 1000 + k) as u64);
                    let mut i = k as u64;
                    while !stop.load(Ordering::Relaxed) {
                        let slot = flood_slot(i);
                        let body =
                            hostile_body(HostileKind::ALL[slot], i, &ids, frame_limit, &mut rng);
                        counters[slot].sent.fetch_add(1, Ordering::Relaxed);
                        if let Ok(Ok(_)) =
                            tokio::time::timeout(FLOOD_QUERY_TIMEOUT, client.query(body)).await
                        {
                            counters[slot].answered.fetch_add(1, Ordering::Relaxed);
                        }
                        i += 1;
                    }
                }));
            }
        }
        // Let the flood reach full speed before measuring.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // The first query sets the connection up; it is not part of the figures.
    let warm_up = tl_proto::serialize(rpc::GetBlockFull { block_id: ids[0] });
    let _ = tokio::time::timeout(Duration::from_secs(10), honest.query(warm_up.into())).await;
    let metrics_before =
        regolith_testbed::process::scrape_metrics(node.metrics).unwrap_or_default();
    let (cpu_before, _, _) = process_usage(node.pid)?;
    let started = Instant::now();
    let deadline = started + Duration::from_secs(settings.seconds);
    let interval = Duration::from_secs_f64(1.0 / f64::from(settings.honest_rps.max(1)));
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let (mut queries, mut ok, mut latencies) = (0u64, 0u64, Vec::new());
    while Instant::now() < deadline {
        ticker.tick().await;
        let id = ids[(queries as usize) % ids.len()];
        let body = Bytes::from(tl_proto::serialize(rpc::GetBlockFull { block_id: id }));
        let sent = Instant::now();
        let answer = tokio::time::timeout(Duration::from_secs(5), honest.query(body)).await;
        queries += 1;
        if let Ok(Ok(answer)) = answer {
            let right = matches!(
                tl_proto::deserialize::<OverlayResponse<proto::BlockFull>>(&answer),
                Ok(OverlayResponse::Ok(proto::BlockFull::Found { block_id, .. })) if block_id == id
            );
            if right {
                ok += 1;
                latencies.push(sent.elapsed().as_secs_f64() * 1000.0);
            }
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let (cpu_after, rss, peak_rss) = process_usage(node.pid)?;
    let metrics_after = regolith_testbed::process::scrape_metrics(node.metrics).unwrap_or_default();
    stop.store(true, Ordering::Relaxed);
    for task in flooders {
        task.await?;
    }
    honest.network().shutdown().await;

    latencies.sort_by(f64::total_cmp);
    let delta = |name: &str| {
        counter_sum(&metrics_after, name).saturating_sub(counter_sum(&metrics_before, name))
    };
    let flood_kinds: Vec<FloodKindReport> = HostileKind::ALL
        .iter()
        .zip(counters.iter())
        .map(|(kind, c)| FloodKindReport {
            kind: *kind,
            sent: c.sent.load(Ordering::Relaxed),
            answered: c.answered.load(Ordering::Relaxed),
        })
        .collect();
    Ok(PhaseReport {
        rate_limits: false,
        flood,
        seconds,
        honest_queries: queries,
        honest_ok: ok,
        honest_success_pct: if queries > 0 {
            ok as f64 * 100.0 / queries as f64
        } else {
            0.0
        },
        honest_p50_ms: percentile(&latencies, 50.0),
        honest_p99_ms: percentile(&latencies, 99.0),
        node_cpu_pct: (cpu_after - cpu_before) / seconds * 100.0,
        node_rss_mib: rss,
        node_peak_rss_mib: peak_rss,
        flood_sent: flood_kinds.iter().map(|k| k.sent).sum(),
        flood_answered: flood_kinds.iter().map(|k| k.answered).sum(),
        limited: delta("regolith_rpc_rate_limit_drops_total"),
        served_requests: delta("regolith_rpc_requests_total"),
        flood_kinds,
    })
}

fn block_ids(fixtures: &Path) -> Result<Vec<BlockId>> {
    let archive = std::fs::File::open(fixtures.join("archive_1.bin"))?;
    let mut reader = ArchiveReader::new_compressed(std::io::BufReader::new(archive))?;
    let mut ids = Vec::new();
    while let Some(entry) = reader.next_entry().map_err(|e| anyhow::anyhow!("{e}"))? {
        if entry.ty == ArchiveEntryType::Block {
            ids.push(entry.block_id);
        }
    }
    Ok(ids)
}

/// Runs the four phases and prints the tables (or JSON).
pub(super) async fn hostile(settings: HostileSettings) -> Result<()> {
    let exe = std::env::current_exe().context("cannot find the regolith binary")?;
    let dir = tempfile::tempdir()?;
    let data = DataDir::new(dir.path().join("node"));
    let (listen, metrics) = prepare(&exe, &data.root, &settings.fixtures)?;
    let ids = Arc::new(block_ids(&settings.fixtures)?);
    if !settings.json {
        println!(
            "regolith bench rpc --hostile: a `regolith run` child serves the fixture chain ({} blocks) on {listen}; \
             1 honest client (127.0.0.2, getBlockFull at {}/s) and {} hostile clients (127.0.0.10.., {} in flight each); \
             {} s per phase",
            ids.len(),
            settings.honest_rps,
            settings.clients,
            settings.concurrency,
            settings.seconds
        );
    }
    let mut phases = Vec::new();
    for rate_limits in [false, true] {
        let node = start_node(&exe, &data, listen, metrics, rate_limits)?;
        for flood in [false, true] {
            let mut report = run_phase(&node, &ids, &settings, flood).await?;
            report.rate_limits = rate_limits;
            phases.push(report);
        }
        drop(node);
    }
    if settings.json {
        println!("{}", serde_json::to_string_pretty(&phases)?);
    } else {
        print_tables(&phases);
    }
    Ok(())
}

fn print_tables(phases: &[PhaseReport]) {
    println!();
    println!(
        "| rate limits | flood | honest ok | success | p50 ms | p99 ms | node CPU | node RSS (peak) | flood sent | flood answered | limited |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for p in phases {
        println!(
            "| {} | {} | {}/{} | {:.1}% | {:.2} | {:.2} | {:.0}% | {:.0} MiB ({:.0}) | {} | {} | {} |",
            if p.rate_limits { "on" } else { "off" },
            if p.flood { "yes" } else { "no" },
            p.honest_ok,
            p.honest_queries,
            p.honest_success_pct,
            p.honest_p50_ms,
            p.honest_p99_ms,
            p.node_cpu_pct,
            p.node_rss_mib,
            p.node_peak_rss_mib,
            p.flood_sent,
            p.flood_answered,
            p.limited
        );
    }
    println!();
    println!("| rate limits | kind | sent | answered |");
    println!("|---|---|---|---|");
    for p in phases.iter().filter(|p| p.flood) {
        for k in &p.flood_kinds {
            println!(
                "| {} | {} | {} | {} |",
                if p.rate_limits { "on" } else { "off" },
                k.kind.name(),
                k.sent,
                k.answered
            );
        }
    }
    println!();
    println!(
        "CPU: the node process's utime+stime over the phase (200% = both cores); RSS from /proc/PID/status. \
         `limited`: requests the node's limiter dropped (regolith_rpc_rate_limit_drops_total), unknown \
         constructors included."
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use regolith_formats::{HashBytes, ShardIdent};
    use regolith_rpc::proto::RpcRequest;

    #[test]
    fn each_kind_of_hostile_body_is_what_it_says() {
        let ids = vec![BlockId {
            shard: ShardIdent::MASTERCHAIN,
            seqno: 5,
            root_hash: HashBytes([1; 32]),
            file_hash: HashBytes([2; 32]),
        }];
        let limit = 8 << 20;
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for i in 0..400u64 {
            let kind = HostileKind::ALL[(i as usize) % HostileKind::ALL.len()];
            let body = hostile_body(kind, i, &ids, limit, &mut rng);
            match kind {
                HostileKind::RandomBody => assert!(body.len() < 512),
                HostileKind::Truncated | HostileKind::UnknownConstructor => {
                    assert!(RpcRequest::decode(&body).is_err(), "{kind:?} {body:02x?}");
                }
                HostileKind::OffsetPastEnd => assert!(RpcRequest::decode(&body).is_ok()),
                HostileKind::FrameAtLimit => {
                    assert!(body.len() == limit - 1024 || body.len() == limit + 1);
                    assert!(matches!(
                        RpcRequest::decode(&body),
                        Ok(RpcRequest::GetBlockFull(_))
                    ));
                }
            }
        }
    }

    #[test]
    fn proc_figures_of_this_process() {
        let (cpu, rss, peak) = process_usage(std::process::id()).unwrap();
        assert!(cpu >= 0.0);
        assert!(rss > 0.0 && peak >= rss, "{rss} {peak}");
    }

    #[test]
    fn counters_are_summed_over_labels() {
        let text = "# TYPE x counter\nregolith_rpc_rate_limit_drops_total{class=\"heavy\"} 5\n\
                    regolith_rpc_rate_limit_drops_total{class=\"unknown\"} 7\nregolith_rpc_requests_total 3\n";
        assert_eq!(counter_sum(text, "regolith_rpc_rate_limit_drops_total"), 12);
        assert_eq!(counter_sum(text, "regolith_rpc_requests_total"), 3);
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0], 50.0), 2.0);
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0], 99.0), 4.0);
    }
}
