//! Shared helpers of the scenario tests (queue.md §10 notation).
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use regolith_formats::queue_diff::QueueDiff;
use regolith_formats::{BlockId, HashBytes, ShardIdent};
use regolith_queue::{
    DiffStatistics, DiffZone, EnqueuedMessage, MessageQueue, MessageValue, PartitionRouter, Queue,
    QueueConfig, QueueDiffWithMessages, QueueFactory, QueueKey, QueueStorage, RouterAddr, TopBlock,
};
use tycho_types::cell::{Cell, CellBuilder, CellFamily, Store};
use tycho_types::models::{BlockIdShort, IntAddr, IntMsgInfo, MsgInfo, StdAddr};

pub(crate) type Q = Arc<Queue<EnqueuedMessage>>;

pub(crate) const MC: ShardIdent = ShardIdent::MASTERCHAIN;
pub(crate) const SH: ShardIdent = ShardIdent::BASECHAIN;

pub(crate) fn sh2() -> ShardIdent {
    ShardIdent::new(0, 0x4000_0000_0000_0000).unwrap()
}

pub(crate) fn addr(wc: i8, byte: u8) -> IntAddr {
    IntAddr::Std(StdAddr::new(wc, HashBytes([byte; 32])))
}
pub(crate) fn m1() -> IntAddr {
    addr(-1, 1)
}
pub(crate) fn m2() -> IntAddr {
    addr(-1, 2)
}
pub(crate) fn b1() -> IntAddr {
    addr(0, 3)
}
pub(crate) fn b2() -> IntAddr {
    addr(0, 4)
}
pub(crate) fn ra(a: &IntAddr) -> RouterAddr {
    RouterAddr::from_int_addr(a).unwrap()
}

/// Router R = {dst M1→1, dst M2→1}.
pub(crate) fn router_r() -> PartitionRouter {
    let mut r = PartitionRouter::new();
    r.insert_dst(&m1(), 1).unwrap();
    r.insert_dst(&m2(), 1).unwrap();
    r
}

/// An internal message cell with this `created_lt`; `body_bytes` of payload in a referenced cell.
pub(crate) fn msg_cell(lt: u64, src: &IntAddr, dst: &IntAddr, body_bytes: usize) -> Cell {
    let info = IntMsgInfo {
        src: src.clone(),
        dst: dst.clone(),
        created_lt: lt,
        ..Default::default()
    };
    let mut b = CellBuilder::new();
    MsgInfo::Int(info)
        .store_into(&mut b, Cell::empty_context())
        .unwrap();
    b.store_bit_zero().unwrap(); // no state init
    if body_bytes == 0 {
        b.store_bit_zero().unwrap(); // empty inline body
    } else {
        b.store_bit_one().unwrap();
        let mut body = CellBuilder::new();
        let data: Vec<u8> = (0..body_bytes.min(127))
            .map(|i| (i as u64 ^ lt) as u8)
            .collect();
        body.store_raw(&data, (data.len() * 8) as u16).unwrap();
        b.store_reference(body.build().unwrap()).unwrap();
    }
    b.build().unwrap()
}

pub(crate) fn msg(lt: u64, src: &IntAddr, dst: &IntAddr) -> EnqueuedMessage {
    EnqueuedMessage::from_cell(msg_cell(lt, src, dst, 0)).unwrap()
}

pub(crate) fn mc_block(seqno: u32) -> BlockId {
    block(MC, seqno)
}

pub(crate) fn block(shard: ShardIdent, seqno: u32) -> BlockId {
    BlockId {
        shard,
        seqno,
        root_hash: HashBytes([seqno as u8; 32]),
        file_hash: HashBytes([seqno as u8 ^ 0x55; 32]),
    }
}

pub(crate) fn short(shard: ShardIdent, seqno: u32) -> BlockIdShort {
    BlockIdShort { shard, seqno }
}

pub(crate) fn top(id: BlockId, updated: bool, ref_by: u32) -> TopBlock {
    TopBlock {
        block_id: id,
        ref_by_mc_seqno: ref_by,
        updated,
    }
}

/// A test database in a temp dir.
pub(crate) struct Env {
    pub dir: tempfile::TempDir,
    pub queue: Option<Q>,
}

pub(crate) fn zerostate() -> BlockId {
    mc_block(0)
}

pub(crate) fn config() -> QueueConfig {
    QueueConfig {
        gc_interval: std::time::Duration::from_secs(1),
    }
}

impl Env {
    /// A fresh database; the queue has no GC task (ticks are driven with `run_gc_tick`).
    pub(crate) fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut env = Self { dir, queue: None };
        env.open();
        env
    }

    pub(crate) fn data_dir(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    pub(crate) fn open(&mut self) {
        self.queue = None;
        let storage = QueueStorage::open(self.dir.path()).unwrap();
        self.queue = Some(
            QueueFactory::new(storage, zerostate(), config())
                .create_without_gc()
                .unwrap(),
        );
    }

    /// Closes and reopens the database (a restart).
    pub(crate) fn reopen(&mut self) {
        self.queue = None;
        self.open();
    }

    pub(crate) fn q(&self) -> &Q {
        self.queue.as_ref().unwrap()
    }

    pub(crate) fn dump(&self) -> Vec<(String, Vec<u8>, Vec<u8>)> {
        self.q().storage().dump()
    }

    pub(crate) fn count(&self, table: &str) -> usize {
        self.dump().iter().filter(|(t, _, _)| t == table).count()
    }
}

/// A diff of these messages with router R and the given processed_to.
pub(crate) fn diff_of(
    messages: Vec<EnqueuedMessage>,
    processed_to: BTreeMap<ShardIdent, QueueKey>,
) -> QueueDiffWithMessages<EnqueuedMessage> {
    QueueDiffWithMessages::new(messages, processed_to, router_r())
}

/// Default statistics: first/last key, or synthetic bounds (lt 0) when empty.
pub(crate) fn stats_of(
    diff: &QueueDiffWithMessages<EnqueuedMessage>,
    shard: ShardIdent,
) -> DiffStatistics {
    DiffStatistics::for_collated(diff, shard, 0, 0)
}

/// The BLAKE3 of the diff's TL form.
pub(crate) fn tl_hash(
    diff: &QueueDiffWithMessages<EnqueuedMessage>,
    stats: &DiffStatistics,
    seqno: u32,
) -> HashBytes {
    tl_diff(diff, stats, seqno).compute_hash()
}

pub(crate) fn tl_diff(
    diff: &QueueDiffWithMessages<EnqueuedMessage>,
    stats: &DiffStatistics,
    seqno: u32,
) -> QueueDiff {
    let mut hashes: Vec<HashBytes> = diff
        .messages
        .values()
        .map(|m| *m.cell().repr_hash())
        .collect();
    hashes.sort();
    let (src, dst) = diff.router.to_tl();
    QueueDiff {
        prev_hash: HashBytes::ZERO,
        shard: stats.shard,
        seqno,
        processed_to: diff
            .processed_to
            .iter()
            .map(|(s, k)| (*s, (*k).into()))
            .collect(),
        min_message: stats.min_message.into(),
        max_message: stats.max_message.into(),
        messages: hashes,
        router_partitions_src: src,
        router_partitions_dst: dst,
    }
}

/// Applies X n with the default statistics and hash.
pub(crate) fn apply(
    q: &Q,
    shard: ShardIdent,
    seqno: u32,
    messages: Vec<EnqueuedMessage>,
    check: Option<DiffZone>,
) -> regolith_queue::Result<bool> {
    apply_pt(q, shard, seqno, messages, BTreeMap::new(), check)
}

pub(crate) fn apply_pt(
    q: &Q,
    shard: ShardIdent,
    seqno: u32,
    messages: Vec<EnqueuedMessage>,
    processed_to: BTreeMap<ShardIdent, QueueKey>,
    check: Option<DiffZone>,
) -> regolith_queue::Result<bool> {
    let diff = diff_of(messages, processed_to);
    // Synthetic bounds of an empty diff use its seqno as lt, so empty diffs never share a max.
    let stats = DiffStatistics::for_collated(&diff, shard, u64::from(seqno), u64::from(seqno));
    let hash = tl_hash(&diff, &stats, seqno);
    q.apply_diff(&diff, short(shard, seqno), &hash, &stats, check)
}

/// Messages lt in `lts` from `src` to `dst`.
pub(crate) fn msgs(
    lts: impl IntoIterator<Item = u64>,
    src: &IntAddr,
    dst: &IntAddr,
) -> Vec<EnqueuedMessage> {
    lts.into_iter().map(|lt| msg(lt, src, dst)).collect()
}

pub(crate) fn key_of(m: &EnqueuedMessage) -> QueueKey {
    m.key()
}

/// Full-range bounded range of a shard.
pub(crate) fn full(shard: ShardIdent) -> regolith_queue::BoundedShardRange {
    regolith_queue::BoundedShardRange::new(
        shard,
        std::ops::Bound::Included(QueueKey::MIN),
        std::ops::Bound::Excluded(QueueKey::MAX),
    )
}

/// Collects an iterator, panicking on errors.
pub(crate) fn collect(
    mut it: regolith_queue::QueueIterator<EnqueuedMessage>,
) -> Vec<(ShardIdent, Arc<EnqueuedMessage>)> {
    let mut out = Vec::new();
    while let Some(item) = it.next() {
        out.push(item.unwrap());
    }
    out
}

pub(crate) fn has_table_rows(env: &Env, table: &str) -> bool {
    env.count(table) > 0
}

pub(crate) const MESSAGES: &str = "shard_int_messages";
pub(crate) const STATS: &str = "int_msg_statistics";
pub(crate) const TAIL: &str = "int_msg_diffs_tail";
pub(crate) const INFO: &str = "int_msg_diff_info";
pub(crate) const POINTERS: &str = "int_msg_commit_pointer";
pub(crate) const VAR: &str = "int_msg_var";
