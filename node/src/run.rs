//! `regolith run`: the node's main job. For now: open the storage (startup check, archive recovery), report
//! its state, run block and archive GC on schedule, and stay up until SIGINT/SIGTERM.

use std::time::Duration;

use anyhow::Result;
use regolith_storage::config::BlocksGcKind;
use regolith_storage::Storage;

use crate::config::DataDir;

/// Runs until a shutdown signal.
pub async fn run(data: &DataDir) -> Result<()> {
    let node_config = data.load_node_config()?;
    let global = data.load_global_config()?;
    let storage = crate::open_storage(node_config.storage.clone())?;
    let stats = storage.open_stats();
    let last_mc = storage.node_state().load_last_mc_block_id()?;
    tracing::info!(
        data = %data.root.display(),
        zerostate = %global.zerostate.as_block_id(),
        overlay_id = %hex::encode(crate::init::overlay_id(&global.zerostate)),
        last_applied_mc = ?last_mc.map(|id| id.seqno),
        orphaned_flags = stats.consistency.orphaned_flags_count,
        restored_flags = stats.consistency.restored_flags_count,
        archives = stats.archives.archive_count,
        "node started"
    );
    println!(
        "regolith node running on {} (last applied mc block: {}). Press Ctrl-C to stop.",
        data.root.display(),
        last_mc.map_or_else(|| "none".into(), |id| id.seqno.to_string())
    );

    let gc_task = tokio::spawn(gc_loop(storage.clone()));
    shutdown_signal().await;
    tracing::info!("shutting down");
    gc_task.abort();
    let _ = gc_task.await;
    storage.archives().wait_for_archive_commit().await;
    Ok(())
}

async fn gc_loop(storage: Storage) {
    let Some(gc) = storage.config().blocks_gc.clone() else {
        return;
    };
    let BlocksGcKind::BeforeSafeDistance {
        safe_distance,
        min_interval,
    } = gc.kind
    else {
        // Key-block driven modes are triggered by the sync loop, which does not exist yet.
        return;
    };
    let mut interval = tokio::time::interval(min_interval.max(Duration::from_secs(1)));
    loop {
        interval.tick().await;
        let last = match storage.node_state().load_last_mc_block_id() {
            Ok(Some(id)) => id.seqno,
            _ => continue,
        };
        let distance = safe_distance.max(100);
        let Some(target) = last.checked_sub(distance).filter(|t| *t > 0) else {
            continue;
        };
        if let Err(e) = storage.remove_outdated_blocks(target).await {
            tracing::warn!(target, error = %e, "block GC failed");
        }
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
