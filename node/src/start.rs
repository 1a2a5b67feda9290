//! The start of a node, in the order it happens. Every command that writes blocks into a data directory
//! (`run`, `import`, the sync benchmark, the in-process tests) starts the node with [`start`], and nothing of
//! the node is used before it returns:
//!
//! 1. **open** the block storage ([`crate::open_storage`]): its lock (a second process on the data
//!    directory is refused, with a hint), the startup check of the block flags and the archive recovery
//!    (storage.md), then the genesis data (zerostate proof and states) that a data directory made by an older
//!    build lacks;
//! 2. **queue**: open `int_queue` and run its start procedure (queue.md §5.4: check, clear the uncommitted
//!    zone, re-apply the diffs of the blocks applied after the last commit, commit, clear again); its GC task
//!    starts only after that, and only when asked for ([`StartOptions::queue_gc`]);
//! 3. **boot**: the node gets its last applied mc block, from which everything after the start goes on.
//!    [`Boot::Genesis`]: `init` stored the zerostate as the last applied mc block, so a new node goes on from
//!    the zerostate and any other from the block it applied last. A cold boot (from the latest persistent
//!    state, [`crate::boot::cold_boot`]) needs the network: `run` starts it after the network is up and before the
//!    sync, on a data directory that holds only the zerostate (or an unfinished boot), and it ends like
//!    genesis with a last applied mc block.
//!
//! Then `run` serves blockchain RPC and follows the chain (or makes the live chain), and `import` applies
//! archives, both through the apply pipeline ([`crate::apply`]).

use std::path::Path;

use anyhow::{anyhow, Result};
use regolith_formats::BlockId;
use regolith_storage::Storage;

use crate::config::NodeConfig;
use crate::queue_sync::{self, NodeQueue, StartReport};

/// How a node gets its first applied mc block.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Boot {
    /// From the zerostate `init` stored (or from the last block applied since): the node then replays the
    /// chain from genesis.
    #[default]
    Genesis,
}

/// What the start does besides the fixed steps.
#[derive(Debug, Clone, Copy, Default)]
pub struct StartOptions {
    /// Start the queue's GC task after the queue start procedure (a running node). Tools that must leave
    /// the committed queue exactly as a clean import leaves it (`import`) start without it.
    pub queue_gc: bool,
    /// How the node boots.
    pub boot: Boot,
}

/// A started node's data: what the steps opened and found.
pub struct Started {
    /// The block storage, checked and recovered.
    pub storage: Storage,
    /// The internal queue, in step with the applied blocks.
    pub queue: NodeQueue,
    /// What the queue start procedure did.
    pub queue_start: StartReport,
    /// The last applied mc block after the boot.
    pub last_applied: BlockId,
}

/// Starts the node's data under `data_root` as `config` describes it, step by step (see the module docs).
pub async fn start(
    data_root: &Path,
    config: &NodeConfig,
    options: StartOptions,
) -> Result<Started> {
    let storage = crate::open_storage(config.storage.clone())?;
    let (queue, queue_start) =
        queue_sync::start(data_root, &storage, config.internal_queue, options.queue_gc).await?;
    let last_applied = boot(&storage, options.boot)?;
    Ok(Started {
        storage,
        queue,
        queue_start,
        last_applied,
    })
}

/// Step 3: the last applied mc block the node goes on from.
fn boot(storage: &Storage, boot: Boot) -> Result<BlockId> {
    match boot {
        Boot::Genesis => storage.node_state().load_last_mc_block_id()?.ok_or_else(|| {
            anyhow!(
                "the data directory {} has no last applied mc block (was it made by `regolith init`?)",
                storage.config().root_dir.display()
            )
        }),
    }
}
