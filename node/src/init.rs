//! `regolith init`: creates the data directory, the node config and the global config from a zerostate.

use std::path::Path;

use anyhow::{bail, Context, Result};
use regolith_formats::{BlockId, HashBytes, ShardIdent};
use regolith_storage::{NewBlockMeta, Storage};
use sha2::Digest;
use tycho_types::boc::Boc;
use tycho_types::models::ShardStateUnsplit;

use crate::config::{write_atomically, write_json, DataDir, GlobalConfig, NodeConfig, ZerostateId};

/// TL id of `tonNode.overlayIdData`-style boxed overlay id data used for the blockchain overlay.
const OVERLAY_ID_DATA_TL_ID: u32 = 0x4ec3_3e39;

/// The blockchain public overlay id of a zerostate (rpc.md §2.8).
pub fn overlay_id(zerostate: &ZerostateId) -> [u8; 32] {
    let mut hasher = sha2::Sha256::new();
    hasher.update(OVERLAY_ID_DATA_TL_ID.to_le_bytes());
    hasher.update(zerostate.root_hash.as_slice());
    hasher.update(zerostate.file_hash.as_slice());
    hasher.finalize().into()
}

/// A parsed zerostate file.
pub struct Zerostate {
    /// Its id.
    pub id: ZerostateId,
    /// Generation time.
    pub gen_utime: u32,
    /// The file bytes.
    pub bytes: Vec<u8>,
}

/// Reads and checks a masterchain zerostate file.
pub fn read_zerostate(path: &Path) -> Result<Zerostate> {
    let bytes =
        std::fs::read(path).with_context(|| format!("cannot read zerostate {}", path.display()))?;
    let root = Boc::decode(&bytes)
        .with_context(|| format!("{} is not a zerostate: not a valid BOC", path.display()))?;
    let state = root.parse::<ShardStateUnsplit>().with_context(|| {
        format!(
            "{} is not a zerostate: the root is not a shard state",
            path.display()
        )
    })?;
    if state.shard_ident != ShardIdent::MASTERCHAIN || state.seqno != 0 {
        bail!(
            "{} is not a masterchain zerostate: it is the state of {} seqno {}",
            path.display(),
            state.shard_ident,
            state.seqno
        );
    }
    Ok(Zerostate {
        id: ZerostateId {
            seqno: 0,
            root_hash: *root.repr_hash(),
            file_hash: HashBytes(*blake3::hash(&bytes).as_bytes()),
        },
        gen_utime: state.gen_utime,
        bytes,
    })
}

/// Result of `init`.
#[derive(serde::Serialize)]
pub struct InitReport {
    /// The zerostate id in text form.
    pub zerostate_id: String,
    /// The overlay id (hex).
    pub overlay_id: String,
    /// Whether the data dir was created now (false: it already held this zerostate).
    pub created: bool,
}

/// Initialises `data` from a zerostate file; re-running with the same zerostate is a no-op.
pub fn init(data: &DataDir, zerostate_path: &Path) -> Result<InitReport> {
    let zerostate = read_zerostate(zerostate_path)?;
    let report = |created| InitReport {
        zerostate_id: zerostate.id.as_block_id().to_string(),
        overlay_id: hex::encode(overlay_id(&zerostate.id)),
        created,
    };

    if data.is_initialised() {
        let global = data.load_global_config()?;
        if global.zerostate != zerostate.id {
            bail!(
                "{} is already initialised with another zerostate ({})",
                data.root.display(),
                global.zerostate.as_block_id()
            );
        }
        return Ok(report(false));
    }

    std::fs::create_dir_all(data.states())
        .with_context(|| format!("cannot create {}", data.states().display()))?;
    let node_config = if data.node_config().exists() {
        data.load_node_config()?
    } else {
        let mut key = [0u8; 32];
        rand::Rng::fill(&mut rand::thread_rng(), &mut key);
        NodeConfig {
            node_secret_key: hex::encode(key),
            storage: regolith_storage::StorageConfig::new(&data.root),
            internal_queue: Default::default(),
        }
    };

    let storage = Storage::open(node_config.storage.clone())?;
    store_zerostate(&storage, &zerostate)?;
    drop(storage);

    write_atomically(&data.states().join("zerostate.boc"), &zerostate.bytes)?;
    write_json(&data.node_config(), &node_config)?;
    // The global config is written last: its presence marks a complete initialisation.
    write_json(
        &data.global_config(),
        &GlobalConfig {
            bootstrap_peers: Vec::new(),
            zerostate: zerostate.id,
        },
    )?;
    Ok(report(true))
}

/// Stores the zerostate handle and ids in block storage.
pub fn store_zerostate(storage: &Storage, zerostate: &Zerostate) -> Result<()> {
    let id: BlockId = zerostate.id.as_block_id();
    let (handle, _) = storage
        .handles()
        .create_or_load_handle(&id, NewBlockMeta::zero_state(zerostate.gen_utime, true))?;
    storage.handles().set_is_zerostate(&handle)?;
    let state = storage.node_state();
    state.store_zerostate_id(&id)?;
    state.store_init_mc_block_id(&id)?;
    if state.load_last_mc_block_id()?.is_none() {
        state.store_last_mc_block_id(&id)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlay_id_vector() {
        let id = ZerostateId {
            seqno: 0,
            root_hash: HashBytes::ZERO,
            file_hash: HashBytes::ZERO,
        };
        assert_eq!(
            hex::encode(overlay_id(&id)),
            "9eab95f1579164f28dd0048b2d8da9c5c49adfc339bb823bd9c66b1b422a77cf"
        );
    }
}
