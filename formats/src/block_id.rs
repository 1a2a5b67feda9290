//! Block id encodings: the 80-byte LE value form (bare TL `blockchain.blockId`), the 48-byte ordered key and
//! the text form `wc:prefixhex:seqno:roothex:filehex` (tycho-types' `Display`/`FromStr` of `BlockId`).

use tycho_types::models::{BlockId, ShardIdent};
use tycho_types::prelude::HashBytes;

use crate::FormatError;

/// Length of the LE value form of a block id.
pub const BLOCK_ID_LEN: usize = 80;
/// Length of a block key.
pub const BLOCK_KEY_LEN: usize = 48;

/// Encodes a block id as workchain LE ‖ prefix LE ‖ seqno LE ‖ root ‖ file (80 bytes).
pub fn encode_block_id(id: &BlockId) -> [u8; BLOCK_ID_LEN] {
    let mut out = [0u8; BLOCK_ID_LEN];
    out[0..4].copy_from_slice(&id.shard.workchain().to_le_bytes());
    out[4..12].copy_from_slice(&id.shard.prefix().to_le_bytes());
    out[12..16].copy_from_slice(&id.seqno.to_le_bytes());
    out[16..48].copy_from_slice(id.root_hash.as_slice());
    out[48..80].copy_from_slice(id.file_hash.as_slice());
    out
}

/// Decodes the 80-byte LE form; any other length or an invalid shard is an error.
pub fn decode_block_id(bytes: &[u8]) -> Result<BlockId, FormatError> {
    if bytes.len() != BLOCK_ID_LEN {
        return Err(FormatError::InvalidLength {
            what: "block id",
            expected: BLOCK_ID_LEN,
            actual: bytes.len(),
        });
    }
    let workchain = i32::from_le_bytes(bytes[0..4].try_into().unwrap());
    let prefix = u64::from_le_bytes(bytes[4..12].try_into().unwrap());
    let seqno = u32::from_le_bytes(bytes[12..16].try_into().unwrap());
    let shard = make_shard(workchain, prefix)?;
    Ok(BlockId {
        shard,
        seqno,
        root_hash: HashBytes(bytes[16..48].try_into().unwrap()),
        file_hash: HashBytes(bytes[48..80].try_into().unwrap()),
    })
}

/// Builds a shard ident, rejecting prefixes without a tag bit or workchains out of range.
pub fn make_shard(workchain: i32, prefix: u64) -> Result<ShardIdent, FormatError> {
    ShardIdent::new(workchain, prefix).ok_or_else(|| {
        FormatError::invalid(
            "shard",
            format!("{workchain}:{prefix:016x} is not a valid shard"),
        )
    })
}

/// The 48-byte block key: workchain BE ‖ prefix BE ‖ seqno BE ‖ root hash, ordered by raw bytes.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BlockKey(pub [u8; BLOCK_KEY_LEN]);

impl BlockKey {
    /// The key of a block id.
    pub fn of(id: &BlockId) -> Self {
        Self::from_parts(
            id.shard.workchain(),
            id.shard.prefix(),
            id.seqno,
            &id.root_hash,
        )
    }

    /// Builds a key from its parts.
    pub fn from_parts(workchain: i32, prefix: u64, seqno: u32, root_hash: &HashBytes) -> Self {
        let mut out = [0u8; BLOCK_KEY_LEN];
        out[0..4].copy_from_slice(&workchain.to_be_bytes());
        out[4..12].copy_from_slice(&prefix.to_be_bytes());
        out[12..16].copy_from_slice(&seqno.to_be_bytes());
        out[16..48].copy_from_slice(root_hash.as_slice());
        Self(out)
    }

    /// Decodes a key from a slice of exactly 48 bytes.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, FormatError> {
        let arr: [u8; BLOCK_KEY_LEN] =
            bytes.try_into().map_err(|_| FormatError::InvalidLength {
                what: "block key",
                expected: BLOCK_KEY_LEN,
                actual: bytes.len(),
            })?;
        Ok(Self(arr))
    }

    /// Workchain of the key.
    pub fn workchain(&self) -> i32 {
        i32::from_be_bytes(self.0[0..4].try_into().unwrap())
    }

    /// Shard prefix of the key.
    pub fn prefix(&self) -> u64 {
        u64::from_be_bytes(self.0[4..12].try_into().unwrap())
    }

    /// Seqno of the key.
    pub fn seqno(&self) -> u32 {
        u32::from_be_bytes(self.0[12..16].try_into().unwrap())
    }

    /// Root hash of the key.
    pub fn root_hash(&self) -> HashBytes {
        HashBytes(self.0[16..48].try_into().unwrap())
    }

    /// The shard of the key, if valid.
    pub fn shard(&self) -> Result<ShardIdent, FormatError> {
        make_shard(self.workchain(), self.prefix())
    }

    /// Rebuilds the full id with the given file hash.
    pub fn to_block_id(&self, file_hash: HashBytes) -> Result<BlockId, FormatError> {
        Ok(BlockId {
            shard: self.shard()?,
            seqno: self.seqno(),
            root_hash: self.root_hash(),
            file_hash,
        })
    }

    /// The next key in byte order (the key incremented as a 384-bit BE integer), `None` on overflow.
    pub fn successor(&self) -> Option<Self> {
        let mut out = self.0;
        for byte in out.iter_mut().rev() {
            let (v, carry) = byte.overflowing_add(1);
            *byte = v;
            if !carry {
                return Some(Self(out));
            }
        }
        None
    }

    /// The raw bytes.
    pub fn as_bytes(&self) -> &[u8; BLOCK_KEY_LEN] {
        &self.0
    }
}

impl std::fmt::Debug for BlockKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{:016x}:{}:{}",
            self.workchain(),
            self.prefix(),
            self.seqno(),
            self.root_hash()
        )
    }
}

/// Parses the text form `wc:prefixhex:seqno:roothex:filehex`, naming what was wrong.
pub fn parse_block_id(text: &str) -> Result<BlockId, FormatError> {
    text.trim()
        .parse::<BlockId>()
        .map_err(|e| FormatError::invalid("block id", format!("{text:?}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mc(seqno: u32) -> BlockId {
        BlockId {
            shard: ShardIdent::MASTERCHAIN,
            seqno,
            root_hash: HashBytes([1; 32]),
            file_hash: HashBytes([2; 32]),
        }
    }

    #[test]
    fn value_form_of_mc_123() {
        let bytes = encode_block_id(&mc(123));
        assert_eq!(
            &bytes[..16],
            &[0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0, 0, 0, 0, 0x80, 0x7B, 0, 0, 0]
        );
        assert_eq!(decode_block_id(&bytes).unwrap(), mc(123));
        assert!(decode_block_id(&bytes[..79]).is_err());
        let mut bad = bytes;
        bad[4..12].copy_from_slice(&0u64.to_le_bytes());
        assert!(decode_block_id(&bad).is_err());
    }

    #[test]
    fn key_order_and_successor() {
        let base = BlockKey::of(&BlockId {
            shard: ShardIdent::BASECHAIN,
            ..mc(5)
        });
        assert!(base < BlockKey::of(&mc(0)), "workchain -1 sorts after 0");
        assert!(BlockKey::of(&mc(1)) < BlockKey::of(&mc(2)));
        let k = BlockKey([0xFF; 48]);
        assert_eq!(k.successor(), None);
        let mut k2 = [0u8; 48];
        k2[47] = 0xFF;
        let mut expect = [0u8; 48];
        expect[46] = 1;
        assert_eq!(BlockKey(k2).successor(), Some(BlockKey(expect)));
        assert_eq!(base.seqno(), 5);
        assert_eq!(base.to_block_id(HashBytes([2; 32])).unwrap().seqno, 5);
    }

    #[test]
    fn text_round_trip() {
        let text = "0:8000000000000000:11:ce24c09ad0dc218c502f68c593518d3fbb05f3f475ec2483de6f5a6a556df729:5382c76da680d922c734b40d085efeefdeef8f7d0f0396ea1217acd9cc4e066d";
        let id = parse_block_id(text).unwrap();
        assert_eq!(id.to_string(), text);
        assert!(parse_block_id("0:zz:1:00:00").is_err());
    }
}
