//! The `regolith` binary: initialise a node from a zerostate, import archives, inspect the data directory
//! and run the node.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use regolith_node::block_ref::BlockRef;
use regolith_node::config::DataDir;
use regolith_node::{
    bench, import, init, inspect, ledger_cmd, open_storage, progress, queue_state, run,
};

#[derive(Parser)]
#[command(
    name = "regolith",
    version,
    about = "A node core for Tycho-style sharded TVM blockchains"
)]
struct Cli {
    /// The data directory.
    #[arg(long, global = true, default_value = "data")]
    data: PathBuf,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create the data directory, node config and global config from a masterchain zerostate.
    Init {
        /// The zerostate BOC.
        #[arg(long)]
        zerostate: PathBuf,
        /// A shard zerostate BOC (repeatable); a listed shard without one gets the empty shard zerostate.
        #[arg(long = "shard-zerostate")]
        shard_zerostates: Vec<PathBuf>,
        /// The QUIC listen address (`listen_address`, default 127.0.0.1:30310).
        #[arg(long)]
        listen: Option<SocketAddr>,
        /// The address announced to peers (`public_address`, default: the listen address).
        #[arg(long)]
        public_address: Option<SocketAddr>,
        /// The metrics endpoint address, or `off` (`metrics_address`, default 127.0.0.1:30311).
        #[arg(long, value_parser = parse_metrics_address)]
        metrics: Option<MetricsAddress>,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Import archives into block storage, in order.
    Import {
        /// Archive files (zstd-compressed).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// No progress bar.
        #[arg(long)]
        quiet: bool,
        /// Print the reports as JSON.
        #[arg(long)]
        json: bool,
        /// Persistent state files (`{B}.boc`, `{B}.queue`) to store as served states after the archives.
        #[arg(long)]
        states: Option<PathBuf>,
    },
    /// Show what the data directory holds.
    Inspect {
        /// Print JSON.
        #[arg(long, global = true)]
        json: bool,
        #[command(subcommand)]
        what: InspectCommand,
    },
    /// Import a persistent queue state (zstd-compressed or plain TL `block.queueState`) into the queue.
    ImportQueueState {
        /// The block of the state: full id, `wc:prefix:seqno` or an mc seqno of a stored block.
        #[arg(long, allow_hyphen_values = true)]
        block: BlockRef,
        /// The queue-state file.
        #[arg(long)]
        file: PathBuf,
        /// Expected hash of the newest diff (hex); default: the stored block's `diff_hash`.
        #[arg(long)]
        diff_hash: Option<String>,
        /// Expected number of diffs; default: the stored block's `tail_len`.
        #[arg(long)]
        tail_len: Option<u32>,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run the node until SIGINT/SIGTERM.
    Run {
        /// How a data dir with only the zerostate boots, this once: `latest-persistent` (from the newest
        /// persistent state the network serves) or `genesis` (node.json `boot` otherwise).
        #[arg(long)]
        boot: Option<regolith_node::cold_boot::BootConfig>,
    },
    /// Benchmarks that print figures.
    Bench {
        #[command(subcommand)]
        what: BenchCommand,
    },
    /// The receiver journal of cross-chain announcements (`<data>/ledger`).
    Ledger(ledger_cmd::LedgerArgs),
    /// N `regolith run` processes on 127.0.0.1: node1 serves the imported fixture chain, the others sync from
    /// it. Shows every node's height until Ctrl-C.
    Devnet(regolith_node::devnet::DevnetArgs),
    /// Talk to a Tycho network: fetch blocks, archives, states and proofs from peers, send messages.
    P2p(regolith_node::p2p::P2pArgs),
    /// Generated chains: `chain generate` writes a chain of real, signed blocks.
    Chain(regolith_node::chain_cmd::ChainArgs),
}

#[derive(Subcommand)]
enum InspectCommand {
    /// One block: by id (`wc:prefix:seqno:root:file`) or by masterchain seqno.
    Block {
        /// Block id (`wc:prefix:seqno[:root:file]`) or mc seqno.
        #[arg(allow_hyphen_values = true)]
        block: BlockRef,
    },
    /// The persistent states the node serves (the state index).
    States,
    /// The key-block index.
    KeyBlocks,
    /// Archives and their state.
    Archives,
    /// Blocks per shard, last applied mc block, startup check counts.
    Summary {
        /// Also print a BLAKE3 digest of every stored block's data, proof, queue diff and connections
        /// (equal on two nodes that hold the same chain).
        #[arg(long)]
        digest: bool,
    },
    /// The internal queue: commit pointers, diffs per shard with zones and counts, GC bounds.
    Queue {
        /// Also print a BLAKE3 digest of the whole queue content (reads every message).
        #[arg(long)]
        digest: bool,
    },
}

#[derive(Subcommand)]
enum BenchCommand {
    /// Block-handle storage on the reference workload: create, load, setters, connections (fresh temp dirs).
    Handles {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Number of block ids (half mc, half wc 0).
        #[arg(long, default_value_t = bench::HANDLES_DEFAULT_COUNT)]
        count: usize,
        /// Run only the cases whose name contains this text (e.g. `flushed`), for profiling one case.
        #[arg(long)]
        case: Option<String>,
    },
    /// Concurrent raw clients on loopback against an in-process node serving archive_1: getBlockFull,
    /// getBlockDataChunk and getArchiveChunk. Uses a temporary data directory, not --data.
    Rpc(bench::RpcBenchArgs),
    /// The blockchain RPC client downloading from 1 and 3 in-process serving peers on loopback: a 2.5 MiB
    /// block and an archive in MiB/s, getBlockFull latency p50/p99.
    Client(bench::ClientBenchArgs),
    /// A fresh `regolith run` syncs the fixture chain or a generated one (`--chain`, `--generate`) from 1 and
    /// 3 in-process serving nodes: blocks/s, MiB/s and peak RSS, block by block, from archives, and cold-booted.
    Sync(bench::SyncBenchArgs),
    /// The internal-queue cases of queue.md §12 (fresh temp databases; build with --release).
    Queue {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Smaller workloads, for a quick look.
        #[arg(long)]
        quick: bool,
        /// Only these cases (comma-separated names as printed).
        #[arg(long, value_delimiter = ',')]
        cases: Vec<String>,
        /// The queue-state file for the import case.
        #[arg(long, default_value = "../shared/fixtures/queue_state/shard.bin")]
        import_file: PathBuf,
    },
}

/// `--metrics ADDR|off`.
#[derive(Debug, Clone, Copy)]
struct MetricsAddress(Option<SocketAddr>);

fn parse_metrics_address(text: &str) -> Result<MetricsAddress, String> {
    if text.eq_ignore_ascii_case("off") {
        return Ok(MetricsAddress(None));
    }
    text.parse()
        .map(|a| MetricsAddress(Some(a)))
        .map_err(|_| format!("{text:?} is neither an address (IP:PORT) nor `off`"))
}

/// Logs to stderr, in colour only on a terminal; `RUST_LOG` overrides `default_level`.
fn init_logging(default_level: &str) {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .init();
}

fn main() {
    let cli = Cli::parse();
    // Output piped into `head` ends quietly, as with any Unix tool, instead of panicking on a closed pipe.
    // The node itself (`run`) keeps SIGPIPE ignored: a closed stdout must not kill it.
    if !matches!(cli.command, Command::Run { .. } | Command::Devnet(_)) {
        // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    // Benchmarks print figures and `p2p` prints its answer; the network's info logs would drown both.
    init_logging(match cli.command {
        Command::Bench { .. } => "warn,tycho_network=off",
        Command::P2p(_) => "warn,tycho_network=error",
        _ => "info",
    });
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = runtime.block_on(execute(cli)) {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

async fn execute(cli: Cli) -> Result<()> {
    let data = DataDir::new(cli.data);
    match cli.command {
        Command::Init {
            zerostate,
            shard_zerostates,
            listen,
            public_address,
            metrics,
            json,
        } => {
            let options = init::InitOptions {
                listen,
                public_address,
                metrics: metrics.map(|m| m.0),
                shard_zerostates,
            };
            let report = init::init(&data, &zerostate, &options)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                if report.created {
                    println!("initialised {}", data.root.display());
                } else {
                    println!(
                        "{} is already initialised with this zerostate",
                        data.root.display()
                    );
                }
                println!("zerostate id: {}", report.zerostate_id);
                println!("overlay id:   {}", report.overlay_id);
                println!("peer id:      {}", report.peer_id);
                println!("address:      {}", report.address);
            }
        }
        Command::Import {
            files,
            quiet,
            json,
            states,
        } => {
            let config = data.load_node_config()?;
            for file in &files {
                if !file.is_file() {
                    bail!("archive {} does not exist or is not a file", file.display());
                }
            }
            // No queue GC during import: the committed queue must end exactly as a clean import leaves it.
            let regolith_node::start::Started { storage, queue, .. } =
                regolith_node::start::start(&data.root, &config, Default::default()).await?;
            let progress = progress::Progress::new(quiet || json);
            let mut pipeline = regolith_node::apply::Pipeline::new(
                &storage,
                &queue,
                &import::ImportOptions::default(),
            )?;
            for file in &files {
                let report =
                    import::import_archive_into(&mut pipeline, &storage, file, &progress).await?;
                if json {
                    println!("{}", serde_json::to_string(&report)?);
                } else if report.blocks_imported == 0 {
                    println!(
                        "{}: nothing to do, all {} blocks are already imported (last applied mc block {})",
                        report.file, report.blocks_in_archive, report.last_mc_seqno
                    );
                } else {
                    println!(
                        "{}: imported {} blocks ({} already present) in {} ms; last applied mc block {}",
                        report.file,
                        report.blocks_imported,
                        report.blocks_already_present,
                        report.elapsed_ms,
                        report.last_mc_seqno
                    );
                }
            }
            if let Some(dir) = states {
                let report = regolith_node::state_import::import_states(&storage, &dir).await?;
                if json {
                    println!("{}", serde_json::to_string(&report)?);
                } else {
                    println!(
                        "{}: stored {} shard states and {} queue states ({} already present)",
                        dir.display(),
                        report.shard_states,
                        report.queue_states,
                        report.already_present
                    );
                }
            }
        }
        Command::Inspect {
            json,
            what: InspectCommand::Queue { digest },
        } => {
            data.load_node_config()?;
            let view = inspect::queue(&data.root, digest)?;
            if json {
                inspect::print(&view, true);
            } else {
                inspect::print_queue_text(&view);
            }
        }
        Command::Inspect { json, what } => {
            let config = data.load_node_config()?;
            let storage = inspect::open_for_inspect(config.storage)?;
            let value = match what {
                InspectCommand::Queue { .. } => unreachable!("handled above"),
                InspectCommand::Block { block } => inspect::block(&storage, &block).await?,
                InspectCommand::KeyBlocks => inspect::key_blocks(&storage)?,
                InspectCommand::States => inspect::states(&storage)?,
                InspectCommand::Archives => inspect::archives(&storage)?,
                InspectCommand::Summary { digest } => {
                    let mut value = inspect::summary(&storage)?;
                    if digest {
                        value["chain_digest"] = inspect::chain_digest(&storage).await?.into();
                    }
                    value
                }
            };
            inspect::print(&value, json);
        }
        Command::ImportQueueState {
            block,
            file,
            diff_hash,
            tail_len,
            json,
        } => {
            let config = data.load_node_config()?;
            let diff_hash = diff_hash
                .map(|h| parse_hash(&h).context("--diff-hash"))
                .transpose()?;
            let storage = open_storage(config.storage)?;
            let report =
                queue_state::import(&data.root, &storage, &block, &file, diff_hash, tail_len)
                    .await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                println!(
                    "imported the queue state of {}: {} diffs, {} messages (diff hash {}, tail_len {})",
                    report.block, report.diffs, report.messages, report.diff_hash, report.tail_len
                );
            }
        }
        Command::Bench {
            what:
                BenchCommand::Queue {
                    json,
                    quick,
                    cases,
                    import_file,
                },
        } => bench::queue(json, quick, &cases, &import_file)?,
        Command::Run { boot } => run::run(&data, boot).await?,
        Command::Ledger(args) => ledger_cmd::run(&data.root, args)?,
        Command::Chain(args) => regolith_node::chain_cmd::run(args)?,
        Command::Devnet(args) => regolith_node::devnet::run(args).await?,
        Command::P2p(args) => {
            let json = args.json;
            let value = regolith_node::p2p::run(&data, args).await?;
            inspect::print(&value, json);
        }
        Command::Bench {
            what: BenchCommand::Rpc(args),
        } => bench::rpc(args).await?,
        Command::Bench {
            what: BenchCommand::Client(args),
        } => bench::client(args).await?,
        Command::Bench {
            what: BenchCommand::Sync(args),
        } => bench::sync(args).await?,
        Command::Bench {
            what: BenchCommand::Handles { json, count, case },
        } => bench::handles(json, count, case.as_deref())?,
    }
    Ok(())
}

/// A 32-byte hash in hex.
fn parse_hash(hex_str: &str) -> Result<regolith_formats::HashBytes> {
    let bytes = hex::decode(hex_str.trim()).context("not hex")?;
    let bytes: [u8; 32] = bytes
        .try_into()
        .map_err(|b: Vec<u8>| anyhow::anyhow!("a hash has 32 bytes, not {}", b.len()))?;
    Ok(regolith_formats::HashBytes(bytes))
}
