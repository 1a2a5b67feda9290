//! `regolith run`: the node until SIGINT/SIGTERM (regolith-node's [`regolith_node::run`]), with its start
//! banner and a finished cold boot printed on stdout.

use std::io::Write;
use std::sync::Arc;

use anyhow::Result;
use regolith_node::boot::cold_boot::{BootConfig, BootReport};
use regolith_node::config::DataDir;
use regolith_node::run::{NodeInfo, RunEvents};

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
    regolith_node::run::run(data, args.boot, Arc::new(Banner)).await
}

/// Prints what the node reports; a closed stdout is not an error for a running node.
struct Banner;

impl RunEvents for Banner {
    fn started(&self, node: &NodeInfo) {
        let peer_info = serde_json::to_string(&node.peer_info).unwrap_or_default();
        let mut lines = vec![
            format!(
                "regolith node serving blockchain RPC from {} (last applied mc block: {})",
                node.data_root.display(),
                node.last_applied_mc_seqno
            ),
            format!("  QUIC address: {}", node.quic_address),
            format!("  peer id:      {}", node.peer_id),
            format!("  overlay id:   {}", hex::encode(node.overlay_id)),
            format!("  peer info:    {peer_info}"),
        ];
        if let Some(address) = node.metrics_address {
            lines.push(format!("  metrics:      http://{address}/metrics"));
        }
        if let Some(address) = node.api_address {
            lines.push(format!(
                "  API:          http://{address}/ (JSON-RPC, protobuf; POST /v1/messages)"
            ));
        }
        if let Some(live) = &node.live_chain {
            lines.push(format!(
                "  live chain:   {live} ({})",
                regolith_node::live::LIVE_FILE
            ));
        }
        lines.push(
            "Add the peer info to another node's global.json bootstrap_peers to reach it. Press Ctrl-C \
             to stop."
                .to_owned(),
        );
        say(&lines);
    }

    fn cold_booted(&self, report: &BootReport) {
        say(&[format!(
            "cold boot: from mc block {} ({} key blocks verified, {} states, {:.1} MiB) in {:.1} s",
            report.block.seqno,
            report.key_blocks,
            report.states,
            report.bytes as f64 / 1048576.0,
            report.elapsed.as_secs_f64()
        )]);
    }
}

fn say(lines: &[String]) {
    let mut out = std::io::stdout().lock();
    for line in lines {
        let _ = writeln!(out, "{line}");
    }
    let _ = out.flush();
}
