//! Node configuration files: `<data>/node.json` (node key and local settings) and `<data>/global.json`
//! (the global config in the Tycho node's JSON format). Both are written with temp file + fsync + rename.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use regolith_formats::{BlockId, HashBytes, ShardIdent};
use regolith_storage::StorageConfig;
use serde::{Deserialize, Serialize};

/// `<data>/node.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeConfig {
    /// The node's ed25519 secret key (hex); its public key is the node's peer id.
    pub node_secret_key: String,
    /// Block storage settings (`root_dir` is always the data directory).
    #[serde(default)]
    pub storage: StorageConfig,
    /// Internal message queue settings (queue.md §8).
    #[serde(default)]
    pub internal_queue: regolith_queue::QueueConfig,
}

/// The zerostate id as Tycho writes it in the global config.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct ZerostateId {
    /// Always 0.
    pub seqno: u32,
    /// Representation hash of the zerostate root cell.
    pub root_hash: HashBytes,
    /// BLAKE3 of the zerostate file.
    pub file_hash: HashBytes,
}

impl ZerostateId {
    /// The masterchain block id of the zerostate.
    pub fn as_block_id(&self) -> BlockId {
        BlockId {
            shard: ShardIdent::MASTERCHAIN,
            seqno: self.seqno,
            root_hash: self.root_hash,
            file_hash: self.file_hash,
        }
    }
}

/// `<data>/global.json`: bootstrap peers and the zerostate id.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GlobalConfig {
    /// Signed peer infos of bootstrap nodes (Tycho's format).
    #[serde(default)]
    pub bootstrap_peers: Vec<serde_json::Value>,
    /// The zerostate of the network.
    pub zerostate: ZerostateId,
}

/// Paths inside a data directory.
#[derive(Debug, Clone)]
pub struct DataDir {
    /// The data directory.
    pub root: PathBuf,
}

impl DataDir {
    /// A data directory at `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// `node.json`.
    pub fn node_config(&self) -> PathBuf {
        self.root.join("node.json")
    }

    /// `global.json`.
    pub fn global_config(&self) -> PathBuf {
        self.root.join("global.json")
    }

    /// `states/`.
    pub fn states(&self) -> PathBuf {
        self.root.join("states")
    }

    /// Whether the directory was initialised.
    pub fn is_initialised(&self) -> bool {
        self.node_config().exists() && self.global_config().exists()
    }

    /// Loads `node.json`, with the storage rooted at this directory.
    pub fn load_node_config(&self) -> Result<NodeConfig> {
        let path = self.node_config();
        let text = std::fs::read_to_string(&path).with_context(|| {
            format!(
                "cannot read {} (run `regolith init --zerostate FILE --data {}` first)",
                path.display(),
                self.root.display()
            )
        })?;
        let mut config: NodeConfig = serde_json::from_str(&text)
            .with_context(|| format!("invalid node config {}", path.display()))?;
        config.storage.root_dir = self.root.clone();
        Ok(config)
    }

    /// Loads `global.json`.
    pub fn load_global_config(&self) -> Result<GlobalConfig> {
        let path = self.global_config();
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        serde_json::from_str(&text)
            .with_context(|| format!("invalid global config {}", path.display()))
    }
}

/// Writes a file atomically: temp file in the same directory, fsync, rename, fsync of the directory.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let file_name = path
        .file_name()
        .with_context(|| format!("{} has no file name", path.display()))?;
    let tmp = dir.join(format!(".{}.tmp", file_name.to_string_lossy()));
    {
        let mut file = std::fs::File::create(&tmp)
            .with_context(|| format!("cannot create {}", tmp.display()))?;
        file.write_all(bytes)
            .and_then(|_| file.sync_all())
            .with_context(|| format!("cannot write {}", tmp.display()))?;
    }
    std::fs::rename(&tmp, path)
        .with_context(|| format!("cannot rename {} to {}", tmp.display(), path.display()))?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("cannot sync {}", dir.display()))?;
    Ok(())
}

/// Writes a value as pretty JSON, atomically.
pub fn write_json(path: &Path, value: &impl Serialize) -> Result<()> {
    let mut text = serde_json::to_vec_pretty(value)?;
    text.push(b'\n');
    write_atomically(path, &text)
}
