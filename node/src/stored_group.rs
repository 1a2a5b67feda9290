//! The stored blocks of one mc block's group: the mc block and the shard blocks it brought (those whose
//! handles it references first), read back for the transactions index.

use std::collections::BTreeSet;

use anyhow::{Context, Result};
use regolith_formats::ParsedBlock;
use regolith_storage::Storage;

/// The blocks of the group of mc block `seqno`, the mc block first; `None` when the mc block is not stored
/// (block GC collected it). To be called on a blocking thread of the runtime (the storage's reads are async).
pub(crate) fn load(storage: &Storage, seqno: u32) -> Result<Option<Vec<ParsedBlock>>> {
    let Some(mc) = storage.components().find_mc_block_data(seqno)? else {
        return Ok(None);
    };
    // Back from its top shard blocks while they were brought by this mc block.
    let mut pending = mc.top_shard_blocks()?;
    let mut blocks = vec![mc];
    let mut seen = BTreeSet::new();
    while let Some(id) = pending.pop() {
        if id.seqno == 0 || !seen.insert(id) {
            continue;
        }
        let Some(handle) = storage.handles().load_handle(&id)? else {
            continue;
        };
        if handle.ref_by_mc_seqno() != seqno || !handle.has_data() {
            continue;
        }
        let data = tokio::runtime::Handle::current()
            .block_on(storage.components().load_block_data_raw(&handle))?;
        let block = ParsedBlock::parse(&id, &data).with_context(|| format!("shard block {id}"))?;
        pending.extend(block.prev_ids()?);
        blocks.push(block);
    }
    Ok(Some(blocks))
}
