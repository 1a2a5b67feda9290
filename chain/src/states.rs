//! Persistent states of a persistent key block, as a node names and serves them (storage.md, rpc.md §4.3.2):
//! the shard state of the mc block and of every top shard block (`{B}.boc`, the state BOC), and the queue
//! state of each (`{B}.queue`, TL `block.queueState`: the block's diff tail, newest first, and its message
//! cells), every file zstd-compressed.

use std::path::Path;

use regolith_formats::persistent_state::{state_object_name, StateKind, StatePart};
use regolith_formats::queue_state::{message_chunks, write_queue_state, QueueStateHeader};
use tycho_types::boc::Boc;

use crate::archive::write_file;
use crate::error::{io_err, ChainError};
use crate::generator::Generator;

/// zstd level of state files (the node's).
const STATE_ZSTD_LEVEL: i32 = 3;

/// One state file: its name under `states/` and its (compressed) bytes.
pub struct StateFile {
    /// The object name.
    pub name: String,
    /// zstd-compressed content.
    pub bytes: Vec<u8>,
}

fn compress(what: &str, raw: &[u8]) -> Result<Vec<u8>, ChainError> {
    zstd::bulk::compress(raw, STATE_ZSTD_LEVEL).map_err(|e| ChainError::Build {
        what: what.to_string(),
        reason: e.to_string(),
    })
}

/// The persistent states of the generator's current tip (call it right after a persistent key block).
pub fn persistent_states(generator: &Generator) -> Result<Vec<StateFile>, ChainError> {
    let mut out = Vec::new();
    for (id, root, tail) in generator.tips() {
        let name = |kind| {
            state_object_name(&id, kind, StatePart::Unsplit).ok_or_else(|| ChainError::Build {
                what: format!("the state name of {id}"),
                reason: "no unsplit name".into(),
            })
        };
        out.push(StateFile {
            name: name(StateKind::Shard)?,
            bytes: compress("a shard state", &Boc::encode(&root))?,
        });

        let diffs = tail.iter().rev().map(|d| d.diff.clone()).collect();
        let header =
            QueueStateHeader::new(id.shard, id.seqno, diffs).map_err(|e| ChainError::Build {
                what: format!("the queue state of {id}"),
                reason: e.to_string(),
            })?;
        let cells: Vec<_> = tail
            .iter()
            .rev()
            .flat_map(|d| d.messages.iter().cloned())
            .collect();
        let chunks = message_chunks(&cells);
        let mut raw = Vec::new();
        write_queue_state(&header, &chunks, &mut raw);
        out.push(StateFile {
            name: name(StateKind::Queue)?,
            bytes: compress("a queue state", &raw)?,
        });
    }
    Ok(out)
}

/// Writes the persistent states of the current tip into `dir`.
pub fn write_persistent_states(generator: &Generator, dir: &Path) -> Result<usize, ChainError> {
    std::fs::create_dir_all(dir).map_err(io_err(dir))?;
    let files = persistent_states(generator)?;
    for file in &files {
        write_file(&dir.join(&file.name), &file.bytes, None)?;
    }
    Ok(files.len())
}
