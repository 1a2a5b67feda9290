//! Persistent states as objects: their kinds and parts, the object names shared by state files on disk and
//! S3 keys (rpc.md §4.3.2), the split-state manifest `{B}.meta.json` and the split metadata rules of §7.8.

use serde::Deserialize;
use tycho_types::models::{BlockId, ShardIdent};

/// The kind of a persistent state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StateKind {
    /// A shard state.
    Shard,
    /// A queue state.
    Queue,
}

/// Which object of a persistent state a chunk comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatePart {
    /// The whole (unsplit) state.
    Unsplit,
    /// The root of a split state.
    SplitRoot,
    /// One part of a split state, by shard prefix.
    SplitPart(u64),
}

/// The text form of a block id used in object keys and file names (§4.3.2):
/// `{wc}:{shard:016x}:{seqno}:{root_hex}:{file_hex}`.
pub fn block_key_text(block: &BlockId) -> String {
    format!(
        "{}:{:016x}:{}:{}:{}",
        block.shard.workchain(),
        block.shard.prefix(),
        block.seqno,
        hex::encode(block.root_hash.as_slice()),
        hex::encode(block.file_hash.as_slice())
    )
}

/// The object name (relative key) of a state object (§4.3.2).
pub fn state_object_name(block: &BlockId, kind: StateKind, part: StatePart) -> Option<String> {
    let b = block_key_text(block);
    Some(match (kind, part) {
        (StateKind::Queue, StatePart::Unsplit) => format!("{b}.queue"),
        (StateKind::Queue, _) => return None,
        (StateKind::Shard, StatePart::Unsplit) => format!("{b}.boc"),
        (StateKind::Shard, StatePart::SplitRoot) => format!("{b}.boc.split"),
        (StateKind::Shard, StatePart::SplitPart(prefix)) => format!("{b}_part_{prefix:016x}.boc"),
    })
}

/// The object name of a split manifest.
pub fn manifest_object_name(block: &BlockId) -> String {
    format!("{}.meta.json", block_key_text(block))
}

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

/// What a file or object name of §4.3.2 names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateObject {
    /// A state object: the block, the kind and the part.
    State(BlockId, StateKind, StatePart),
    /// The split manifest of a block.
    Manifest(BlockId),
}

/// Parses a name written by [`state_object_name`] or [`manifest_object_name`]; `None` for any other name.
pub fn parse_state_object_name(name: &str) -> Option<StateObject> {
    let block = |text: &str| crate::block_id::parse_block_id(text).ok();
    if let Some(b) = name.strip_suffix(".meta.json") {
        return Some(StateObject::Manifest(block(b)?));
    }
    if let Some(b) = name.strip_suffix(".boc.split") {
        return Some(StateObject::State(
            block(b)?,
            StateKind::Shard,
            StatePart::SplitRoot,
        ));
    }
    if let Some(b) = name.strip_suffix(".queue") {
        return Some(StateObject::State(
            block(b)?,
            StateKind::Queue,
            StatePart::Unsplit,
        ));
    }
    let b = name.strip_suffix(".boc")?;
    if let Some((b, prefix)) = b.rsplit_once("_part_") {
        if prefix.len() != 16 {
            return None;
        }
        let prefix = u64::from_str_radix(prefix, 16).ok()?;
        return Some(StateObject::State(
            block(b)?,
            StateKind::Shard,
            StatePart::SplitPart(prefix),
        ));
    }
    Some(StateObject::State(
        block(b)?,
        StateKind::Shard,
        StatePart::Unsplit,
    ))
}

#[cfg(test)]
mod tests {
    use tycho_types::prelude::HashBytes;

    use super::*;

    #[test]
    fn object_names_round_trip() {
        let block = BlockId {
            shard: ShardIdent::MASTERCHAIN,
            seqno: 7,
            root_hash: HashBytes([3; 32]),
            file_hash: HashBytes([4; 32]),
        };
        let shard_block = BlockId {
            shard: ShardIdent::new_full(0),
            ..block
        };
        for (b, kind, part) in [
            (block, StateKind::Shard, StatePart::Unsplit),
            (block, StateKind::Queue, StatePart::Unsplit),
            (shard_block, StateKind::Shard, StatePart::SplitRoot),
            (
                shard_block,
                StateKind::Shard,
                StatePart::SplitPart(0x4000000000000000),
            ),
        ] {
            let name = state_object_name(&b, kind, part).unwrap();
            assert_eq!(
                parse_state_object_name(&name),
                Some(StateObject::State(b, kind, part)),
                "{name}"
            );
        }
        assert_eq!(
            parse_state_object_name(&manifest_object_name(&shard_block)),
            Some(StateObject::Manifest(shard_block))
        );
        for other in [
            "zerostate.boc",
            ".x.boc.tmp",
            "a.queue",
            "",
            "x_part_12.boc",
        ] {
            assert_eq!(parse_state_object_name(other), None, "{other}");
        }
    }
}
