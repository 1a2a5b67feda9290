//! `regolith run`: the node until SIGINT/SIGTERM (regolith-node's [`regolith_node::run`]).

use anyhow::Result;
use regolith_node::boot::cold_boot::BootConfig;
use regolith_node::config::DataDir;

/// `regolith run`.
#[derive(clap::Args)]
pub struct RunArgs {
    /// How a data dir with only the zerostate boots, this once: `latest-persistent` (from the newest
    /// persistent state the network serves) or `genesis` (node.json `boot` otherwise).
    #[arg(long)]
    boot: Option<BootConfig>,
}

/// Runs `regolith run`.
pub async fn run(data: &DataDir, args: RunArgs) -> Result<()> {
    regolith_node::run::run(data, args.boot).await
}
