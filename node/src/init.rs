//! `regolith init`: creates the data directory, the node config and the global config from a zerostate.

use std::net::SocketAddr;
use std::path::Path;

use anyhow::{bail, Context, Result};
use regolith_formats::zerostate::{McZerostate, ShardZerostate};
use regolith_storage::Storage;

use crate::config::{DataDir, GlobalConfig, NodeConfig, ZerostateId};
use crate::files::{write_atomically, write_json, write_secret_json};

/// The blockchain public overlay id of a zerostate (rpc.md §2.8).
pub fn overlay_id(zerostate: &ZerostateId) -> [u8; 32] {
    regolith_rpc::overlay_id(&zerostate.root_hash.0, &zerostate.file_hash.0)
}

/// Reads and checks a masterchain zerostate file.
pub fn read_zerostate(path: &Path) -> Result<(McZerostate, Vec<u8>)> {
    let bytes =
        std::fs::read(path).with_context(|| format!("cannot read zerostate {}", path.display()))?;
    let zerostate = McZerostate::parse(&bytes)
        .with_context(|| format!("{} is not a zerostate", path.display()))?;
    Ok((zerostate, bytes))
}

/// Reads a shard zerostate file and checks it against its entry in the mc zerostate.
fn read_shard_zerostate(zerostate: &McZerostate, path: &Path) -> Result<ShardZerostate> {
    let bytes = std::fs::read(path)
        .with_context(|| format!("cannot read shard zerostate {}", path.display()))?;
    zerostate
        .shard_zerostate_from_file(bytes)
        .with_context(|| format!("shard zerostate {}", path.display()))
}

/// The node settings `init` takes from the command line.
#[derive(Debug, Clone, Default)]
pub struct InitOptions {
    /// `listen_address` (QUIC).
    pub listen: Option<SocketAddr>,
    /// `public_address`.
    pub public_address: Option<SocketAddr>,
    /// `metrics_address`: `Some(None)` turns the endpoint off.
    pub metrics: Option<Option<SocketAddr>>,
    /// `api_address` (the account API and `POST /v1/messages`): `Some(None)` turns it off.
    pub api: Option<Option<SocketAddr>>,
    /// Shard zerostate files; listed shards without one get the empty shard zerostate.
    pub shard_zerostates: Vec<std::path::PathBuf>,
}

impl InitOptions {
    fn apply(&self, config: &mut NodeConfig) {
        if let Some(listen) = self.listen {
            config.listen_address = listen;
        }
        if let Some(public) = self.public_address {
            config.public_address = Some(public);
        }
        if let Some(metrics) = self.metrics {
            config.metrics_address = metrics;
        }
        if let Some(api) = self.api {
            config.api_address = api;
        }
    }

    /// An option that disagrees with an existing `node.json`, named by its field.
    fn conflict(&self, config: &NodeConfig) -> Option<&'static str> {
        if self.listen.is_some_and(|a| a != config.listen_address) {
            return Some("listen_address");
        }
        if self
            .public_address
            .is_some_and(|a| Some(a) != config.public_address)
        {
            return Some("public_address");
        }
        if self.metrics.is_some_and(|m| m != config.metrics_address) {
            return Some("metrics_address");
        }
        if self.api.is_some_and(|a| a != config.api_address) {
            return Some("api_address");
        }
        None
    }
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
pub fn init(data: &DataDir, zerostate_path: &Path, options: &InitOptions) -> Result<InitReport> {
    let (zerostate, zerostate_bytes) = read_zerostate(zerostate_path)?;
    let shard_files = options
        .shard_zerostates
        .iter()
        .map(|path| read_shard_zerostate(&zerostate, path))
        .collect::<Result<Vec<_>>>()?;
    let zerostate_id = ZerostateId {
        seqno: 0,
        root_hash: zerostate.id.root_hash,
        file_hash: zerostate.id.file_hash,
    };
    let report = |created, config: &NodeConfig| -> Result<InitReport> {
        Ok(InitReport {
            zerostate_id: zerostate.id.to_string(),
            overlay_id: hex::encode(overlay_id(&zerostate_id)),
            created,
            peer_id: regolith_rpc::network::peer_id_of(&config.secret_key()?).to_string(),
            address: config.announced_address().to_string(),
        })
    };

    if data.is_initialised() {
        let global = data.load_global_config()?;
        if global.zerostate != zerostate_id {
            bail!(
                "{} is already initialised with another zerostate ({})",
                data.root.display(),
                global.zerostate.as_block_id()
            );
        }
        let config = data.load_node_config()?;
        if let Some(field) = options.conflict(&config) {
            bail!(
                "{} is already initialised with another {field}; change `{field}` in {} instead",
                data.root.display(),
                data.node_config().display()
            );
        }
        return report(false, &config);
    }

    std::fs::create_dir_all(data.states())
        .with_context(|| format!("cannot create {}", data.states().display()))?;
    let mut node_config = if data.node_config().exists() {
        data.load_node_config()?
    } else {
        let mut key = [0u8; 32];
        rand::Rng::fill(&mut rand::thread_rng(), &mut key);
        NodeConfig::new(key, &data.root)
    };
    options.apply(&mut node_config);
    node_config.validate()?;
    // Signed with created_at = now and a finite TTL, so other nodes can bootstrap from this one.
    let own_peer_info = regolith_rpc::network::sign_peer_info(
        &node_config.secret_key()?,
        node_config.announced_address(),
        node_config.peer_info_ttl,
    );

    write_atomically(
        &data.states().join(crate::boot::genesis::ZEROSTATE_FILE),
        &zerostate_bytes,
    )?;
    let storage = Storage::open(node_config.storage.clone())?;
    crate::boot::genesis::ensure(&storage, &zerostate, &zerostate_bytes, &shard_files)?;
    drop(storage);

    write_secret_json(&data.node_config(), &node_config)?;
    // The global config is written last: its presence marks a complete initialisation.
    write_json(
        &data.global_config(),
        &GlobalConfig {
            bootstrap_peers: vec![serde_json::to_value(&own_peer_info)?],
            zerostate: zerostate_id,
        },
    )?;
    report(true, &node_config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use regolith_formats::HashBytes;

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
