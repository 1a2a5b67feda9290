//! `regolith init`: creates the data directory, the node config and the global config from a zerostate.

use std::path::Path;

use anyhow::{bail, Context, Result};
use regolith_formats::{BlockId, HashBytes, ShardIdent};
use regolith_storage::{NewBlockMeta, Storage};
use tycho_types::boc::Boc;
use tycho_types::models::ShardStateUnsplit;

use crate::config::{write_atomically, write_json, DataDir, GlobalConfig, NodeConfig, ZerostateId};

/// The blockchain public overlay id of a zerostate (rpc.md §2.8).
pub fn overlay_id(zerostate: &ZerostateId) -> [u8; 32] {
    regolith_rpc::overlay_id(&zerostate.root_hash.0, &zerostate.file_hash.0)
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
    /// This node's peer id (hex).
    pub peer_id: String,
    /// The address this node announces.
    pub address: String,
}

/// Initialises `data` from a zerostate file; re-running with the same zerostate is a no-op.
pub fn init(data: &DataDir, zerostate_path: &Path) -> Result<InitReport> {
    let zerostate = read_zerostate(zerostate_path)?;
    let report = |created, config: &NodeConfig| -> Result<InitReport> {
        Ok(InitReport {
            zerostate_id: zerostate.id.as_block_id().to_string(),
            overlay_id: hex::encode(overlay_id(&zerostate.id)),
            created,
            peer_id: regolith_rpc::network::peer_id_of(&config.secret_key()?).to_string(),
            address: config.announced_address().to_string(),
        })
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
        return report(false, &data.load_node_config()?);
    }

    std::fs::create_dir_all(data.states())
        .with_context(|| format!("cannot create {}", data.states().display()))?;
    let node_config = if data.node_config().exists() {
        data.load_node_config()?
    } else {
        let mut key = [0u8; 32];
        rand::Rng::fill(&mut rand::thread_rng(), &mut key);
        NodeConfig::new(key, &data.root)
    };
    // Signed with created_at = now and a finite TTL, so other nodes can bootstrap from this one.
    let own_peer_info = regolith_rpc::network::sign_peer_info(
        &node_config.secret_key()?,
        node_config.announced_address(),
        node_config.peer_info_ttl,
    );

    let storage = Storage::open(node_config.storage.clone())?;
    store_zerostate(&storage, &zerostate)?;
    drop(storage);

    write_atomically(&data.states().join("zerostate.boc"), &zerostate.bytes)?;
    write_json(&data.node_config(), &node_config)?;
    // The global config is written last: its presence marks a complete initialisation.
    write_json(
        &data.global_config(),
        &GlobalConfig {
            bootstrap_peers: vec![serde_json::to_value(&own_peer_info)?],
            zerostate: zerostate.id,
        },
    )?;
    report(true, &node_config)
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
