//! `regolith bench ...`: benchmarks that print figures (never timing assertions in tests). The instruments
//! they share with the tests (child node processes, the forging peer, fixture chains) are regolith-testbed's.

mod api;
mod client;
mod handles;
mod hostile;
mod hostile_sync;
mod profile;
mod queue;
mod queue_cases;
mod rpc;
mod sync;

use std::path::PathBuf;

use anyhow::Result;

pub use api::ApiBenchArgs;
pub use client::ClientBenchArgs;
pub use handles::HANDLES_DEFAULT_COUNT;
pub use rpc::RpcBenchArgs;
pub use sync::SyncBenchArgs;

/// `regolith bench`.
#[derive(clap::Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    what: BenchCommand,
}

#[derive(clap::Subcommand)]
enum BenchCommand {
    /// Block-handle storage on the reference workload: create, load, setters, connections (fresh temp dirs).
    Handles {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Number of block ids (half mc, half wc 0).
        #[arg(long, default_value_t = HANDLES_DEFAULT_COUNT)]
        count: usize,
        /// Run only the cases whose name contains this text (e.g. `flushed`), for profiling one case.
        #[arg(long)]
        case: Option<String>,
    },
    /// Concurrent raw clients on loopback against an in-process node serving archive_1: getBlockFull,
    /// getBlockDataChunk and getArchiveChunk. Uses a temporary data directory, not --data.
    Rpc(RpcBenchArgs),
    /// The blockchain RPC client downloading from 1 and 3 in-process serving peers on loopback: a 2.5 MiB
    /// block and an archive in MiB/s, getBlockFull latency p50/p99.
    Client(ClientBenchArgs),
    /// A fresh `regolith run` syncs the fixture chain or a generated one (`--chain`, `--generate`) from 1 and
    /// 3 in-process serving nodes: blocks/s, MiB/s and peak RSS, block by block, from archives, and cold-booted.
    Sync(SyncBenchArgs),
    /// The account API of a `regolith run` syncing a generated chain: getContractState and
    /// getTransactionsList requests/s and p50/p99 at 1 and 32 clients, and the index's bytes per transaction.
    Api(ApiBenchArgs),
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

/// Runs `regolith bench`.
pub async fn run(args: BenchArgs) -> Result<()> {
    match args.what {
        BenchCommand::Handles { json, count, case } => {
            handles::handles(json, count, case.as_deref())
        }
        BenchCommand::Rpc(args) => rpc::rpc(args).await,
        BenchCommand::Client(args) => client::client(args).await,
        BenchCommand::Sync(args) => sync::sync(args).await,
        BenchCommand::Api(args) => api::api(args).await,
        BenchCommand::Queue {
            json,
            quick,
            cases,
            import_file,
        } => queue::queue(json, quick, &cases, &import_file),
    }
}
