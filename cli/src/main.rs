//! The `regolith` binary: parses the command line and runs one of [`regolith_cli::commands`].

use std::path::PathBuf;

use anyhow::Result;
use clap::{Parser, Subcommand};
use regolith_cli::commands;
use regolith_node::config::DataDir;

/// Every allocation of the process goes to mimalloc: Rust's through this allocator, and the C and C++ libraries'
/// (RocksDB, zstd) through the `malloc` and `free` that mimalloc's `override` feature exports from the binary.
/// glibc's arenas kept what RocksDB freed resident (docs/benchmarks.md, "One allocator for the whole process").
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

/// mimalloc's `mi_option_purge_delay` (the index of the option in the `mi_option_e` of the mimalloc 3 that
/// libmimalloc-sys 0.1.49 builds; the test below checks that the index still names an option whose default
/// is the purge delay's 1,000 ms).
const MI_OPTION_PURGE_DELAY: std::ffi::c_int = 15;

unsafe extern "C" {
    fn mi_option_set(option: std::ffi::c_int, value: std::ffi::c_long);
}

/// mimalloc gives freed pages back to the system only after a delay (1 s, ten times that for whole arenas),
/// and a thread that went idle (the blocking pool's) holds its freed pages until it allocates again. Freed
/// memory goes back at once instead (docs/benchmarks.md); a MIMALLOC_PURGE_DELAY set in the environment wins.
fn purge_freed_memory_at_once() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: mi_option_set only stores the option's value; mimalloc reads it at its next purge.
        unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, 0) };
    }
}

fn main() {
    purge_freed_memory_at_once();
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

#[cfg(test)]
mod tests {
    unsafe extern "C" {
        fn mi_option_get(option: std::ffi::c_int) -> std::ffi::c_long;
    }

    /// The option index set at start is mimalloc's purge delay: with no MIMALLOC_PURGE_DELAY, its value is
    /// the documented default, 1,000 ms (no other option of mimalloc 3 defaults to 1,000).
    #[test]
    fn the_purge_delay_option_index_names_the_purge_delay() {
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
            return;
        }
        // SAFETY: mi_option_get reads an option's value.
        let value = unsafe { mi_option_get(super::MI_OPTION_PURGE_DELAY) };
        assert_eq!(value, 1000);
    }
}
