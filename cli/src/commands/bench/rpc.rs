//! `regolith bench rpc`: concurrent raw clients on loopback against an in-process node serving the fixture
//! chain. Prints requests/s, MiB/s and CPU time per request for getBlockFull, getBlockDataChunk and
//! getArchiveChunk.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use bytes::Bytes;
use regolith_formats::archive::ArchiveReader;
use regolith_node::config::GlobalConfig;
use regolith_rpc::proto::rpc;
use regolith_rpc::RawOverlayClient;

/// Arguments of `regolith bench rpc`.
#[derive(clap::Args, Debug, Clone)]
pub struct RpcBenchArgs {
    /// The fixtures directory (zerostate.boc, archive_1.bin).
    #[arg(long, default_value = "../shared/fixtures")]
    pub fixtures: PathBuf,
    /// Client nodes (each its own QUIC endpoint).
    #[arg(long, default_value_t = 4)]
    pub clients: usize,
    /// Requests in flight per client.
    #[arg(long, default_value_t = 8)]
    pub concurrency: usize,
    /// Seconds per method (with `--hostile`: per phase).
    #[arg(long, default_value_t = 5)]
    pub seconds: u64,
    /// Hostile load instead: a `regolith run` child serves the fixture chain to one honest client while
    /// `--hostile-clients` flood it, with rate limits off and on.
    #[arg(long)]
    pub hostile: bool,
    /// Hostile clients (`--hostile`), each from its own loopback IP.
    #[arg(long, default_value_t = 4)]
    pub hostile_clients: usize,
    /// Queries in flight per hostile client (`--hostile`).
    #[arg(long, default_value_t = 32)]
    pub hostile_concurrency: usize,
    /// getBlockFull queries per second of the honest client (`--hostile`; the default heavy limit is 10/s).
    #[arg(long, default_value_t = 8)]
    pub honest_rps: u32,
    /// Print JSON (`--hostile`).
    #[arg(long)]
    pub json: bool,
}

/// Builds the i-th request body of a method.
type RequestMaker = Box<dyn Fn(usize) -> Bytes + Send + Sync>;

fn cpu_time() -> Duration {
    // SAFETY: rusage is plain integers, for which all-zero bytes are a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage only writes into the struct we pass, which lives for the call.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// Runs the benchmark and prints one line per method.
pub(super) async fn rpc(args: RpcBenchArgs) -> Result<()> {
    if args.hostile {
        return super::hostile::hostile(super::hostile::HostileSettings {
            fixtures: args.fixtures,
            clients: args.hostile_clients,
            concurrency: args.hostile_concurrency,
            seconds: args.seconds,
            honest_rps: args.honest_rps,
            json: args.json,
        })
        .await;
    }
    let dir = tempfile_dir()?;
    let listen = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    let (data, config, storage) =
        regolith_testbed::fixture::import_fixture_chain(&dir, &args.fixtures, listen).await?;
    regolith_testbed::fixture::start_next_archive(&storage).await?;
    let global: GlobalConfig = data.load_global_config()?;
    let node = regolith_node::run::start_node(&config, &global, storage.clone())?;
    let server = Arc::new(node.network.signed_peer_info(Duration::from_secs(3600)));

    let archive = std::fs::File::open(args.fixtures.join("archive_1.bin"))?;
    let mut reader = ArchiveReader::new_compressed(std::io::BufReader::new(archive))?;
    let mut ids = Vec::new();
    while let Some(entry) = reader.next_entry().map_err(|e| anyhow::anyhow!("{e}"))? {
        if entry.ty == regolith_formats::archive::ArchiveEntryType::Block {
            ids.push(entry.block_id);
        }
    }
    let archive_size = storage
        .archives()
        .get_archive_size(1)?
        .context("archive 1 committed")?;

    let mut clients = Vec::new();
    for _ in 0..args.clients.max(1) {
        clients.push(Arc::new(RawOverlayClient::connect(
            std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
            node.overlay_id,
            server.clone(),
            Default::default(),
        )?));
    }

    println!(
        "regolith bench rpc: {} clients x {} in flight, {} s per method, loopback QUIC, fixture chain ({} blocks, archive 1 = {} B)",
        clients.len(),
        args.concurrency,
        args.seconds,
        ids.len(),
        archive_size
    );
    println!("CPU time is the whole process (server and clients share it), per answered request.");
    let methods: [(&str, RequestMaker); 3] = [
        (
            "getBlockFull",
            Box::new({
                let ids = ids.clone();
                move |i| {
                    Bytes::from(tl_proto::serialize(rpc::GetBlockFull {
                        block_id: ids[i % ids.len()],
                    }))
                }
            }),
        ),
        (
            "getBlockDataChunk",
            Box::new({
                let ids = ids.clone();
                move |i| {
                    Bytes::from(tl_proto::serialize(rpc::GetBlockDataChunk {
                        block_id: ids[i % ids.len()],
                        offset: 0,
                    }))
                }
            }),
        ),
        (
            "getArchiveChunk",
            Box::new(|_| {
                Bytes::from(tl_proto::serialize(rpc::GetArchiveChunk {
                    archive_id: 1,
                    offset: 0,
                }))
            }),
        ),
    ];
    for (name, make) in methods {
        let make = Arc::new(make);
        let requests = Arc::new(AtomicU64::new(0));
        let bytes = Arc::new(AtomicU64::new(0));
        let errors = Arc::new(AtomicU64::new(0));
        let deadline = Instant::now() + Duration::from_secs(args.seconds);
        let cpu_before = cpu_time();
        let started = Instant::now();
        let mut tasks = Vec::new();
        for (c, client) in clients.iter().enumerate() {
            for k in 0..args.concurrency.max(1) {
                let (client, make, requests, bytes, errors) = (
                    client.clone(),
                    make.clone(),
                    requests.clone(),
                    bytes.clone(),
                    errors.clone(),
                );
                tasks.push(tokio::spawn(async move {
                    let mut i = c * 1000 + k * 7;
                    while Instant::now() < deadline {
                        match client.query(make(i)).await {
                            Ok(answer) => {
                                requests.fetch_add(1, Ordering::Relaxed);
                                bytes.fetch_add(answer.len() as u64, Ordering::Relaxed);
                            }
                            Err(_) => {
                                errors.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        i += 1;
                    }
                }));
            }
        }
        for task in tasks {
            task.await?;
        }
        let elapsed = started.elapsed().as_secs_f64();
        let cpu = (cpu_time() - cpu_before).as_secs_f64();
        let n = requests.load(Ordering::Relaxed);
        let b = bytes.load(Ordering::Relaxed) as f64;
        println!(
            "{name:<18} {:>9.0} req/s  {:>8.2} MiB/s  {:>7.1} us CPU/req  ({} requests, {} errors, {:.1} s)",
            n as f64 / elapsed,
            b / elapsed / (1024.0 * 1024.0),
            if n > 0 { cpu / n as f64 * 1e6 } else { 0.0 },
            n,
            errors.load(Ordering::Relaxed),
            elapsed
        );
    }
    node.shutdown().await;
    drop(storage);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn tempfile_dir() -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("regolith-bench-rpc-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
