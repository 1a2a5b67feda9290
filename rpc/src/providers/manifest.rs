//! The split-state manifest `{B}.meta.json` (§4.3.2) and the split metadata rules of §7.8.

use serde::Deserialize;
use tycho_types::models::{BlockId, ShardIdent};

use crate::providers::StateKind;

/// `{"version":1,"split_depth":N,"parts":["<16 hex>",…]}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SplitManifest {
    /// Must be 1.
    pub version: u32,
    /// 1..=6.
    pub split_depth: u8,
    /// Part prefixes as 16 hex digits.
    pub parts: Vec<String>,
}

impl SplitManifest {
    /// Parses and validates a manifest for `block`, returning the part prefixes in order.
    pub fn parse(bytes: &[u8], block: &BlockId) -> Result<(u8, Vec<u64>), String> {
        let manifest: SplitManifest =
            serde_json::from_slice(bytes).map_err(|e| format!("not a manifest: {e}"))?;
        if manifest.version != 1 {
            return Err(format!("unsupported version {}", manifest.version));
        }
        let mut prefixes = Vec::with_capacity(manifest.parts.len());
        for part in &manifest.parts {
            if part.len() != 16 || !part.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(format!("part prefix {part:?} is not 16 hex digits"));
            }
            let prefix = u64::from_str_radix(part, 16).map_err(|e| e.to_string())?;
            prefixes.push(prefix);
        }
        validate_split_parts(block, StateKind::Shard, manifest.split_depth, &prefixes)?;
        Ok((manifest.split_depth, prefixes))
    }
}

/// The rules of §7.8: shard kind on a non-masterchain block, `1 ≤ split_depth ≤ 6`, at most
/// 2^split_depth parts, each a valid prefix of the right depth descending from the block's shard, no
/// duplicates.
pub fn validate_split_parts(
    block: &BlockId,
    kind: StateKind,
    split_depth: u8,
    prefixes: &[u64],
) -> Result<(), String> {
    if kind != StateKind::Shard {
        return Err("only shard states are split".into());
    }
    if block.shard.is_masterchain() {
        return Err("masterchain states are never split".into());
    }
    if !(1..=6).contains(&split_depth) {
        return Err(format!("split depth {split_depth} is out of 1..=6"));
    }
    if prefixes.len() > 1usize << split_depth {
        return Err(format!("{} parts exceed 2^{split_depth}", prefixes.len()));
    }
    let depth = block.shard.prefix_len() + u16::from(split_depth);
    let mut seen = std::collections::HashSet::new();
    for &prefix in prefixes {
        let shard = ShardIdent::new(block.shard.workchain(), prefix)
            .filter(|s| prefix != 0 && s.prefix_len() == depth)
            .ok_or_else(|| format!("part prefix {prefix:016x} is invalid at depth {depth}"))?;
        if !block.shard.is_ancestor_of(&shard) {
            return Err(format!(
                "part {prefix:016x} does not descend from {}",
                block.shard
            ));
        }
        if !seen.insert(prefix) {
            return Err(format!("part {prefix:016x} appears twice"));
        }
    }
    Ok(())
}
