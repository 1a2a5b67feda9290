//! Cold-boot import of a persistent queue state (queue.md §5.9). The same reader and checks serve
//! validation-only use. Everything is written in one batch; any error writes nothing.

use std::collections::BTreeMap;
use std::sync::Arc;

use regolith_formats::queue_state::{QueueState, MAX_CHUNK_ROOTS};
use regolith_formats::{BlockId, HashBytes, ShardIdent};
use regolith_kv::Batch;
use tycho_types::boc::de::{BocHeader, Options as BocOptions};
use tycho_types::cell::{Cell, CellFamily, Load};
use tycho_types::models::{IntAddr, MsgInfo};

use crate::db::QueueDb;
use crate::diff::{CommitPointer, PartitionCounts};
use crate::diff_info::DiffInfo;
use crate::error::{ImportFailure, QueueError, Result};
use crate::key::{full_shard, QueueKey};
use crate::router::{PartitionRouter, RouterAddr};
use crate::tables::{
    BlockIdBe, Count, DiffInfoKey, IntMsgCommitPointer, IntMsgDiffInfo, IntMsgDiffsTail,
    IntMsgStatistics, IntMsgVar, MessageEntry, MessageKey, ShardIntMessages, ShardKey, StatKey,
    TailKey, TailSeqno, LAST_COMMITTED_MC_BLOCK_ID,
};

/// What an import wrote (or, for validation, would write).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportSummary {
    /// Number of diffs.
    pub diffs: usize,
    /// Number of messages.
    pub messages: usize,
    /// The commit pointer set for the shard.
    pub pointer: Option<CommitPointer>,
}

fn hex(h: &HashBytes) -> String {
    h.to_string()
}

/// Roots of all chunks, decoded lazily chunk by chunk.
struct Roots<'a> {
    chunks: &'a [&'a [u8]],
    next_chunk: usize,
    current: std::vec::IntoIter<Cell>,
    found: usize,
}

impl<'a> Roots<'a> {
    fn new(chunks: &'a [&'a [u8]]) -> Self {
        Self {
            chunks,
            next_chunk: 0,
            current: Vec::new().into_iter(),
            found: 0,
        }
    }

    fn next(&mut self) -> Result<Option<Cell>, ImportFailure> {
        loop {
            if let Some(cell) = self.current.next() {
                self.found += 1;
                return Ok(Some(cell));
            }
            let Some(chunk) = self.chunks.get(self.next_chunk) else {
                return Ok(None);
            };
            let index = self.next_chunk;
            self.next_chunk += 1;
            self.current = decode_chunk(chunk)
                .map_err(|reason| ImportFailure::BadChunk {
                    chunk: index,
                    reason,
                })?
                .into_iter();
        }
    }
}

fn decode_chunk(chunk: &[u8]) -> Result<Vec<Cell>, String> {
    let options = BocOptions {
        min_roots: None,
        max_roots: Some(MAX_CHUNK_ROOTS),
    };
    let header = BocHeader::decode(chunk, &options).map_err(|e| e.to_string())?;
    let cells = header
        .finalize(Cell::empty_context())
        .map_err(|e| e.to_string())?;
    header
        .roots()
        .iter()
        .map(|i| {
            cells
                .get(*i)
                .ok_or_else(|| format!("root {i} is not a cell"))
        })
        .collect()
}

/// Parses, checks and (if `write`) imports a queue state.
pub(crate) fn import(
    db: &Arc<QueueDb>,
    block_id: &BlockId,
    expected_diff_hash: &HashBytes,
    expected_tail_len: u32,
    data: &[u8],
    write: bool,
) -> Result<ImportSummary> {
    let fail = |reason: ImportFailure| QueueError::Import {
        block: Box::new(*block_id),
        reason,
    };
    let state = QueueState::parse(data).map_err(|e| fail(e.into()))?;
    let header = &state.header;
    if header.shard != block_id.shard || header.seqno != block_id.seqno {
        return Err(fail(ImportFailure::WrongBlock {
            shard: header.shard,
            seqno: header.seqno,
        }));
    }
    let top_hash = header.diff_hashes()[0];
    if top_hash != *expected_diff_hash {
        return Err(fail(ImportFailure::HashMismatch {
            expected: hex(expected_diff_hash),
            actual: hex(&top_hash),
        }));
    }
    if header.diffs().len() != expected_tail_len as usize {
        return Err(fail(ImportFailure::TailLenMismatch {
            expected: expected_tail_len,
            actual: header.diffs().len(),
        }));
    }

    let shard = block_id.shard;
    let mut batch = Batch::new();
    let mut roots = Roots::new(&state.chunks);
    let listed = header.message_count();
    let mut messages = 0usize;

    for (diff, diff_hash) in header.diffs().iter().zip(header.diff_hashes()) {
        let router =
            PartitionRouter::from_tl(&diff.router_partitions_src, &diff.router_partitions_dst);
        let mut counts = PartitionCounts::new();
        let mut shards_messages_count = BTreeMap::<ShardIdent, u64>::new();
        for (index, listed_hash) in diff.messages.iter().enumerate() {
            let root = roots.next().map_err(fail)?.ok_or_else(|| {
                fail(ImportFailure::TooFewMessages {
                    listed,
                    found: messages,
                })
            })?;
            let hash = *root.repr_hash();
            if hash != *listed_hash {
                return Err(fail(ImportFailure::MessageHashMismatch {
                    seqno: diff.seqno,
                    index,
                    expected: hex(listed_hash),
                    actual: hex(&hash),
                }));
            }
            let non_internal = |reason: String| {
                fail(ImportFailure::NonInternal {
                    seqno: diff.seqno,
                    hash: hex(&hash),
                    reason,
                })
            };
            let mut slice = root.as_slice().map_err(|e| non_internal(e.to_string()))?;
            let MsgInfo::Int(info) =
                MsgInfo::load_from(&mut slice).map_err(|e| non_internal(e.to_string()))?
            else {
                return Err(non_internal("external message".into()));
            };
            let (IntAddr::Std(_), IntAddr::Std(dst_std)) = (&info.src, &info.dst) else {
                return Err(fail(ImportFailure::NonStdAddress {
                    seqno: diff.seqno,
                    hash: hex(&hash),
                }));
            };
            let dst = RouterAddr::from_std(dst_std);
            let partition = router.lookup(&info.src, &info.dst);
            if write {
                let key = MessageKey {
                    partition,
                    shard,
                    key: QueueKey::new(info.created_lt, hash),
                };
                let mut body = Vec::with_capacity(512);
                crate::message_boc::encode(root.as_ref(), &mut body);
                let entry = MessageEntry {
                    dest_workchain: dst.workchain,
                    dest_prefix: dst.prefix(),
                    body,
                };
                db.batch_put::<ShardIntMessages>(&mut batch, &key, &entry);
            }
            *counts.entry(partition).or_default().entry(dst).or_default() += 1;
            *shards_messages_count
                .entry(full_shard(i32::from(dst.workchain)))
                .or_default() += 1;
            messages += 1;
        }

        let min_message = QueueKey::from(diff.min_message);
        let max_message = QueueKey::from(diff.max_message);
        if write {
            db.batch_put::<IntMsgDiffsTail>(
                &mut batch,
                &TailKey { shard, max_message },
                &TailSeqno(diff.seqno),
            );
            for (partition, dests) in &counts {
                for (dest, count) in dests {
                    let key = StatKey {
                        shard,
                        partition: *partition,
                        max_message,
                        dest: *dest,
                    };
                    db.batch_put::<IntMsgStatistics>(&mut batch, &key, &Count(*count));
                }
            }
            let record = DiffInfo {
                min_message,
                max_message,
                shards_messages_count,
                hash: *diff_hash,
                processed_to: diff
                    .processed_to
                    .iter()
                    .map(|(s, k)| (*s, QueueKey::from(*k)))
                    .collect(),
                router_src: diff.router_partitions_src.clone(),
                router_dst: diff.router_partitions_dst.clone(),
                seqno: diff.seqno,
            };
            db.batch_put::<IntMsgDiffInfo>(
                &mut batch,
                &DiffInfoKey {
                    shard,
                    seqno: diff.seqno,
                },
                &record,
            );
        }
    }
    if roots.next().map_err(fail)?.is_some() {
        return Err(fail(ImportFailure::TooManyMessages { listed }));
    }

    let newest = &header.diffs()[0];
    let pointer = CommitPointer {
        queue_key: newest.max_message.into(),
        seqno: newest.seqno,
    };
    let summary = ImportSummary {
        diffs: header.diffs().len(),
        messages,
        pointer: Some(pointer),
    };
    if !write {
        return Ok(summary);
    }
    db.batch_put::<IntMsgCommitPointer>(&mut batch, &ShardKey(shard), &pointer);
    if shard.is_masterchain() {
        db.batch_put::<IntMsgVar>(
            &mut batch,
            &LAST_COMMITTED_MC_BLOCK_ID,
            &BlockIdBe(*block_id),
        );
    }
    db.fail_points.import_batch.check("import batch")?;
    db.write(
        batch,
        format_args!("importing the queue state of {block_id}"),
    )?;
    metrics::counter!("regolith_queue_imported_messages_total").increment(messages as u64);
    tracing::info!(block = %block_id, diffs = summary.diffs, messages, "queue state imported");
    Ok(summary)
}
