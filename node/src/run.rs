//! `regolith run`: the node's main job. For now: open the storage (startup check, archive recovery) and the
//! internal queue (queue.md §5.4 start procedure, GC task), report their state, run block and archive GC on
//! schedule, and stay up until SIGINT/SIGTERM.

use std::time::Duration;

use anyhow::Result;
use regolith_storage::config::BlocksGcKind;
use regolith_storage::Storage;

use crate::config::DataDir;

/// Runs until a shutdown signal.
pub async fn run(data: &DataDir) -> Result<()> {
    // Handlers first: a signal that arrives while the node starts must stop it cleanly, not kill it.
    let shutdown = Shutdown::install()?;
    let node_config = data.load_node_config()?;
    let global = data.load_global_config()?;
    let storage = crate::open_storage(node_config.storage.clone())?;
    let (queue, queue_start) =
        crate::queue_sync::start(&data.root, &storage, node_config.internal_queue, true).await?;
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
        queue_reapplied = queue_start.reapplied_diffs,
        "node started"
    );
    println!(
        "regolith node running on {} (last applied mc block: {}). Press Ctrl-C to stop.",
        data.root.display(),
        last_mc.map_or_else(|| "none".into(), |id| id.seqno.to_string())
    );

    let gc_task = tokio::spawn(gc_loop(storage.clone()));
    shutdown.wait().await;
    tracing::info!("shutting down");
    gc_task.abort();
    let _ = gc_task.await;
    queue.stop_gc();
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

/// SIGINT and SIGTERM, installed before the node reports that it runs.
struct Shutdown {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

impl Shutdown {
    fn install() -> Result<Self> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Self {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        })
    }

    async fn wait(mut self) {
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
        }
    }
}
