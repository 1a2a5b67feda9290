//! The `regolith` binary: parses the command line and runs one of [`regolith_cli::commands`].

use std::path::PathBuf;

use anyhow::Result;
use clap::{Parser, Subcommand};
use regolith_cli::commands;
use regolith_node::config::DataDir;

/// The process's Rust allocations go to mimalloc, which returns freed memory to the system sooner than glibc's
/// per-thread arenas do: a lower peak RSS at the same speed (docs/benchmarks.md, "Allocators").
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    Init(commands::init::InitArgs),
    /// Import archives into block storage, in order.
    Import(commands::import::ImportArgs),
    /// Show what the data directory holds.
    Inspect(commands::inspect::InspectArgs),
    /// Import a persistent queue state (zstd-compressed or plain TL `block.queueState`) into the queue.
    ImportQueueState(commands::import_queue_state::ImportQueueStateArgs),
    /// Run the node until SIGINT/SIGTERM.
    Run(commands::run::RunArgs),
    /// Benchmarks that print figures.
    Bench(commands::bench::BenchArgs),
    /// The receiver journal of cross-chain announcements (`<data>/ledger`).
    Ledger(commands::ledger::LedgerArgs),
    /// N `regolith run` processes on 127.0.0.1: node1 imports the fixture chain, or with `--live` makes a new
    /// chain as it runs; the others sync from it. Shows every node's height until Ctrl-C.
    Devnet(commands::devnet::DevnetArgs),
    /// Talk to a Tycho network: fetch blocks, archives, states and proofs from peers, send messages.
    P2p(commands::p2p::P2pArgs),
    /// Generated chains: `chain generate` writes a chain of real, signed blocks.
    Chain(commands::chain::ChainArgs),
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
    // RocksDB's C++ still allocates through glibc's malloc: two arenas (instead of eight per core) let one
    // thread reuse what another freed. A MALLOC_ARENA_MAX the user set wins.
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt changes a malloc parameter; called before any thread starts.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 2);
        }
    }
    let cli = Cli::parse();
    // Output piped into `head` ends quietly, as with any Unix tool, instead of panicking on a closed pipe.
    // The node itself (`run`) keeps SIGPIPE ignored: a closed stdout must not kill it.
    if !matches!(cli.command, Command::Run(_) | Command::Devnet(_)) {
        // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    // Benchmarks print figures and `p2p` prints its answer; the network's info logs would drown both.
    init_logging(match cli.command {
        Command::Bench(_) => "warn,tycho_network=off",
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
        Command::Init(args) => commands::init::run(&data, args),
        Command::Import(args) => commands::import::run(&data, args).await,
        Command::Inspect(args) => commands::inspect::run(&data, args).await,
        Command::ImportQueueState(args) => commands::import_queue_state::run(&data, args).await,
        Command::Run(args) => commands::run::run(&data, args).await,
        Command::Bench(args) => commands::bench::run(args).await,
        Command::Ledger(args) => commands::ledger::run(&data.root, args),
        Command::Chain(args) => commands::chain::run(args),
        Command::Devnet(args) => commands::devnet::run(args).await,
        Command::P2p(args) => {
            let json = args.json;
            let value = commands::p2p::run(&data, args).await?;
            commands::inspect::print(&value, json);
            Ok(())
        }
    }
}
