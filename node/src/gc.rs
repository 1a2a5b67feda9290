//! The GC schedules of a running node: block GC (storage.md §9) and archive GC (§8.7) on the configured
//! schedule, and the figures they report (`regolith_gc_*` metrics). The queue runs its own GC task.

use std::time::Duration;

use regolith_storage::config::{ArchivesGcConfig, BlocksGcConfig, BlocksGcKind};
use regolith_storage::Storage;

/// How often the key-block driven modes look for a new key block.
const KEY_BLOCK_POLL: Duration = Duration::from_secs(5);

/// The running GC tasks; dropping them stops both.
pub struct GcTasks {
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl GcTasks {
    /// Starts the configured schedules (none for a section that is `null`).
    pub fn start(storage: &Storage) -> Self {
        let mut tasks = Vec::new();
        if let Some(config) = storage.config().blocks_gc.clone() {
            tasks.push(tokio::spawn(blocks_gc_loop(storage.clone(), config)));
        }
        if let Some(config) = storage.config().archives_gc.clone() {
            tasks.push(tokio::spawn(archives_gc_loop(storage.clone(), config)));
        }
        Self { tasks }
    }

    /// Stops the tasks and waits until they are gone (a GC run in progress finishes its batch).
    pub async fn stop(self) {
        for task in &self.tasks {
            task.abort();
        }
        for task in self.tasks {
            let _ = task.await;
        }
    }
}

/// The newest key block seen by a key-block driven schedule.
#[derive(Debug, Default)]
pub struct KeyBlockWatch {
    last_seen: Option<u32>,
}

impl KeyBlockWatch {
    /// The newest key block (persistent ones only with `persistent`) if it was not seen before.
    pub fn poll(
        &mut self,
        storage: &Storage,
        persistent: bool,
    ) -> regolith_storage::Result<Option<u32>> {
        let handles = storage.handles();
        let newest = if persistent {
            handles.find_prev_persistent_key_block(u32::MAX)?
        } else {
            handles.find_last_key_block()?
        };
        let Some(newest) = newest.map(|h| h.id().seqno) else {
            return Ok(None);
        };
        if self.last_seen == Some(newest) {
            return Ok(None);
        }
        self.last_seen = Some(newest);
        Ok(Some(newest))
    }
}

/// The block GC target of `before_safe_distance` (storage.md §9.3): the last applied mc seqno minus
/// max(safe_distance, the mc blocks of one archive, the last mc block's queue-diff tail length + 1);
/// `None` when that is not above 0.
pub async fn safe_distance_target(
    storage: &Storage,
    safe_distance: u32,
) -> anyhow::Result<Option<u32>> {
    let Some(last) = storage.node_state().load_last_mc_block_id()? else {
        return Ok(None);
    };
    if last.seqno == 0 {
        return Ok(None);
    }
    let tail_len = last_mc_tail_len(storage, &last).await?;
    let span = storage.config().archives.mc_blocks_per_archive;
    let distance = safe_distance.max(span).max(tail_len.saturating_add(1));
    Ok(last.seqno.checked_sub(distance).filter(|t| *t > 0))
}

/// `out_msg_queue_updates.tail_len` of a stored mc block (0 for the zerostate, which has no block).
async fn last_mc_tail_len(
    storage: &Storage,
    id: &regolith_formats::BlockId,
) -> anyhow::Result<u32> {
    Ok(crate::queue_sync::load_block(storage, id)
        .await?
        .map_or(0, |block| block.block.out_msg_queue_updates.tail_len))
}

/// The block GC target of a key-block mode on a new key block `key` (storage.md §9.3): the key block
/// before it, or the persistent key block before it.
pub fn key_block_target(
    storage: &Storage,
    kind: &BlocksGcKind,
    key: u32,
) -> regolith_storage::Result<Option<u32>> {
    let prev = match kind {
        BlocksGcKind::BeforePreviousKeyBlock => storage.handles().find_prev_key_block(key)?,
        BlocksGcKind::BeforePreviousPersistentState => {
            storage.handles().find_prev_persistent_key_block(key)?
        }
        BlocksGcKind::BeforeSafeDistance { .. } => return Ok(None),
    };
    Ok(prev.map(|h| h.id().seqno).filter(|t| *t > 0))
}

async fn blocks_gc_loop(storage: Storage, config: BlocksGcConfig) {
    let period = match config.kind {
        BlocksGcKind::BeforeSafeDistance { min_interval, .. } => min_interval,
        _ => KEY_BLOCK_POLL,
    };
    let mut interval = tokio::time::interval(period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut watch = KeyBlockWatch::default();
    loop {
        interval.tick().await;
        let target = match &config.kind {
            BlocksGcKind::BeforeSafeDistance { safe_distance, .. } => {
                safe_distance_target(&storage, *safe_distance).await
            }
            kind => {
                let persistent = matches!(kind, BlocksGcKind::BeforePreviousPersistentState);
                match watch.poll(&storage, persistent) {
                    Ok(Some(key)) => key_block_target(&storage, kind, key).map_err(Into::into),
                    Ok(None) => Ok(None),
                    Err(e) => Err(e.into()),
                }
            }
        };
        let target = match target {
            Ok(Some(target)) => target,
            Ok(None) => continue,
            Err(e) => {
                failed("blocks", &e);
                continue;
            }
        };
        match storage.remove_outdated_blocks(target).await {
            Ok(stats) => {
                metrics::counter!("regolith_gc_runs_total", "gc" => "blocks").increment(1);
                metrics::counter!("regolith_gc_blocks_removed_total", "kind" => "mc")
                    .increment(stats.mc_blocks_removed as u64);
                metrics::counter!("regolith_gc_blocks_removed_total", "kind" => "all")
                    .increment(stats.total_blocks_removed as u64);
                metrics::gauge!("regolith_gc_target_mc_seqno", "gc" => "blocks")
                    .set(f64::from(target));
                if stats.total_blocks_removed > 0 {
                    tracing::info!(target, ?stats, "block GC");
                }
            }
            Err(e) => failed(
                "blocks",
                &anyhow::Error::from(e).context(format!("target {target}")),
            ),
        }
    }
}

async fn archives_gc_loop(storage: Storage, config: ArchivesGcConfig) {
    let period = match config {
        ArchivesGcConfig::BeforeSafeDistance { min_interval, .. } => min_interval,
        ArchivesGcConfig::BeforePreviousPersistentState { .. } => KEY_BLOCK_POLL,
    };
    let mut interval = tokio::time::interval(period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut watch = KeyBlockWatch::default();
    loop {
        interval.tick().await;
        let until = match &config {
            ArchivesGcConfig::BeforeSafeDistance { safe_distance, .. } => {
                match storage.node_state().load_last_mc_block_id() {
                    Ok(last) => last.and_then(|l| l.seqno.checked_sub(*safe_distance)),
                    Err(e) => {
                        failed("archives", &e.into());
                        continue;
                    }
                }
            }
            ArchivesGcConfig::BeforePreviousPersistentState { offset } => {
                match watch.poll(&storage, true) {
                    Ok(Some(key)) => {
                        tokio::time::sleep(*offset).await;
                        match storage.handles().find_prev_persistent_key_block(key) {
                            Ok(prev) => prev.map(|h| h.id().seqno),
                            Err(e) => {
                                failed("archives", &e.into());
                                continue;
                            }
                        }
                    }
                    Ok(None) => None,
                    Err(e) => {
                        failed("archives", &e.into());
                        continue;
                    }
                }
            }
        };
        let Some(until) = until.filter(|u| *u > 0) else {
            continue;
        };
        let on_thread = storage.clone();
        let removed = tokio::task::spawn_blocking(move || {
            on_thread.archives().remove_outdated_archives(until)
        })
        .await;
        match removed {
            Ok(Ok(removed)) => {
                metrics::counter!("regolith_gc_runs_total", "gc" => "archives").increment(1);
                metrics::counter!("regolith_gc_archives_removed_total")
                    .increment(removed.len() as u64);
                metrics::gauge!("regolith_gc_target_mc_seqno", "gc" => "archives")
                    .set(f64::from(until));
                if !removed.is_empty() {
                    tracing::info!(until, ?removed, "archive GC");
                }
            }
            Ok(Err(e)) => failed(
                "archives",
                &anyhow::Error::from(e).context(format!("until {until}")),
            ),
            Err(e) => failed(
                "archives",
                &anyhow::anyhow!("the GC run did not finish: {e}"),
            ),
        }
    }
}

fn failed(gc: &'static str, error: &anyhow::Error) {
    metrics::counter!("regolith_gc_failures_total", "gc" => gc).increment(1);
    tracing::warn!(gc, error = %format!("{error:#}"), "GC run failed");
}

/// Registers the GC metrics (both schedules) before their first run.
pub(crate) fn register_metrics() {
    for gc in ["blocks", "archives"] {
        let _ = metrics::counter!("regolith_gc_runs_total", "gc" => gc);
        let _ = metrics::counter!("regolith_gc_failures_total", "gc" => gc);
        let _ = metrics::gauge!("regolith_gc_target_mc_seqno", "gc" => gc);
    }
    for kind in ["mc", "all"] {
        let _ = metrics::counter!("regolith_gc_blocks_removed_total", "kind" => kind);
    }
    let _ = metrics::counter!("regolith_gc_archives_removed_total");
}

#[cfg(test)]
mod tests {
    use super::*;
    use regolith_formats::{BlockId, HashBytes, ShardIdent};
    use regolith_storage::NewBlockMeta;

    /// Key blocks 10 and 20 in one persistent window, 30 and 40 in the next one (30 is persistent).
    fn storage_with_key_blocks(dir: &std::path::Path, seqnos: &[u32]) -> Storage {
        let storage = Storage::open(regolith_storage::StorageConfig::new(dir)).unwrap();
        let window = 1u32 << 17;
        for &seqno in seqnos {
            let gen_utime = window * 13_000 + if seqno >= 30 { window + seqno } else { seqno };
            let id = BlockId {
                shard: ShardIdent::MASTERCHAIN,
                seqno,
                root_hash: HashBytes([seqno as u8; 32]),
                file_hash: HashBytes([!(seqno as u8); 32]),
            };
            storage
                .handles()
                .create_or_load_handle(
                    &id,
                    NewBlockMeta {
                        is_key_block: true,
                        gen_utime,
                        ref_by_mc_seqno: seqno,
                    },
                )
                .unwrap();
        }
        storage
    }

    #[test]
    fn key_block_modes_target_the_previous_key_or_persistent_block() {
        let dir = tempfile::tempdir().unwrap();
        let storage = storage_with_key_blocks(dir.path(), &[10, 20, 30]);
        let mut any = KeyBlockWatch::default();
        assert_eq!(any.poll(&storage, false).unwrap(), Some(30));
        assert_eq!(any.poll(&storage, false).unwrap(), None, "30 was seen");
        let mut persistent = KeyBlockWatch::default();
        assert_eq!(persistent.poll(&storage, true).unwrap(), Some(30));

        let previous = |kind, key| key_block_target(&storage, &kind, key).unwrap();
        assert_eq!(previous(BlocksGcKind::BeforePreviousKeyBlock, 30), Some(20));
        assert_eq!(previous(BlocksGcKind::BeforePreviousKeyBlock, 10), None);
        assert_eq!(
            previous(BlocksGcKind::BeforePreviousPersistentState, 30),
            None
        );
        drop(storage);

        let storage = storage_with_key_blocks(dir.path(), &[40]);
        assert_eq!(any.poll(&storage, false).unwrap(), Some(40));
        assert_eq!(
            persistent.poll(&storage, true).unwrap(),
            None,
            "40 is not persistent"
        );
        let previous = |kind, key| key_block_target(&storage, &kind, key).unwrap();
        assert_eq!(previous(BlocksGcKind::BeforePreviousKeyBlock, 40), Some(30));
        assert_eq!(
            previous(BlocksGcKind::BeforePreviousPersistentState, 40),
            Some(30)
        );
    }
}
