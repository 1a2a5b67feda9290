//! `regolith bench handles`: block-handle storage on the reference workload (storage.md §5, §6).
//!
//! N block ids (half mc, half wc 0, interleaved, random hashes, one key block per 1,000 mc blocks). Every
//! case runs on one thread over all N ids in order, on a fresh storage in its own temp dir; what a case needs
//! beforehand (created handles, stored connections, a flush) is prepared untimed.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use rand::{Rng, SeedableRng};
use regolith_formats::{BlockId, HashBytes, ShardIdent};
use regolith_storage::{BlockHandle, Direction, NewBlockMeta, Storage, StorageConfig};

/// The default number of block ids.
pub const HANDLES_DEFAULT_COUNT: usize = 200_000;

/// The cases, in the order they run and are printed.
const CASES: [Case; 9] = [
    Case::CreateNew,
    Case::LoadHot,
    Case::CreateExisting,
    Case::SetCommitted,
    Case::StoreNext1,
    Case::StorePrev1,
    Case::LoadNext1,
    Case::LoadColdMemtable,
    Case::LoadColdFlushed,
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    CreateNew,
    LoadHot,
    CreateExisting,
    SetCommitted,
    StoreNext1,
    StorePrev1,
    LoadNext1,
    LoadColdMemtable,
    LoadColdFlushed,
}

impl Case {
    fn name(self) -> &'static str {
        match self {
            Self::CreateNew => "create_or_load (new)",
            Self::LoadHot => "load_handle (hot, cached)",
            Self::CreateExisting => "create_or_load (existing, cached)",
            Self::SetCommitted => "set_block_committed",
            Self::StoreNext1 => "store_connection Next1",
            Self::StorePrev1 => "store_connection Prev1",
            Self::LoadNext1 => "load_connection Next1",
            Self::LoadColdMemtable => "load_handle (cold, memtable)",
            Self::LoadColdFlushed => "load_handle (cold, flushed)",
        }
    }
}

/// One printed figure.
#[derive(Debug, Clone, serde::Serialize)]
struct Row {
    case: &'static str,
    metric: &'static str,
    value: f64,
    unit: &'static str,
}

/// `bench handles`: runs every case and prints a table or JSON rows `{case, metric, value, unit}`.
/// `only` keeps the cases whose name contains it.
pub(super) fn handles(json: bool, count: usize, only: Option<&str>) -> Result<()> {
    let count = count.max(2);
    if cfg!(debug_assertions) && !json {
        eprintln!("note: this is a debug build; figures are only meaningful with --release");
    }
    let workload = workload(count);
    let mut rows = Vec::with_capacity(CASES.len());
    let selected: Vec<Case> = CASES
        .into_iter()
        .filter(|case| only.is_none_or(|text| case.name().contains(text)))
        .collect();
    anyhow::ensure!(
        !selected.is_empty(),
        "no case name contains `{}`; the cases are: {}",
        only.unwrap_or_default(),
        CASES.map(Case::name).join(", ")
    );
    for case in selected {
        let ops_per_second =
            run_case(case, &workload).with_context(|| format!("bench case `{}`", case.name()))?;
        rows.push(Row {
            case: case.name(),
            metric: "ops/s",
            value: ops_per_second,
            unit: "ops/s",
        });
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        println!("{:<36} {:>14}", "case", "ops/s");
        for row in &rows {
            println!("{:<36} {:>14.0}", row.case, row.value);
        }
    }
    Ok(())
}

struct Workload {
    ids: Vec<BlockId>,
    metas: Vec<NewBlockMeta>,
}

/// Mc and wc 0 ids interleaved, seqnos from 1, random hashes (fixed seed), a key block every 1,000 mc.
fn workload(count: usize) -> Workload {
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x7265_676f_6c69_7468);
    let mut ids = Vec::with_capacity(count);
    let mut metas = Vec::with_capacity(count);
    for i in 0..count {
        let masterchain = i % 2 == 0;
        let seqno = (i / 2) as u32 + 1;
        let shard = if masterchain {
            ShardIdent::MASTERCHAIN
        } else {
            ShardIdent::BASECHAIN
        };
        ids.push(BlockId {
            shard,
            seqno,
            root_hash: HashBytes(rng.gen()),
            file_hash: HashBytes(rng.gen()),
        });
        metas.push(NewBlockMeta {
            is_key_block: masterchain && seqno.is_multiple_of(1000),
            gen_utime: 1_700_000_000 + seqno,
            ref_by_mc_seqno: seqno,
        });
    }
    Workload { ids, metas }
}

/// A storage in a temp dir that is removed on drop.
struct TempStorage {
    storage: Option<Storage>,
    dir: PathBuf,
}

impl TempStorage {
    fn new(case: Case) -> Result<Self> {
        let dir = std::env::temp_dir().join(format!(
            "regolith-bench-handles-{}-{}",
            std::process::id(),
            case as u8
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let storage = Storage::open(StorageConfig::new(&dir))?;
        Ok(Self {
            storage: Some(storage),
            dir,
        })
    }

    fn get(&self) -> &Storage {
        self.storage.as_ref().expect("open until drop")
    }
}

impl Drop for TempStorage {
    fn drop(&mut self) {
        drop(self.storage.take());
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn create_all(storage: &Storage, w: &Workload) -> Result<Vec<BlockHandle>> {
    let handles = storage.handles();
    w.ids
        .iter()
        .zip(&w.metas)
        .map(|(id, meta)| Ok(handles.create_or_load_handle(id, *meta)?.0))
        .collect()
}

/// The id each block is connected to: the next id in the workload (wrapping).
fn connected(w: &Workload, i: usize) -> &BlockId {
    &w.ids[(i + 1) % w.ids.len()]
}

fn store_all(storage: &Storage, w: &Workload, held: &[BlockHandle], dir: Direction) -> Result<()> {
    for (i, handle) in held.iter().enumerate() {
        storage
            .connections()
            .store_connection(handle, dir, connected(w, i))?;
    }
    Ok(())
}

/// Prepares the case untimed, then returns its ops/s over all N ids.
fn run_case(case: Case, w: &Workload) -> Result<f64> {
    let temp = TempStorage::new(case)?;
    let storage = temp.get();
    let handles = storage.handles();
    let n = w.ids.len();

    let held = match case {
        Case::CreateNew => Vec::new(),
        _ => create_all(storage, w)?,
    };
    if case == Case::LoadNext1 {
        store_all(storage, w, &held, Direction::Next1)?;
    }
    let held = match case {
        Case::LoadColdMemtable | Case::LoadColdFlushed => {
            drop(held);
            anyhow::ensure!(handles.cache().is_empty(), "handles are still cached");
            Vec::new()
        }
        _ => held,
    };
    if case == Case::LoadColdFlushed {
        storage.flush()?;
    }

    let start = Instant::now();
    match case {
        Case::CreateNew => {
            let created = create_all(storage, w)?;
            let elapsed = start.elapsed();
            drop(created);
            return Ok(n as f64 / elapsed.as_secs_f64());
        }
        Case::LoadHot | Case::LoadColdMemtable | Case::LoadColdFlushed => {
            for id in &w.ids {
                let handle = handles.load_handle(id)?;
                anyhow::ensure!(handle.is_some(), "block {id} is not found");
            }
        }
        Case::CreateExisting => {
            for (id, meta) in w.ids.iter().zip(&w.metas) {
                handles.create_or_load_handle(id, *meta)?;
            }
        }
        Case::SetCommitted => {
            for handle in &held {
                handles.set_block_committed(handle)?;
            }
        }
        Case::StoreNext1 => store_all(storage, w, &held, Direction::Next1)?,
        Case::StorePrev1 => store_all(storage, w, &held, Direction::Prev1)?,
        Case::LoadNext1 => {
            for (i, id) in w.ids.iter().enumerate() {
                let next = storage
                    .connections()
                    .load_connection(id, Direction::Next1)?;
                anyhow::ensure!(
                    next.as_ref() == Some(connected(w, i)),
                    "wrong Next1 of {id}"
                );
            }
        }
    }
    let elapsed = start.elapsed();
    drop(held);
    Ok(n as f64 / elapsed.as_secs_f64())
}
