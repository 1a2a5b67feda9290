//! `regolith inspect`: a read-only look at the data directory (works while a node runs on it).

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};
use regolith_formats::block_id::parse_block_id;
use regolith_formats::{BlockId, BlockKey, ShardIdent};
use regolith_storage::{ArchiveId, BlockHandle, Direction, KeyBlocksDirection, Storage};
use serde_json::{json, Value};

/// Opens the storage for inspection: normally, or read-only when a node holds the database.
pub fn open_for_inspect(config: regolith_storage::StorageConfig) -> Result<Storage> {
    if !config.root_dir.join("core").exists() {
        bail!(
            "{} holds no block storage (run `regolith init` first)",
            config.root_dir.display()
        );
    }
    match Storage::open(config.clone()) {
        Ok(s) => Ok(s),
        Err(e) if e.to_string().contains("lock") => {
            Storage::open_read_only(config).context("cannot open the block storage read-only")
        }
        Err(e) => Err(e.into()),
    }
}

fn resolve_block(storage: &Storage, what: &str) -> Result<BlockHandle> {
    let id: BlockId = if let Ok(seqno) = what.parse::<u32>() {
        match storage
            .handles()
            .find_block_ids(&ShardIdent::MASTERCHAIN, seqno)?
            .first()
        {
            Some(id) => *id,
            None => bail!("no masterchain block with seqno {seqno} is stored"),
        }
    } else {
        parse_block_id(what)?
    };
    storage
        .handles()
        .load_handle(&id)?
        .with_context(|| format!("block {id} is not stored"))
}

/// `inspect block`.
pub async fn block(storage: &Storage, what: &str) -> Result<Value> {
    let handle = resolve_block(storage, what)?;
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
    }))
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
            "gen_utime": handle.as_ref().map(|h| h.gen_utime()),
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
            let blocks = archives
                .pending_block_ids(id)
                .map(|ids| ids.len())
                .unwrap_or(0);
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
    Ok(json!({
        "blocks_total": total,
        "blocks_per_shard": per_shard.iter().map(|(shard, (n, min, max))| {
            json!({"shard": shard, "blocks": n, "min_seqno": min, "max_seqno": max})
        }).collect::<Vec<_>>(),
        "last_applied_mc_block": state.load_last_mc_block_id()?.map(|id| id.to_string()),
        "zerostate_id": state.load_zerostate_id()?.map(|id| id.to_string()),
        "key_blocks": storage.handles().key_blocks_iter(KeyBlocksDirection::ForwardFrom(0)).count(),
        "archives": storage.archives().list_archive_ids().len(),
        "startup_check": stats.consistency,
        "archive_recovery": stats.archives,
    }))
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
