//! `regolith init`: create the data directory, node config and global config from a masterchain zerostate
//! (the work is regolith-node's [`regolith_node::init`]; this module parses the options and prints).

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Result;
use regolith_node::config::DataDir;
use regolith_node::init;

/// `regolith init`.
#[derive(clap::Args)]
pub struct InitArgs {
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
    /// The HTTP address of the account API (JSON-RPC and protobuf, and `POST /v1/messages`), or `off`
    /// (`api_address`, default off).
    #[arg(long, value_parser = parse_metrics_address)]
    api: Option<MetricsAddress>,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

/// `--metrics ADDR|off`, `--api ADDR|off`.
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

/// Runs `regolith init`.
pub fn run(data: &DataDir, args: InitArgs) -> Result<()> {
    let options = init::InitOptions {
        listen: args.listen,
        public_address: args.public_address,
        metrics: args.metrics.map(|m| m.0),
        api: args.api.map(|a| a.0),
        shard_zerostates: args.shard_zerostates,
    };
    let report = init::init(data, &args.zerostate, &options)?;
    if args.json {
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
    Ok(())
}
