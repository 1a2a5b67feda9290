//! A block as the command line names it: a full id (`wc:prefix:seqno:root:file`), a short id
//! (`wc:prefix:seqno`) resolved among the stored blocks, or a masterchain seqno. Masterchain ids start with
//! `-1:`, so every argument of this type accepts values that begin with a hyphen.

use std::str::FromStr;

use anyhow::{bail, Result};
use regolith_formats::block_id::parse_block_id;
use regolith_formats::{BlockId, ShardIdent};
use regolith_storage::Storage;

/// A block named on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockRef {
    /// A full id.
    Full(BlockId),
    /// A shard and a seqno.
    Short {
        /// The shard.
        shard: ShardIdent,
        /// The seqno.
        seqno: u32,
    },
    /// A masterchain seqno.
    McSeqno(u32),
}

impl FromStr for BlockRef {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if let Ok(seqno) = text.parse::<u32>() {
            return Ok(Self::McSeqno(seqno));
        }
        let parts: Vec<&str> = text.split(':').collect();
        match parts[..] {
            [_, _, _, _, _] => parse_block_id(text)
                .map(Self::Full)
                .map_err(|e| e.to_string()),
            [wc, prefix, seqno] => {
                let wc: i32 = wc
                    .parse()
                    .map_err(|_| format!("bad workchain {wc:?} in {text:?}"))?;
                let prefix = u64::from_str_radix(prefix, 16)
                    .map_err(|_| format!("bad shard prefix {prefix:?} in {text:?}"))?;
                let shard = ShardIdent::new(wc, prefix)
                    .ok_or_else(|| format!("{text:?} names an invalid shard"))?;
                let seqno: u32 = seqno
                    .parse()
                    .map_err(|_| format!("bad seqno {seqno:?} in {text:?}"))?;
                Ok(Self::Short { shard, seqno })
            }
            _ => Err(format!(
                "{text:?} is not a block id (wc:prefix:seqno:root:file or wc:prefix:seqno) or an mc seqno"
            )),
        }
    }
}

/// A full block id on the command line (`wc:prefix:seqno:root:file`, masterchain `-1:…` included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FullBlockId(pub BlockId);

impl FromStr for FullBlockId {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        parse_block_id(text).map(Self).map_err(|e| e.to_string())
    }
}

impl std::fmt::Display for BlockRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Full(id) => write!(f, "{id}"),
            Self::Short { shard, seqno } => write!(f, "{shard}:{seqno}"),
            Self::McSeqno(seqno) => write!(f, "mc seqno {seqno}"),
        }
    }
}

impl BlockRef {
    /// The full id: as given, or the one stored block with that shard and seqno.
    pub fn resolve(&self, storage: &Storage) -> Result<BlockId> {
        let (shard, seqno) = match *self {
            Self::Full(id) => return Ok(id),
            Self::Short { shard, seqno } => (shard, seqno),
            Self::McSeqno(seqno) => (ShardIdent::MASTERCHAIN, seqno),
        };
        match storage.handles().find_block_ids(&shard, seqno)?.as_slice() {
            [id] => Ok(*id),
            [] => bail!(
                "block {shard}:{seqno} is not stored; give its full id (wc:prefix:seqno:root:file)"
            ),
            _ => bail!("several blocks {shard}:{seqno} are stored (a fork); give the full id"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_form() {
        let full = "-1:8000000000000000:42:ce24c09ad0dc218c502f68c593518d3fbb05f3f475ec2483de6f5a6a556df729:5382c76da680d922c734b40d085efeefdeef8f7d0f0396ea1217acd9cc4e066d";
        let BlockRef::Full(id) = full.parse().unwrap() else {
            panic!("a full id")
        };
        assert_eq!(id.shard, ShardIdent::MASTERCHAIN);
        assert_eq!(id.seqno, 42);
        assert_eq!(
            "-1:8000000000000000:42".parse::<BlockRef>(),
            Ok(BlockRef::Short {
                shard: ShardIdent::MASTERCHAIN,
                seqno: 42
            })
        );
        assert_eq!("42".parse::<BlockRef>(), Ok(BlockRef::McSeqno(42)));
        for bad in [
            "",
            "-1",
            "x:8000000000000000:1",
            "0:zz:1",
            "0:8000000000000000:-3",
            "1:2",
        ] {
            assert!(bad.parse::<BlockRef>().is_err(), "{bad}");
        }
    }
}
