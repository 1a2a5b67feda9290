//! `regolith import`: archive files into block storage through the node's apply pipeline, in order, then
//! optionally persistent state files as served states.

use std::path::PathBuf;

use anyhow::{bail, Result};
use regolith_node::apply::import::{import_archive_into, ImportOptions};
use regolith_node::apply::Pipeline;
use regolith_node::config::DataDir;
use regolith_node::progress::Progress;
use regolith_node::start::{start, Started};

/// `regolith import`.
#[derive(clap::Args)]
pub struct ImportArgs {
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
}

/// Runs `regolith import`.
pub async fn run(data: &DataDir, args: ImportArgs) -> Result<()> {
    let ImportArgs {
        files,
        quiet,
        json,
        states,
    } = args;
    let config = data.load_node_config()?;
    for file in &files {
        if !file.is_file() {
            bail!("archive {} does not exist or is not a file", file.display());
        }
    }
    // No queue GC during import: the committed queue must end exactly as a clean import leaves it.
    let Started { storage, queue, .. } = start(&data.root, &config, Default::default()).await?;
    let progress = Progress::new(quiet || json);
    let options = ImportOptions {
        states: config.states.clone(),
        ..Default::default()
    };
    let mut pipeline = Pipeline::new(&storage, &queue, &options)?;
    for file in &files {
        let report = import_archive_into(&mut pipeline, &storage, file, &progress).await;
        let report = match report {
            Ok(report) => report,
            Err(e) => {
                pipeline.wait_for_persistent_save().await;
                return Err(e);
            }
        };
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
    // The persistent states of the last persistent key block are written in the background.
    pipeline.wait_for_persistent_save().await;
    if let Some(dir) = states {
        let report = regolith_node::boot::state_import::import_states(&storage, &dir).await?;
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
    Ok(())
}
