//! What a node serves from genesis: the zerostate proof and the zerostate persistent states (the mc zerostate
//! and each shard zerostate it lists), with the handles of the zerostate blocks and their flags.
//!
//! `init` writes all of it; every later start completes what a data dir made by an older build lacks.

use std::path::Path;

use anyhow::{Context, Result};
use regolith_formats::zerostate::{check_zerostate_proof, McZerostate, ShardZerostate};
use regolith_storage::{NewBlockMeta, StateKind, Storage};

/// The zerostate file `init` copies into the data directory.
pub const ZEROSTATE_FILE: &str = "zerostate.boc";

/// zstd level of the zerostate persistent-state files.
const STATE_ZSTD_LEVEL: i32 = 3;

/// What [`ensure`] wrote now.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct GenesisReport {
    /// The zerostate proof was built and stored now.
    pub proof_stored: bool,
    /// Persistent states recorded now (block ids).
    pub states_stored: Vec<String>,
}

/// Stores the zerostate handles, ids and proof, and the zerostate persistent states, where missing.
/// `shard_files` are shard zerostates given by the user; a listed shard without one gets the empty shard
/// zerostate, which must match its entry in the mc zerostate (an error names the shard otherwise).
pub fn ensure(
    storage: &Storage,
    zerostate: &McZerostate,
    zerostate_bytes: &[u8],
    shard_files: &[ShardZerostate],
) -> Result<GenesisReport> {
    let mut report = GenesisReport::default();
    // The mc zerostate's state is recorded last: once it is, every shard zerostate is (see `ensure_at_start`).
    let mut states = Vec::new();
    for listed in zerostate.listed_shards()? {
        let shard = match shard_files.iter().find(|s| s.id == listed.id) {
            Some(given) => given.clone(),
            None => zerostate.empty_shard_zerostate(&listed).with_context(|| {
                format!(
                    "shard {} has no zerostate file, and the empty shard zerostate does not match the \
                     mc zerostate (pass the shard's zerostate file to `init --shard-zerostate`)",
                    listed.id.shard
                )
            })?,
        };
        states.push((shard.id, zerostate.state.gen_utime, Some(shard)));
    }
    states.push((zerostate.id, zerostate.state.gen_utime, None));

    let node_state = storage.node_state();
    node_state.store_zerostate_id(&zerostate.id)?;
    if node_state.load_init_mc_block_id()?.is_none() {
        node_state.store_init_mc_block_id(&zerostate.id)?;
    }
    if node_state.load_last_mc_block_id()?.is_none() {
        node_state.store_last_mc_block_id(&zerostate.id)?;
    }
    if !has_current_proof(storage, &zerostate.id)? {
        let proof = zerostate.build_proof()?;
        node_state.store_zerostate_proof(&proof)?;
        report.proof_stored = true;
    }

    for (id, gen_utime, shard) in states {
        let (handle, _) = storage.handles().create_or_load_handle(
            &id,
            NewBlockMeta::zero_state(gen_utime, id.is_masterchain()),
        )?;
        storage.handles().set_is_zerostate(&handle)?;
        storage.handles().set_has_shard_state(&handle)?;
        let states = storage.persistent_states();
        if states.get(&id, StateKind::Shard)?.is_some() {
            continue;
        }
        let boc = match &shard {
            Some(shard) => &shard.boc[..],
            None => zerostate_bytes,
        };
        let compressed = zstd::bulk::compress(boc, STATE_ZSTD_LEVEL)
            .with_context(|| format!("compressing the zerostate of {id}"))?;
        states.store(&id, StateKind::Shard, &compressed)?;
        report.states_stored.push(id.to_string());
    }
    Ok(report)
}

/// Whether the stored zerostate proof is there and in the format of rpc.md §3.3. A data dir of an older build
/// holds it inside a Merkle-proof cell, which stock nodes refuse: it is built again.
fn has_current_proof(storage: &Storage, zerostate_id: &regolith_formats::BlockId) -> Result<bool> {
    let Some(proof) = storage.node_state().load_zerostate_proof()? else {
        return Ok(false);
    };
    match check_zerostate_proof(&proof, &zerostate_id.root_hash) {
        Ok(_) => Ok(true),
        Err(e) => {
            tracing::warn!(error = %e, "the stored zerostate proof is not in the served format: it is built again");
            Ok(false)
        }
    }
}

/// At the start of `run`, `import` and the other writers: completes the genesis data of a data dir made by an
/// older build from its `states/zerostate.boc`. A data dir without that file (made elsewhere) is left alone.
pub fn ensure_at_start(storage: &Storage, data_root: &Path) -> Result<()> {
    let path = data_root
        .join(regolith_storage::persistent_state::STATES_DIR)
        .join(ZEROSTATE_FILE);
    let Some(zerostate_id) = storage.node_state().load_zerostate_id()? else {
        return Ok(());
    };
    if has_current_proof(storage, &zerostate_id)?
        && storage
            .persistent_states()
            .get(&zerostate_id, StateKind::Shard)?
            .is_some()
    {
        return Ok(());
    }
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            tracing::warn!(file = %path.display(), "no zerostate file: the zerostate proof and states cannot be built");
            return Ok(());
        }
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let zerostate = McZerostate::parse(&bytes).with_context(|| format!("{}", path.display()))?;
    if zerostate.id != zerostate_id {
        anyhow::bail!(
            "{} is the zerostate {}, but the storage was initialised with {}",
            path.display(),
            zerostate.id,
            zerostate_id
        );
    }
    let report = match ensure(storage, &zerostate, &bytes, &[]) {
        Ok(report) => report,
        Err(e) => {
            tracing::warn!(error = %format!("{e:#}"), "the zerostate persistent states are not served");
            return Ok(());
        }
    };
    tracing::info!(
        proof_stored = report.proof_stored,
        states_stored = report.states_stored.len(),
        "completed the genesis data of an older data dir"
    );
    Ok(())
}
