//! `regolith import-queue-state`: the cold-boot import of a persistent queue state file into the internal
//! queue (queue.md §5.9), for the block named on the command line.

use std::path::PathBuf;

use anyhow::{Context, Result};
use regolith_node::config::DataDir;

use crate::block_ref::BlockRef;

/// `regolith import-queue-state`.
#[derive(clap::Args)]
pub struct ImportQueueStateArgs {
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
}

/// Runs `regolith import-queue-state`.
pub async fn run(data: &DataDir, args: ImportQueueStateArgs) -> Result<()> {
    let config = data.load_node_config()?;
    let diff_hash = args
        .diff_hash
        .map(|h| parse_hash(&h).context("--diff-hash"))
        .transpose()?;
    let storage = regolith_node::open_storage(config.storage)?;
    let id = args.block.resolve(&storage)?;
    let report = regolith_node::boot::queue_state::import(
        &data.root,
        &storage,
        id,
        &args.file,
        diff_hash,
        args.tail_len,
    )
    .await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "imported the queue state of {}: {} diffs, {} messages (diff hash {}, tail_len {})",
            report.block, report.diffs, report.messages, report.diff_hash, report.tail_len
        );
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
