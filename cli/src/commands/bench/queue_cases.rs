//! The benchmark cases of queue.md §12, run through the queue's public API: [`run`] builds a fresh temp
//! database per case, measures, and returns the figures as [`BenchRow`]s. It prints nothing; `regolith bench
//! queue` formats the rows ([`format_table`], [`format_json`]).
//!
//! Workload: internal-message BOCs of about 250 B, 1,000 destination accounts over workchains 0 and −1, 10 %
//! of them routed to partition 1.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use regolith_formats::{BlockId, HashBytes, ShardIdent};
use regolith_queue::{
    BoundedShardRange, DiffStatistics, DiffZone, EnqueuedMessage, MessageQueue, PartitionRouter,
    Queue, QueueConfig, QueueDiffWithMessages, QueueFactory, QueueKey, QueueStorage, Result,
    TopBlock,
};
use tycho_types::cell::{Cell, CellBuilder, CellFamily, Store};
use tycho_types::models::{
    BlockIdShort, CurrencyCollection, IntAddr, IntMsgInfo, MsgInfo, StdAddr,
};
use tycho_types::num::Tokens;

/// A benchmark case of §12.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum BenchCase {
    /// `prepare_diff` + `write` of large diffs into one shard.
    Apply,
    /// Iteration over two sources in one partition, with 0 % and 50 % of messages addressed elsewhere.
    Iteration,
    /// Commit of 1 mc block + 16 top shard blocks, flushes included.
    Commit,
    /// One GC tick over a large range, with concurrent applies.
    Gc,
    /// Clear of uncommitted diffs.
    Clear,
    /// Import of a persistent queue state into fresh databases.
    Import,
}

impl BenchCase {
    /// Every case.
    pub(crate) const ALL: [BenchCase; 6] = [
        Self::Apply,
        Self::Iteration,
        Self::Commit,
        Self::Gc,
        Self::Clear,
        Self::Import,
    ];

    /// Lower-case name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Apply => "apply",
            Self::Iteration => "iteration",
            Self::Commit => "commit",
            Self::Gc => "gc",
            Self::Clear => "clear",
            Self::Import => "import",
        }
    }
}

/// A queue state file for the import case.
#[derive(Debug, Clone)]
pub(crate) struct ImportInput {
    /// Block of the state.
    pub(crate) block_id: BlockId,
    /// Expected top diff hash.
    pub(crate) diff_hash: HashBytes,
    /// Expected tail length.
    pub(crate) tail_len: u32,
    /// The file bytes.
    pub(crate) data: Vec<u8>,
}

/// Sizes of the workloads; [`BenchParams::default`] is the §12 workload.
#[derive(Debug, Clone)]
pub(crate) struct BenchParams {
    /// Apply: number of diffs.
    pub(crate) apply_diffs: usize,
    /// Apply, GC and clear: messages per diff.
    pub(crate) messages_per_diff: usize,
    /// Iteration: total messages (two sources).
    pub(crate) iteration_messages: usize,
    /// Commit: number of measured commits.
    pub(crate) commit_rounds: usize,
    /// Commit: top shard blocks per mc block.
    pub(crate) commit_shards: usize,
    /// GC: number of diffs in the deleted range.
    pub(crate) gc_diffs: usize,
    /// Clear: uncommitted diffs per clear.
    pub(crate) clear_diffs: usize,
    /// Clear: number of measured clears.
    pub(crate) clear_rounds: usize,
    /// Import: runs into fresh databases.
    pub(crate) import_runs: usize,
    /// Import: the state file (the case is skipped without it).
    pub(crate) import_input: Option<ImportInput>,
    /// Destination accounts.
    pub(crate) accounts: usize,
}

impl Default for BenchParams {
    fn default() -> Self {
        Self {
            apply_diffs: 100,
            messages_per_diff: 10_000,
            iteration_messages: 1_000_000,
            commit_rounds: 100,
            commit_shards: 16,
            gc_diffs: 100,
            clear_diffs: 10,
            clear_rounds: 5,
            import_runs: 100,
            import_input: None,
            accounts: 1000,
        }
    }
}

impl BenchParams {
    /// Smaller workloads for a quick look (the figures are noisier).
    pub(crate) fn quick(self) -> Self {
        Self {
            apply_diffs: 10,
            iteration_messages: 100_000,
            commit_rounds: 20,
            gc_diffs: 10,
            clear_rounds: 2,
            import_runs: 10,
            ..self
        }
    }
}

/// One reported figure.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct BenchRow {
    /// The case (`apply`, `iteration`, …).
    pub(crate) case: &'static str,
    /// What was measured.
    pub(crate) metric: String,
    /// The value.
    pub(crate) value: f64,
    /// Its unit.
    pub(crate) unit: &'static str,
}

fn row(case: BenchCase, metric: impl Into<String>, value: f64, unit: &'static str) -> BenchRow {
    BenchRow {
        case: case.name(),
        metric: metric.into(),
        value,
        unit,
    }
}

/// Runs the cases; each uses a fresh temp database. Needs no runtime of its own (GC ticks are driven directly).
pub(crate) fn run(cases: &[BenchCase], params: &BenchParams) -> Result<Vec<BenchRow>> {
    let mut rows = Vec::new();
    for case in cases {
        match case {
            BenchCase::Apply => rows.extend(bench_apply(params)?),
            BenchCase::Iteration => rows.extend(bench_iteration(params)?),
            BenchCase::Commit => rows.extend(bench_commit(params)?),
            BenchCase::Gc => rows.extend(bench_gc(params)?),
            BenchCase::Clear => rows.extend(bench_clear(params)?),
            BenchCase::Import => rows.extend(bench_import(params)?),
        }
    }
    Ok(rows)
}

/// Formats rows as an aligned text table.
pub(crate) fn format_table(rows: &[BenchRow]) -> String {
    let mut out = format!(
        "{:<10} {:<44} {:>16} {}\n",
        "case", "metric", "value", "unit"
    );
    for r in rows {
        out.push_str(&format!(
            "{:<10} {:<44} {:>16.3} {}\n",
            r.case, r.metric, r.value, r.unit
        ));
    }
    out
}

/// Formats rows as a JSON array.
pub(crate) fn format_json(rows: &[BenchRow]) -> String {
    serde_json::to_string_pretty(rows).unwrap_or_else(|_| "[]".into())
}

struct TempQueue {
    // Field order: the queue (and its storage) closes before the directory is removed.
    queue: Arc<Queue<EnqueuedMessage>>,
    _dir: tempfile::TempDir,
}

fn temp_queue() -> Result<TempQueue> {
    let dir = tempfile::tempdir().map_err(|source| regolith_queue::QueueError::Io {
        context: "creating a temp dir".into(),
        source,
    })?;
    let storage = QueueStorage::open(dir.path())?;
    let zerostate = BlockId {
        shard: ShardIdent::MASTERCHAIN,
        seqno: 0,
        root_hash: HashBytes::ZERO,
        file_hash: HashBytes::ZERO,
    };
    let queue =
        QueueFactory::new(storage, zerostate, QueueConfig::default()).create_without_gc()?;
    Ok(TempQueue { queue, _dir: dir })
}

/// Generates the workload's messages.
struct Workload {
    accounts: Vec<IntAddr>,
    router: PartitionRouter,
    body: Cell,
    next_lt: u64,
    rng: u64,
}

impl Workload {
    fn new(accounts: usize) -> Self {
        let accounts: Vec<IntAddr> = (0..accounts.max(2))
            .map(|i| {
                let mut account = [0u8; 32];
                account[..8]
                    .copy_from_slice(&(i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15).to_be_bytes());
                account[8..16].copy_from_slice(&(i as u64).to_be_bytes());
                let workchain = if i % 2 == 0 { 0 } else { -1 };
                IntAddr::Std(StdAddr::new(workchain, HashBytes(account)))
            })
            .collect();
        let mut router = PartitionRouter::new();
        for a in accounts.iter().step_by(10) {
            router.insert_dst(a, 1).expect("std address, partition 1");
        }
        let mut body = CellBuilder::new();
        let data = [0x5a_u8; 120];
        body.store_raw(&data, 960).expect("fits a cell");
        Self {
            accounts,
            router,
            body: body.build().expect("valid cell"),
            next_lt: 1,
            rng: 0x2545_f491_4f6c_dd1d,
        }
    }

    fn random(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    fn message(&mut self, src: &IntAddr, dst: &IntAddr) -> EnqueuedMessage {
        let lt = self.next_lt;
        self.next_lt += 1;
        let info = IntMsgInfo {
            src: src.clone(),
            dst: dst.clone(),
            value: CurrencyCollection::new(1_000_000_000 + lt as u128),
            fwd_fee: Tokens::new(1_000_000),
            created_lt: lt,
            created_at: 1_700_000_000,
            ..Default::default()
        };
        let mut b = CellBuilder::new();
        MsgInfo::Int(info)
            .store_into(&mut b, Cell::empty_context())
            .expect("message info fits");
        b.store_bit_zero().expect("init bit");
        b.store_bit_one().expect("body bit");
        b.store_reference(self.body.clone()).expect("body ref");
        let cell = b.build().expect("valid message");
        EnqueuedMessage::from_cell(cell).expect("internal message")
    }

    /// A diff of `n` messages from a source in `source_wc` to random accounts.
    fn diff(&mut self, n: usize, source_wc: i8) -> QueueDiffWithMessages<EnqueuedMessage> {
        let src = IntAddr::Std(StdAddr::new(source_wc, HashBytes([0x77; 32])));
        let mut messages = Vec::with_capacity(n);
        for _ in 0..n {
            let i = (self.random() % self.accounts.len() as u64) as usize;
            let dst = self.accounts[i].clone();
            messages.push(self.message(&src, &dst));
        }
        QueueDiffWithMessages::new(messages, BTreeMap::new(), self.router.clone())
    }

    /// A diff of `n` messages in partition 0, `elsewhere` percent of them to wc −1, the rest to wc 0.
    fn diff_p0(
        &mut self,
        n: usize,
        elsewhere_percent: u64,
    ) -> QueueDiffWithMessages<EnqueuedMessage> {
        let src = IntAddr::Std(StdAddr::new(0, HashBytes([0x77; 32])));
        let mut messages = Vec::with_capacity(n);
        for i in 0..n as u64 {
            let wc = if (i * 100 / n.max(1) as u64) < elsewhere_percent {
                -1
            } else {
                0
            };
            let mut account = [0u8; 32];
            account[..8].copy_from_slice(&self.random().to_be_bytes());
            let dst = IntAddr::Std(StdAddr::new(wc, HashBytes(account)));
            messages.push(self.message(&src, &dst));
        }
        QueueDiffWithMessages::new(messages, BTreeMap::new(), PartitionRouter::new())
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn apply_one(
    queue: &Queue<EnqueuedMessage>,
    diff: &QueueDiffWithMessages<EnqueuedMessage>,
    shard: ShardIdent,
    seqno: u32,
    processed_to: Option<QueueKey>,
) -> Result<(Duration, usize)> {
    let mut diff_hash = [0u8; 32];
    diff_hash[..4].copy_from_slice(&seqno.to_be_bytes());
    diff_hash[4..12].copy_from_slice(&shard.prefix().to_be_bytes());
    diff_hash[12..16].copy_from_slice(&shard.workchain().to_be_bytes());
    let stats = DiffStatistics::for_collated(diff, shard, u64::from(seqno), u64::from(seqno));
    let mut diff = diff.clone();
    if let Some(key) = processed_to {
        diff.processed_to.insert(shard, key);
    }
    let started = Instant::now();
    let block = BlockIdShort { shard, seqno };
    let mut bytes = 0;
    if let Some(pending) = queue.prepare_diff(
        &diff,
        block,
        &HashBytes(diff_hash),
        &stats,
        Some(DiffZone::Both),
    )? {
        bytes = pending.batch_bytes();
        pending.write()?;
    }
    Ok((started.elapsed(), bytes))
}

fn bench_apply(params: &BenchParams) -> Result<Vec<BenchRow>> {
    let case = BenchCase::Apply;
    let tq = temp_queue()?;
    let mut workload = Workload::new(params.accounts);
    let mut times = Vec::with_capacity(params.apply_diffs);
    let mut batch_bytes = 0usize;
    let mut boc_bytes = 0usize;
    for seqno in 1..=params.apply_diffs as u32 {
        let diff = workload.diff(params.messages_per_diff, 0);
        if seqno == 1 {
            boc_bytes = diff
                .messages
                .values()
                .map(|m| tycho_types::boc::Boc::encode(&m.cell).len())
                .sum::<usize>()
                / diff.messages.len().max(1);
        }
        let (elapsed, bytes) = apply_one(&tq.queue, &diff, ShardIdent::BASECHAIN, seqno, None)?;
        times.push(elapsed);
        batch_bytes += bytes;
    }
    let total: Duration = times.iter().sum();
    let mut sorted: Vec<f64> = times.iter().map(|d| ms(*d)).collect();
    sorted.sort_by(f64::total_cmp);
    let messages = params.apply_diffs * params.messages_per_diff;
    Ok(vec![
        row(
            case,
            "messages/s",
            messages as f64 / total.as_secs_f64(),
            "msg/s",
        ),
        row(case, "p50 per diff", percentile(&sorted, 0.5), "ms"),
        row(case, "p99 per diff", percentile(&sorted, 0.99), "ms"),
        row(
            case,
            "batch bytes per diff",
            batch_bytes as f64 / params.apply_diffs.max(1) as f64,
            "B",
        ),
        row(case, "message BOC size", boc_bytes as f64, "B"),
    ])
}

fn bench_iteration(params: &BenchParams) -> Result<Vec<BenchRow>> {
    let case = BenchCase::Iteration;
    let mut rows = Vec::new();
    for elsewhere in [0u64, 50] {
        let tq = temp_queue()?;
        let mut workload = Workload::new(params.accounts);
        let sources = [
            ShardIdent::BASECHAIN,
            ShardIdent::new(0, 0x4000_0000_0000_0000).expect("valid"),
        ];
        let per_diff = params.messages_per_diff.max(1);
        let diffs = params.iteration_messages.div_ceil(per_diff);
        for i in 0..diffs {
            let diff = workload.diff_p0(per_diff, elsewhere);
            let source = sources[i % 2];
            apply_one(&tq.queue, &diff, source, (i / 2) as u32 + 1, None)?;
        }
        let ranges: Vec<BoundedShardRange> = sources
            .iter()
            .map(|s| {
                BoundedShardRange::new(
                    *s,
                    std::ops::Bound::Included(QueueKey::MIN),
                    std::ops::Bound::Excluded(QueueKey::MAX),
                )
            })
            .collect();
        let started = Instant::now();
        let mut it = tq
            .queue
            .create_iterator(ShardIdent::BASECHAIN, 0, &ranges)?;
        let mut yielded = 0u64;
        while let Some(item) = it.next() {
            item?;
            yielded += 1;
        }
        let elapsed = started.elapsed().as_secs_f64();
        let scanned = it.scanned();
        rows.push(row(
            case,
            format!("{elsewhere}% elsewhere: yielded/s"),
            yielded as f64 / elapsed,
            "msg/s",
        ));
        rows.push(row(
            case,
            format!("{elsewhere}% elsewhere: scanned/s"),
            scanned as f64 / elapsed,
            "msg/s",
        ));
        rows.push(row(
            case,
            format!("{elsewhere}% elsewhere: yielded"),
            yielded as f64,
            "msg",
        ));
    }
    Ok(rows)
}

fn commit_top_blocks(mc_seqno: u32, shards: &[ShardIdent], shard_seqno: u32) -> Vec<TopBlock> {
    let mut out = vec![TopBlock {
        block_id: BlockId {
            shard: ShardIdent::MASTERCHAIN,
            seqno: mc_seqno,
            root_hash: HashBytes([1; 32]),
            file_hash: HashBytes([2; 32]),
        },
        ref_by_mc_seqno: mc_seqno,
        updated: true,
    }];
    out.extend(shards.iter().map(|s| TopBlock {
        block_id: BlockId {
            shard: *s,
            seqno: shard_seqno,
            root_hash: HashBytes([3; 32]),
            file_hash: HashBytes([4; 32]),
        },
        ref_by_mc_seqno: mc_seqno,
        updated: true,
    }));
    out
}

fn bench_shards(n: usize) -> Vec<ShardIdent> {
    let n = n.clamp(1, 64).next_power_of_two();
    let depth = n.trailing_zeros();
    (0..n as u64)
        .map(|i| {
            let prefix = if depth == 0 {
                ShardIdent::PREFIX_FULL
            } else {
                (i << (64 - depth)) | (1u64 << (63 - depth))
            };
            ShardIdent::new(0, prefix).expect("valid shard")
        })
        .collect()
}

fn bench_commit(params: &BenchParams) -> Result<Vec<BenchRow>> {
    let case = BenchCase::Commit;
    let tq = temp_queue()?;
    let mut workload = Workload::new(params.accounts);
    let shards = bench_shards(params.commit_shards);
    let mut times = Vec::with_capacity(params.commit_rounds);
    for round in 1..=params.commit_rounds as u32 {
        for shard in &shards {
            let diff = workload.diff(10, 0);
            apply_one(
                &tq.queue,
                &diff,
                *shard,
                round,
                Some(QueueKey::max_for_lt(workload.next_lt / 2)),
            )?;
        }
        let diff = workload.diff(10, -1);
        apply_one(&tq.queue, &diff, ShardIdent::MASTERCHAIN, round, None)?;
        let top_blocks = commit_top_blocks(round, &shards, round);
        let started = Instant::now();
        tq.queue.commit(&top_blocks, &[0, 1])?;
        times.push(ms(started.elapsed()));
    }
    times.sort_by(f64::total_cmp);
    Ok(vec![
        row(
            case,
            format!("p50 (1 mc + {} shards)", shards.len()),
            percentile(&times, 0.5),
            "ms",
        ),
        row(
            case,
            format!("p99 (1 mc + {} shards)", shards.len()),
            percentile(&times, 0.99),
            "ms",
        ),
    ])
}

fn bench_gc(params: &BenchParams) -> Result<Vec<BenchRow>> {
    let case = BenchCase::Gc;
    let tq = temp_queue()?;
    let mut workload = Workload::new(params.accounts);
    let sh = ShardIdent::BASECHAIN;
    for seqno in 1..=params.gc_diffs as u32 {
        let diff = workload.diff(params.messages_per_diff, 0);
        apply_one(&tq.queue, &diff, sh, seqno, None)?;
    }
    let bound = QueueKey::MAX;
    let mc_diff = workload.diff(1, -1);
    let mut mc_diff = mc_diff;
    mc_diff.processed_to.insert(sh, bound);
    apply_one(&tq.queue, &mc_diff, ShardIdent::MASTERCHAIN, 1, None)?;
    tq.queue.commit(
        &commit_top_blocks(1, &[sh], params.gc_diffs as u32),
        &[0, 1],
    )?;

    // Concurrent applies into another shard while the tick runs.
    let stop = Arc::new(AtomicBool::new(false));
    let queue = tq.queue.clone();
    let stop_flag = stop.clone();
    let mut side = Workload::new(params.accounts);
    side.next_lt = u64::MAX / 2;
    let applier = std::thread::spawn(move || -> Result<Vec<f64>> {
        let other = ShardIdent::new(0, 0x4000_0000_0000_0000).expect("valid");
        let mut latencies = Vec::new();
        let mut seqno = 1;
        while !stop_flag.load(Ordering::Acquire) {
            let diff = side.diff(1000, 0);
            let (elapsed, _) = apply_one(&queue, &diff, other, seqno, None)?;
            latencies.push(ms(elapsed));
            seqno += 1;
        }
        Ok(latencies)
    });
    let started = Instant::now();
    let report = tq.queue.run_gc_tick();
    let tick = started.elapsed();
    stop.store(true, Ordering::Release);
    let mut latencies = applier.join().unwrap_or_else(|_| Ok(Vec::new()))?;
    latencies.sort_by(f64::total_cmp);
    let deleted = params.gc_diffs * params.messages_per_diff;
    let ok = report.is_some_and(|r| r.failed.is_empty());
    Ok(vec![
        row(
            case,
            "messages deleted/s (tick incl. compaction)",
            deleted as f64 / tick.as_secs_f64(),
            "msg/s",
        ),
        row(case, "tick time", ms(tick), "ms"),
        row(
            case,
            "p99 concurrent apply (1000 msgs)",
            percentile(&latencies, 0.99),
            "ms",
        ),
        row(
            case,
            "concurrent applies during tick",
            latencies.len() as f64,
            "diffs",
        ),
        row(case, "tick succeeded", if ok { 1.0 } else { 0.0 }, "bool"),
    ])
}

fn bench_clear(params: &BenchParams) -> Result<Vec<BenchRow>> {
    let case = BenchCase::Clear;
    let mut times = Vec::new();
    for _ in 0..params.clear_rounds.max(1) {
        let tq = temp_queue()?;
        let mut workload = Workload::new(params.accounts);
        for seqno in 1..=params.clear_diffs as u32 {
            let diff = workload.diff(params.messages_per_diff, 0);
            apply_one(&tq.queue, &diff, ShardIdent::BASECHAIN, seqno, None)?;
        }
        let started = Instant::now();
        tq.queue
            .clear_uncommitted(&[0, 1], &[ShardIdent::MASTERCHAIN, ShardIdent::BASECHAIN])?;
        times.push(ms(started.elapsed()));
    }
    times.sort_by(f64::total_cmp);
    Ok(vec![row(
        case,
        format!("ms per clear ({} diffs)", params.clear_diffs),
        percentile(&times, 0.5),
        "ms",
    )])
}

fn bench_import(params: &BenchParams) -> Result<Vec<BenchRow>> {
    let case = BenchCase::Import;
    let Some(input) = &params.import_input else {
        return Ok(Vec::new());
    };
    let mut total = Duration::ZERO;
    let mut messages = 0usize;
    for _ in 0..params.import_runs.max(1) {
        let tq = temp_queue()?;
        let started = Instant::now();
        let summary = tq.queue.storage().import_queue_state(
            &input.block_id,
            &input.diff_hash,
            input.tail_len,
            &input.data,
        )?;
        total += started.elapsed();
        messages += summary.messages;
    }
    Ok(vec![
        row(
            case,
            "messages/s imported",
            messages as f64 / total.as_secs_f64(),
            "msg/s",
        ),
        row(
            case,
            "ms per import",
            ms(total) / params.import_runs.max(1) as f64,
            "ms",
        ),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_run_produces_every_row() {
        let params = BenchParams {
            apply_diffs: 3,
            messages_per_diff: 200,
            iteration_messages: 800,
            commit_rounds: 3,
            commit_shards: 4,
            gc_diffs: 3,
            clear_diffs: 2,
            clear_rounds: 1,
            import_runs: 1,
            import_input: None,
            accounts: 50,
        };
        let rows = run(&BenchCase::ALL, &params).unwrap();
        for case in ["apply", "iteration", "commit", "gc", "clear"] {
            assert!(rows.iter().any(|r| r.case == case), "{case}");
        }
        let yielded: Vec<f64> = rows
            .iter()
            .filter(|r| r.metric.ends_with("yielded"))
            .map(|r| r.value)
            .collect();
        assert_eq!(yielded, [800.0, 400.0]);
        assert!(rows
            .iter()
            .any(|r| r.metric == "tick succeeded" && r.value == 1.0));
        assert!(format_table(&rows).contains("apply"));
        assert!(format_json(&rows).starts_with('['));
    }
}
