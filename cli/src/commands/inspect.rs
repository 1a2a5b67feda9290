//! `regolith inspect`: a read-only look at the data directory (works while a node runs on it).

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};
use regolith_formats::{BlockKey, ShardIdent};
use regolith_node::config::DataDir;
use regolith_storage::{ArchiveId, Direction, KeyBlocksDirection, StateKind, Storage};
use serde_json::{json, Value};

use crate::block_ref::BlockRef;

/// `regolith inspect`.
#[derive(clap::Args)]
pub struct InspectArgs {
    /// Print JSON.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    what: InspectCommand,
}

#[derive(clap::Subcommand)]
enum InspectCommand {
    /// One block: by id (`wc:prefix:seqno:root:file`) or by masterchain seqno.
    Block {
        /// Block id (`wc:prefix:seqno[:root:file]`) or mc seqno.
        #[arg(allow_hyphen_values = true)]
        block: BlockRef,
    },
    /// The persistent states the node serves (the state index).
    States,
    /// The stored shard states: the checkpoint, every stored root, and the cells and bytes under them.
    State {
        /// Also check every reference count (state.md §7.7.1); a wrong one is reported and fails the command.
        #[arg(long)]
        check: bool,
    },
    /// The key-block index.
    KeyBlocks,
    /// Archives and their state.
    Archives,
    /// Blocks per shard, last applied mc block, startup check counts.
    Summary {
        /// Also print a BLAKE3 digest of every stored block's data, proof, queue diff and connections
        /// (equal on two nodes that hold the same chain).
        #[arg(long)]
        digest: bool,
    },
    /// The internal queue: commit pointers, diffs per shard with zones and counts, GC bounds.
    Queue {
        /// Also print a BLAKE3 digest of the whole queue content (reads every message).
        #[arg(long)]
        digest: bool,
    },
}

/// Runs `regolith inspect`.
pub async fn run(data: &DataDir, args: InspectArgs) -> Result<()> {
    let InspectArgs { json, what } = args;
    if let InspectCommand::Queue { digest } = what {
        data.load_node_config()?;
        let view = queue(&data.root, digest)?;
        if json {
            print(&view, true);
        } else {
            print_queue_text(&view);
        }
        return Ok(());
    }
    let config = data.load_node_config()?;
    let storage = open_for_inspect(config.storage)?;
    let value = match what {
        InspectCommand::Queue { .. } => unreachable!("handled above"),
        InspectCommand::Block { block: which } => block(&storage, &which).await?,
        InspectCommand::KeyBlocks => key_blocks(&storage)?,
        InspectCommand::States => states(&storage)?,
        InspectCommand::State { check } => {
            let value = shard_states(&storage, check)?;
            if let Some(mismatch) = value["check"]["first_mismatch"].as_str() {
                print(&value, json);
                if value["import_open"] == true {
                    bail!("the stored states are not final: {mismatch}");
                }
                bail!("the stored states are damaged: {mismatch}");
            }
            value
        }
        InspectCommand::Archives => archives(&storage)?,
        InspectCommand::Summary { digest } => {
            let mut value = summary(&storage)?;
            if digest {
                value["chain_digest"] = chain_digest(&storage).await?.into();
            }
            value
        }
    };
    print(&value, json);
    Ok(())
}

/// Opens the storage for inspection, read-only (no lock: a node may hold or be taking the database).
pub fn open_for_inspect(config: regolith_storage::StorageConfig) -> Result<Storage> {
    if !config.root_dir.join("core").exists() {
        bail!(
            "{} holds no block storage (run `regolith init` first)",
            config.root_dir.display()
        );
    }
    // Read-only first: it takes no lock, so a node starting at this instant is never refused its database.
    // A database that read-only mode cannot open (one made before a table was added) is opened normally.
    match Storage::open_read_only(config.clone()) {
        Ok(s) => Ok(s),
        Err(read_only) => Storage::open(config)
            .with_context(|| format!("cannot open the block storage (read-only: {read_only})")),
    }
}

/// `inspect block`.
pub async fn block(storage: &Storage, what: &BlockRef) -> Result<Value> {
    let id = what.resolve(storage)?;
    let handle = storage
        .handles()
        .load_handle(&id)?
        .with_context(|| format!("block {id} is not stored"))?;
    let id = *handle.id();
    let meta = handle.meta().load();
    let mut connections = serde_json::Map::new();
    for dir in Direction::ALL {
        if let Some(other) = storage.connections().load_connection(&id, dir)? {
            connections.insert(format!("{dir:?}").to_lowercase(), json!(other.to_string()));
        }
    }
    let components = storage.components();
    let data_compressed = components.get_compressed_block_data_size(&handle)?;
    let proof = if handle.has_proof() {
        Some(components.load_block_proof_raw(&handle).await?.len())
    } else {
        None
    };
    let queue_diff = if handle.has_queue_diff() {
        Some(components.load_queue_diff_raw(&handle).await?.len())
    } else {
        None
    };
    let data = if handle.has_data() {
        Some(components.load_block_data_raw(&handle).await?.len())
    } else {
        None
    };
    let archive = match storage.archives().get_archive_id(handle.ref_by_mc_seqno()) {
        ArchiveId::Found(a) => json!({"id": a, "committed": true}),
        ArchiveId::TooNew => match storage.archives().list_archive_ids().last() {
            Some(a) if *a <= handle.ref_by_mc_seqno() => json!({"id": a, "committed": false}),
            _ => Value::Null,
        },
        ArchiveId::NotFound => Value::Null,
    };
    let mut persistent_states = Vec::new();
    for kind in [StateKind::Shard, StateKind::Queue] {
        if let Some(record) = storage.persistent_states().get(&id, kind)? {
            persistent_states.push(
                json!({"kind": state_kind_name(kind), "file": record.file, "size": record.size}),
            );
        }
    }
    Ok(json!({
        "id": id.to_string(),
        "flags": meta.flags.names(),
        "ref_by_mc_seqno": handle.ref_by_mc_seqno(),
        "gen_utime": meta.gen_utime,
        "connections": connections,
        "components": {
            "data": data, "data_compressed": data_compressed, "proof": proof, "queue_diff": queue_diff,
        },
        "archive": archive,
        "persistent_states": persistent_states,
        // How the block was proven: its stored proof verified again.
        "proof": regolith_node::trust::proofs::describe_stored(storage, &handle).await,
    }))
}

/// `inspect states`: every recorded persistent state.
pub fn states(storage: &Storage) -> Result<Value> {
    let dir = storage.persistent_states().dir().to_path_buf();
    let mut out = Vec::new();
    for record in storage.persistent_states().list()? {
        out.push(json!({
            "block": record.block.to_string(),
            "kind": state_kind_name(record.kind),
            "file": dir.join(&record.file).display().to_string(),
            "size": record.size,
            "chunk_size": record.chunk_size,
            "split_depth": record.split_depth,
            "parts": record.parts.iter().map(|p| json!({"prefix": format!("{:016x}", p.prefix), "size": p.size})).collect::<Vec<_>>(),
        }));
    }
    Ok(Value::Array(out))
}

/// `inspect state [--check]`.
pub fn shard_states(storage: &Storage, check: bool) -> Result<Value> {
    let cells = storage.cells();
    let roots: Vec<Value> = cells
        .state_roots()?
        .iter()
        .map(|(id, root)| json!({"block": id.to_string(), "root": root.to_string()}))
        .collect();
    let mut value = json!({
        "checkpoint": cells.checkpoint()?.map(|id| id.to_string()),
        "import_open": cells.import_journal()?.is_some(),
        "states": roots,
    });
    if check {
        let report = regolith_state::check::check(cells)?;
        value["cells"] = report.cells.into();
        value["cell_bytes"] = report.cell_bytes.into();
        value["counted_cells"] = report.counted_cells.into();
        value["check"] = json!({
            "ok": report.first_mismatch.is_none(),
            "first_mismatch": report.first_mismatch,
        });
    } else {
        let (mut count, mut bytes) = (0u64, 0u64);
        cells.for_each_cell(|_, body| {
            count += 1;
            bytes += body.len() as u64;
            Ok(true)
        })?;
        value["cells"] = count.into();
        value["cell_bytes"] = bytes.into();
        value["counted_cells"] = cells.ref_count_rows()?.len().into();
    }
    Ok(value)
}

fn state_kind_name(kind: StateKind) -> &'static str {
    match kind {
        StateKind::Shard => "shard",
        StateKind::Queue => "queue",
    }
}

/// `inspect key-blocks`.
pub fn key_blocks(storage: &Storage) -> Result<Value> {
    let mut out = Vec::new();
    for id in storage
        .handles()
        .key_blocks_iter(KeyBlocksDirection::ForwardFrom(0))
    {
        let id = id?;
        let handle = storage.handles().load_handle(&id)?;
        out.push(json!({
            "seqno": id.seqno,
            "id": id.to_string(),
            "gen_utime": handle.as_ref().map(regolith_storage::BlockHandle::gen_utime),
        }));
    }
    Ok(Value::Array(out))
}

/// `inspect archives`.
pub fn archives(storage: &Storage) -> Result<Value> {
    let archives = storage.archives();
    let committed = archives.committed_archive_ids();
    let mut out = Vec::new();
    for id in archives.list_archive_ids() {
        if committed.contains(&id) {
            out.push(
                json!({"id": id, "state": "committed", "size": archives.get_archive_size(id)?}),
            );
        } else {
            // Distinct blocks: a block moved in again after a crash is listed twice and written once
            // (storage.md §8.4).
            let blocks = archives.pending_block_ids(id).map_or(0, |ids| {
                ids.into_iter()
                    .collect::<std::collections::BTreeSet<_>>()
                    .len()
            });
            out.push(json!({"id": id, "state": "open", "blocks": blocks}));
        }
    }
    Ok(Value::Array(out))
}

/// `inspect summary`.
pub fn summary(storage: &Storage) -> Result<Value> {
    let mut per_shard: BTreeMap<String, (usize, u32, u32)> = BTreeMap::new();
    for id in storage.handles().iter_block_ids_from(BlockKey([0; 48])) {
        let id = id?;
        let e = per_shard
            .entry(id.shard.to_string())
            .or_insert((0, u32::MAX, 0));
        e.0 += 1;
        e.1 = e.1.min(id.seqno);
        e.2 = e.2.max(id.seqno);
    }
    let total: usize = per_shard.values().map(|e| e.0).sum();
    let state = storage.node_state();
    let stats = storage.open_stats();
    let peers_file = storage
        .config()
        .root_dir
        .join(regolith_node::run::PEERS_FILE);
    let book = regolith_rpc::client::PeerBook::open(&peers_file, &Default::default())?;
    let now = regolith_rpc::network::now_sec();
    let bans = book.bans();
    let boot = match regolith_node::boot_record::BootRecord::load(&storage.config().root_dir)? {
        Some(record) => json!({
            "type": "latest_persistent",
            "block": record.block,
            "complete": record.complete,
            "storing": record.storing,
            "shard_states": record.shard_states,
            "queue_states": record.queue_states,
            "bytes": record.bytes,
        }),
        None => json!({"type": "genesis"}),
    };
    Ok(json!({
        "boot": boot,
        "blocks_total": total,
        "blocks_per_shard": per_shard.iter().map(|(shard, (n, min, max))| {
            json!({"shard": shard, "blocks": n, "min_seqno": min, "max_seqno": max})
        }).collect::<Vec<_>>(),
        "last_applied_mc_block": state.load_last_mc_block_id()?.map(|id| id.to_string()),
        "zerostate_id": state.load_zerostate_id()?.map(|id| id.to_string()),
        "zerostate_proof_size": state.load_zerostate_proof()?.map(|p| p.len()),
        "key_blocks": storage.handles().key_blocks_iter(KeyBlocksDirection::ForwardFrom(0)).count(),
        "archives": storage.archives().list_archive_ids().len(),
        "startup_check": stats.consistency,
        "archive_recovery": stats.archives,
        "persistent_states": stats.states,
        "peers": {
            "banned_now": bans.iter().filter(|(_, b)| b.until > now).count(),
            "bans_remembered": bans.len(),
            "recent_neighbours": book.recent().len(),
        },
    }))
}

/// BLAKE3 over every stored block in key order: its id, whether data, proof and queue diff are all there,
/// the BLAKE3 of each, and its connections. Two nodes that hold the same chain have the same digest.
pub async fn chain_digest(storage: &Storage) -> Result<String> {
    let mut hasher = blake3::Hasher::new();
    for id in storage.handles().iter_block_ids_from(BlockKey([0; 48])) {
        let id = id?;
        let Some(handle) = storage.handles().load_handle(&id)? else {
            continue;
        };
        hasher.update(id.to_string().as_bytes());
        let complete = handle.has_data() && handle.has_proof() && handle.has_queue_diff();
        hasher.update(&[u8::from(complete)]);
        if complete {
            let c = storage.components();
            for raw in [
                c.load_block_data_raw(&handle).await?,
                c.load_block_proof_raw(&handle).await?,
                c.load_queue_diff_raw(&handle).await?,
            ] {
                hasher.update(blake3::hash(&raw).as_bytes());
            }
        }
        for dir in Direction::ALL {
            if let Some(other) = storage.connections().load_connection(&id, dir)? {
                hasher.update(format!("{dir:?} {other}").as_bytes());
            }
        }
    }
    Ok(hasher.finalize().to_hex().to_string())
}

/// Prints a value as JSON or as indented text.
pub fn print(value: &Value, as_json: bool) {
    if as_json {
        println!(
            "{}",
            serde_json::to_string_pretty(value).unwrap_or_default()
        );
    } else {
        print_text(value, 0);
    }
}

fn print_text(value: &Value, indent: usize) {
    let pad = " ".repeat(indent);
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                match v {
                    Value::Object(_) | Value::Array(_) if !is_flat(v) => {
                        println!("{pad}{k}:");
                        print_text(v, indent + 2);
                    }
                    _ => println!("{pad}{k}: {}", scalar(v)),
                }
            }
        }
        Value::Array(items) => {
            if items.is_empty() {
                println!("{pad}(none)");
            }
            for item in items {
                match item {
                    Value::Object(map) => {
                        let line: Vec<String> = map
                            .iter()
                            .map(|(k, v)| format!("{k}={}", scalar(v)))
                            .collect();
                        println!("{pad}- {}", line.join(" "));
                    }
                    _ => println!("{pad}- {}", scalar(item)),
                }
            }
        }
        _ => println!("{pad}{}", scalar(value)),
    }
}

fn is_flat(v: &Value) -> bool {
    match v {
        Value::Array(items) => items.iter().all(|i| !i.is_object() && !i.is_array()),
        _ => false,
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        Value::Array(items) => items.iter().map(scalar).collect::<Vec<_>>().join("|"),
        other => other.to_string(),
    }
}

/// `inspect queue`: commit pointers, the last committed mc block, per shard its diffs (seqno, zone, message
/// counts per partition) and the GC bounds; `with_digest` adds a BLAKE3 digest of the whole queue content.
pub fn queue(data_root: &std::path::Path, with_digest: bool) -> Result<Value> {
    use regolith_queue::{DiffZone, QueueStorage, QUEUE_DB_DIR};
    if !data_root.join(QUEUE_DB_DIR).exists() {
        bail!(
            "{} holds no queue database yet (it is created by `regolith import` or `regolith run`)",
            data_root.display()
        );
    }
    // Read-only first, as for the block storage.
    let queue = match QueueStorage::open_read_only(data_root) {
        Ok(q) => q,
        Err(read_only) => QueueStorage::open(data_root)
            .with_context(|| format!("cannot open the queue database (read-only: {read_only})"))?,
    };
    let overview = queue.overview(with_digest)?;
    let key = |k: &regolith_queue::QueueKey| json!({"lt": k.lt, "hash": k.hash.to_string()});
    let mut shards: BTreeMap<ShardIdent, Vec<Value>> = BTreeMap::new();
    for d in &overview.diffs {
        let zone = match d.zone {
            DiffZone::Committed => "committed",
            _ => "uncommitted",
        };
        let per_partition: BTreeMap<String, u64> = d
            .messages_per_partition
            .iter()
            .map(|(p, n)| (p.to_string(), *n))
            .collect();
        shards.entry(d.shard).or_default().push(json!({
            "seqno": d.seqno,
            "zone": zone,
            "messages_per_partition": per_partition,
            "min_message": key(&d.info.min_message),
            "max_message": key(&d.info.max_message),
            "hash": d.info.hash.to_string(),
        }));
    }
    let count = |zone: DiffZone| overview.diffs.iter().filter(|d| d.zone == zone).count();
    Ok(json!({
        "last_committed_mc_block": overview.last_committed_mc_block.map(|id| id.to_string()),
        "commit_pointers": overview.commit_pointers.iter().map(|(shard, p)| {
            json!({"shard": shard.to_string(), "seqno": p.seqno, "queue_key": key(&p.queue_key)})
        }).collect::<Vec<_>>(),
        "committed_diffs": count(DiffZone::Committed),
        "uncommitted_diffs": count(DiffZone::Uncommitted),
        "shards": shards.iter().map(|(shard, diffs)| {
            json!({"shard": shard.to_string(), "diffs": diffs})
        }).collect::<Vec<_>>(),
        "gc_bounds": overview.gc_bounds.iter().map(|(shard, bound)| {
            json!({"source_shard": shard.to_string(), "delete_up_to": key(bound)})
        }).collect::<Vec<_>>(),
        "content_digest": overview.content_digest.map(|d| d.to_string()),
    }))
}

/// The text form of `inspect queue`: pointers, then one line per diff, then the GC bounds.
pub fn print_queue_text(view: &Value) {
    let lt = |k: &Value| k["lt"].as_u64().unwrap_or_default();
    println!(
        "last committed mc block: {}",
        view["last_committed_mc_block"].as_str().unwrap_or("none")
    );
    println!("commit pointers:");
    for p in view["commit_pointers"].as_array().into_iter().flatten() {
        println!(
            "  {:<22} seqno {:<10} up to lt {}",
            p["shard"].as_str().unwrap_or_default(),
            p["seqno"].as_u64().unwrap_or_default(),
            lt(&p["queue_key"])
        );
    }
    println!(
        "diffs: {} committed, {} uncommitted",
        view["committed_diffs"], view["uncommitted_diffs"]
    );
    for shard in view["shards"].as_array().into_iter().flatten() {
        let diffs = shard["diffs"].as_array().cloned().unwrap_or_default();
        println!(
            "shard {} ({} diffs)",
            shard["shard"].as_str().unwrap_or_default(),
            diffs.len()
        );
        println!(
            "  {:>10}  {:<11}  {:>20}  {:>20}  messages per partition",
            "seqno", "zone", "min lt", "max lt"
        );
        for d in diffs {
            let per_partition = d["messages_per_partition"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(p, n)| format!("p{p}={n}"))
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "-".into());
            println!(
                "  {:>10}  {:<11}  {:>20}  {:>20}  {per_partition}",
                d["seqno"].as_u64().unwrap_or_default(),
                d["zone"].as_str().unwrap_or_default(),
                lt(&d["min_message"]),
                lt(&d["max_message"])
            );
        }
    }
    println!("gc bounds (delete up to, inclusive):");
    for b in view["gc_bounds"].as_array().into_iter().flatten() {
        println!(
            "  {:<22} lt {}",
            b["source_shard"].as_str().unwrap_or_default(),
            lt(&b["delete_up_to"])
        );
    }
    if let Some(digest) = view["content_digest"].as_str() {
        println!("content digest: {digest}");
    }
}
