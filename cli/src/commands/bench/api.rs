//! `regolith bench api`: the account API of a `regolith run` child while it syncs a generated chain from an
//! in-process serving node: getContractState and getTransactionsList requests/s and latency p50/p99 at 1 and
//! 32 concurrent HTTP/1.1 keep-alive clients (one OS thread and connection each), then, once the node is at
//! the tip, the transactions index's bytes per transaction.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use regolith_formats::persistent_state::{parse_state_object_name, StateObject, StatePart};
use regolith_storage::StateKind;
use regolith_testbed::fixture::{ChainFiles, ChainServers};
use regolith_testbed::process::{free_tcp_port, metric, RunningNode};
use tycho_types::models::ShardStateUnsplit;

use crate::commands::chain::{ChainShapeArgs, GenerateArgs};

/// Arguments of `regolith bench api`.
#[derive(clap::Args, Debug, Clone)]
pub struct ApiBenchArgs {
    /// The fixtures directory (zerostate.boc: the generated chain's config).
    #[arg(long, default_value = "../shared/fixtures")]
    pub fixtures: PathBuf,
    /// A chain `regolith chain generate` wrote (with at least one persistent key block: the accounts are read
    /// from its newest state files); without it one is generated with `--generate` mc blocks.
    #[arg(long)]
    pub chain: Option<PathBuf>,
    /// Mc blocks of the chain generated for the run.
    #[arg(long, default_value_t = 2000)]
    pub generate: u32,
    /// The shape of the generated chain (`--accounts` defaults to 16 there; this benchmark wants ≥ 10,000).
    #[command(flatten)]
    pub shape: ChainShapeArgs,
    /// Concurrent clients, one measurement each (comma-separated).
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 32])]
    pub clients: Vec<usize>,
    /// Seconds of each measurement.
    #[arg(long, default_value_t = 5)]
    pub seconds: u64,
}

/// Runs the benchmark.
pub(super) async fn api(args: ApiBenchArgs) -> Result<()> {
    let exe = std::env::current_exe().context("cannot find the regolith binary")?;
    let temp = tempfile::tempdir()?;
    let chain_dir = match &args.chain {
        Some(dir) => dir.clone(),
        None => {
            let out = temp.path().join("chain");
            let started = Instant::now();
            let summary = crate::commands::chain::generate(&GenerateArgs {
                out: out.clone(),
                base_zerostate: args.fixtures.join("zerostate.boc"),
                mc_blocks: args.generate,
                shape: args.shape.clone(),
                mc_blocks_per_archive: 100,
                json: false,
            })?;
            println!(
                "generated {} mc blocks ({} blocks) with {} accounts a chain in {:.1} s",
                summary.mc_blocks,
                summary.blocks,
                args.shape.accounts,
                started.elapsed().as_secs_f64()
            );
            out
        }
    };
    let accounts = chain_accounts(&chain_dir)?;
    if accounts.is_empty() {
        bail!("{} has no state file with accounts", chain_dir.display());
    }
    let chain = ChainFiles::generated(&chain_dir)?;
    let servers = ChainServers::start_chain(&chain, 1).await?;
    let peers = servers
        .nodes
        .iter()
        .map(|s| serde_json::to_value(s.network.signed_peer_info(Duration::from_secs(3600))))
        .collect::<Result<_, _>>()?;
    let work = temp.path().join("node");
    let (data, metrics) = regolith_testbed::process::prepare(
        &work,
        &chain.zerostate,
        peers,
        false,
        regolith_node::boot::cold_boot::BootConfig::Genesis,
    )?;
    let api: SocketAddr = SocketAddr::from(([127, 0, 0, 1], free_tcp_port()?));
    let mut config = data.load_node_config()?;
    config.api_address = Some(api);
    regolith_node::files::write_secret_json(&data.node_config(), &config)?;
    let mut node = RunningNode::spawn(&exe, &data, metrics)?;
    let result = measure(&args, &mut node, api, &accounts, &data.root).await;
    node.stop().await?;
    servers.shutdown().await;
    result
}

async fn measure(
    args: &ApiBenchArgs,
    node: &mut RunningNode,
    api: SocketAddr,
    accounts: &[String],
    root: &Path,
) -> Result<()> {
    let height = |node: &RunningNode| {
        node.scrape()
            .and_then(|page| metric(&page, "regolith_sync_last_applied_mc_seqno", None))
            .unwrap_or(0.0) as u32
    };
    // Once the node answers with an account, while it syncs (block by block: the sync lasts).
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        if let Some(status) = node.exited()? {
            bail!(
                "the node exited ({status}); see {}",
                root.join("run.log").display()
            );
        }
        if height(node) >= 5 && get_contract_state(api, &accounts[0]).is_ok() {
            break;
        }
        if Instant::now() > deadline {
            bail!("the node's API did not answer in 600 s");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!(
        "regolith bench api: {} accounts, a `regolith run` syncing over QUIC, HTTP/1.1 keep-alive clients, {} s each",
        accounts.len(),
        args.seconds
    );
    println!(
        "{:>20}  {:>7}  {:>10}  {:>9}  {:>9}  {:>13}",
        "method", "clients", "requests/s", "p50 ms", "p99 ms", "mc during run"
    );
    for method in ["getContractState", "getTransactionsList"] {
        for &clients in &args.clients {
            let from = height(node);
            let (requests, latencies, elapsed) = {
                let accounts = accounts.to_vec();
                let (seconds, method) = (args.seconds, method.to_string());
                tokio::task::spawn_blocking(move || {
                    load(
                        api,
                        &accounts,
                        &method,
                        clients,
                        Duration::from_secs(seconds),
                    )
                })
                .await??
            };
            let to = height(node);
            let (p50, p99) = percentiles(latencies);
            println!(
                "{method:>20}  {clients:>7}  {:>10.0}  {:>9.2}  {:>9.2}  {:>6} → {:<5}",
                requests as f64 / elapsed.as_secs_f64(),
                p50 * 1e3,
                p99 * 1e3,
                from,
                to
            );
        }
    }
    // The index's size per transaction, once everything is indexed.
    let tip = loop {
        if let Some(page) = node.scrape() {
            let last = metric(&page, "regolith_sync_last_applied_mc_seqno", None).unwrap_or(0.0);
            let indexed = metric(&page, "regolith_api_index_last_mc_seqno", None).unwrap_or(0.0);
            let lag = metric(&page, "regolith_sync_lag_blocks", None).unwrap_or(1.0);
            if last > 0.0 && indexed == last && lag == 0.0 {
                break page;
            }
        }
        if let Some(status) = node.exited()? {
            bail!("the node exited ({status})");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let transactions = metric(&tip, "regolith_api_index_transactions_total", None).unwrap_or(0.0);
    let bytes = dir_bytes(&root.join("api"))?;
    println!(
        "index: {transactions:.0} transactions in {:.1} MiB on disk ({:.0} bytes per transaction; uncompacted SST and WAL included)",
        bytes as f64 / 1048576.0,
        bytes as f64 / transactions.max(1.0)
    );
    Ok(())
}

/// `clients` threads, each sending `method` for the accounts in turn over one keep-alive connection, for
/// `duration`: requests answered, each latency, the time taken.
fn load(
    api: SocketAddr,
    accounts: &[String],
    method: &str,
    clients: usize,
    duration: Duration,
) -> Result<(u64, Vec<f64>, Duration)> {
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let threads: Vec<_> = (0..clients)
        .map(|c| {
            let (accounts, method, stop) = (accounts.to_vec(), method.to_string(), stop.clone());
            std::thread::spawn(move || -> Result<Vec<f64>> {
                let mut connection = Connection::open(api)?;
                let mut latencies = Vec::new();
                let mut i = c;
                while !stop.load(Ordering::Relaxed) {
                    let account = &accounts[i % accounts.len()];
                    let body = match method.as_str() {
                        "getContractState" => serde_json::json!({
                            "jsonrpc": "2.0", "id": i, "method": "getContractState",
                            "params": {"address": account}}),
                        _ => serde_json::json!({
                            "jsonrpc": "2.0", "id": i, "method": "getTransactionsList",
                            "params": {"account": account, "limit": 10}}),
                    };
                    let sent = Instant::now();
                    let answer = connection.post(&body.to_string())?;
                    latencies.push(sent.elapsed().as_secs_f64());
                    if !answer.contains("\"result\"") {
                        bail!("{method}: {answer}");
                    }
                    i += clients;
                }
                Ok(latencies)
            })
        })
        .collect();
    std::thread::sleep(duration);
    stop.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    for thread in threads {
        all.extend(
            thread
                .join()
                .map_err(|_| anyhow::anyhow!("a client panicked"))??,
        );
    }
    Ok((all.len() as u64, all, started.elapsed()))
}

fn percentiles(mut latencies: Vec<f64>) -> (f64, f64) {
    if latencies.is_empty() {
        return (0.0, 0.0);
    }
    latencies.sort_by(f64::total_cmp);
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.99))
}

/// One HTTP/1.1 keep-alive connection.
struct Connection {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    host: SocketAddr,
}

impl Connection {
    fn open(host: SocketAddr) -> Result<Self> {
        let stream = TcpStream::connect(host)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        Ok(Self {
            reader: BufReader::new(stream.try_clone()?),
            writer: stream,
            host,
        })
    }

    /// POSTs a JSON body to `/` and returns the answer's body.
    fn post(&mut self, body: &str) -> Result<String> {
        write!(
            self.writer,
            "POST / HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            self.host,
            body.len()
        )?;
        let mut length = None;
        let mut line = String::new();
        loop {
            line.clear();
            if self.reader.read_line(&mut line)? == 0 {
                bail!("the connection closed");
            }
            let trimmed = line.trim_end();
            if trimmed.is_empty() {
                break;
            }
            if let Some((name, value)) = trimmed.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = Some(value.trim().parse::<usize>()?);
                }
            }
        }
        let length = length.context("an answer without Content-Length")?;
        let mut answer = vec![0u8; length];
        self.reader.read_exact(&mut answer)?;
        Ok(String::from_utf8_lossy(&answer).into_owned())
    }
}

fn get_contract_state(api: SocketAddr, account: &str) -> Result<String> {
    let body = serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "getContractState", "params": {"address": account}});
    let answer = Connection::open(api)?.post(&body.to_string())?;
    if answer.contains("\"result\"") {
        Ok(answer)
    } else {
        bail!("{answer}")
    }
}

/// The addresses of every account in the chain's newest shard-state files.
fn chain_accounts(chain: &Path) -> Result<Vec<String>> {
    let dir = chain.join("states");
    let mut newest: std::collections::BTreeMap<String, (u32, PathBuf)> = Default::default();
    for entry in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        let Some(StateObject::State(id, StateKind::Shard, StatePart::Unsplit)) =
            parse_state_object_name(&name)
        else {
            continue;
        };
        let shard = id.shard.to_string();
        if newest
            .get(&shard)
            .is_none_or(|(seqno, _)| id.seqno > *seqno)
        {
            newest.insert(shard, (id.seqno, dir.join(&name)));
        }
    }
    let mut accounts = Vec::new();
    for (_, path) in newest.values() {
        let raw = zstd::decode_all(std::fs::File::open(path)?)?;
        let root = tycho_types::boc::Boc::decode(&raw)?;
        let state = root.parse::<ShardStateUnsplit>()?;
        let workchain = state.shard_ident.workchain();
        for item in state.load_accounts()?.iter() {
            let (id, _, _) = item?;
            accounts.push(format!("{workchain}:{id}"));
        }
    }
    Ok(accounts)
}

/// The bytes of the files under `dir`.
fn dir_bytes(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        total += if meta.is_dir() {
            dir_bytes(&entry.path())?
        } else {
            meta.len()
        };
    }
    Ok(total)
}
