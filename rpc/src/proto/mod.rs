//! The `blockchain.*` TL protocol (rpc.md §2): constructor ids, answer types, request functions, the
//! `overlay.response` wrapper, the bare ping/pong, the broadcast body and the overlay id (§2.8).
//!
//! Every value is encoded byte-for-byte as the reference does, including the traps of §2.5: the 4-byte
//! `chunk_size` fields, the boxed `blockData`/`partInfo` inside other values and the always-bare block id.

pub mod codec;
#[cfg(test)]
mod tests;

use bytes::Bytes;
use sha2::Digest;
use tl_proto::{TlError, TlPacket, TlRead, TlResult, TlWrite};
use tycho_types::models::BlockId;

pub use codec::BLOCK_ID_WIRE_LEN;

/// The schema text the ids come from (a documentation artefact; tests recompute ids from its lines).
pub const SCHEMA: &str = include_str!("proto.tl");

/// Constructor ids (§2.2–2.4).
pub mod ids {
    /// `overlay.prefix`, added and stripped by tycho-network.
    pub const OVERLAY_PREFIX: u32 = 0x5ff1d768;
    /// `overlay.ping`.
    pub const PING: u32 = super::Ping::TL_ID;
    /// `overlay.pong`.
    pub const PONG: u32 = 0x67700804;
    /// `overlay.response.ok`.
    pub const RESPONSE_OK: u32 = 0xcc3f9b07;
    /// `overlay.response.err`.
    pub const RESPONSE_ERR: u32 = 0x34f19def;
    /// `overlay.broadcastPrefix`.
    pub const BROADCAST_PREFIX: u32 = 0x70910e1f;
    /// `blockchain.overlayIdData`.
    pub const OVERLAY_ID_DATA: u32 = 0x4ec33e39;
    /// `blockchain.keyBlockIds`.
    pub const KEY_BLOCK_IDS: u32 = 0x338aa3fc;
    /// `blockchain.blockFull.found`.
    pub const BLOCK_FULL_FOUND: u32 = 0xcd0fcf0a;
    /// `blockchain.blockFull.notFound`.
    pub const BLOCK_FULL_NOT_FOUND: u32 = 0xcc093d98;
    /// `blockchain.blockData`.
    pub const BLOCK_DATA: u32 = 0xc0e78f5b;
    /// `blockchain.keyBlockProof.found`.
    pub const KEY_BLOCK_PROOF_FOUND: u32 = 0xb6e6e4e8;
    /// `blockchain.keyBlockProof.notFound`.
    pub const KEY_BLOCK_PROOF_NOT_FOUND: u32 = 0x7c9e7346;
    /// `blockchain.zerostateProof.found`.
    pub const ZEROSTATE_PROOF_FOUND: u32 = 0x233a0cbb;
    /// `blockchain.zerostateProof.notFound`.
    pub const ZEROSTATE_PROOF_NOT_FOUND: u32 = 0xc8524f22;
    /// `blockchain.archiveInfo.found`.
    pub const ARCHIVE_INFO_FOUND: u32 = 0xcb32f986;
    /// `blockchain.archiveInfo.tooNew`.
    pub const ARCHIVE_INFO_TOO_NEW: u32 = 0xc57c0ee6;
    /// `blockchain.archiveInfo.notFound`.
    pub const ARCHIVE_INFO_NOT_FOUND: u32 = 0xed05f5cd;
    /// `blockchain.persistentStatePartInfo`.
    pub const PERSISTENT_STATE_PART_INFO: u32 = 0xd4eccf17;
    /// `blockchain.persistentStateInfo.found`.
    pub const PERSISTENT_STATE_INFO_FOUND: u32 = 0x9f5de39b;
    /// `blockchain.persistentStateInfo.foundWithParts`.
    pub const PERSISTENT_STATE_INFO_FOUND_WITH_PARTS: u32 = 0xb06ee5d4;
    /// `blockchain.persistentStateInfo.notFound`.
    pub const PERSISTENT_STATE_INFO_NOT_FOUND: u32 = 0x33cf6999;
    /// `blockchain.data`.
    pub const DATA: u32 = 0x921c0ea3;
    /// `blockchain.broadcast.message`.
    pub const BROADCAST_MESSAGE: u32 = 0xe74485b6;
    /// `regolith.nextBlock` (a regolith extension).
    pub const NEXT_BLOCK: u32 = super::NextBlock::TL_ID;
    /// `regolith.nextBlocks` (a regolith extension).
    pub const NEXT_BLOCKS: u32 = super::NextBlocks::TL_ID;

    /// `blockchain.getNextKeyBlockIds`.
    pub const GET_NEXT_KEY_BLOCK_IDS: u32 = super::rpc::GetNextKeyBlockIds::TL_ID;
    /// `blockchain.getBlockFull`.
    pub const GET_BLOCK_FULL: u32 = super::rpc::GetBlockFull::TL_ID;
    /// `blockchain.getNextBlockFull`.
    pub const GET_NEXT_BLOCK_FULL: u32 = super::rpc::GetNextBlockFull::TL_ID;
    /// `blockchain.getBlockDataChunk`.
    pub const GET_BLOCK_DATA_CHUNK: u32 = super::rpc::GetBlockDataChunk::TL_ID;
    /// `blockchain.getKeyBlockProof`.
    pub const GET_KEY_BLOCK_PROOF: u32 = super::rpc::GetKeyBlockProof::TL_ID;
    /// `blockchain.getZerostateProof`.
    pub const GET_ZEROSTATE_PROOF: u32 = super::rpc::GetZerostateProof::TL_ID;
    /// `blockchain.getArchiveInfo`.
    pub const GET_ARCHIVE_INFO: u32 = super::rpc::GetArchiveInfo::TL_ID;
    /// `blockchain.getArchiveChunk`.
    pub const GET_ARCHIVE_CHUNK: u32 = super::rpc::GetArchiveChunk::TL_ID;
    /// `blockchain.getPersistentShardStateInfo`.
    pub const GET_PERSISTENT_SHARD_STATE_INFO: u32 = super::rpc::GetPersistentShardStateInfo::TL_ID;
    /// `blockchain.getPersistentQueueStateInfo`.
    pub const GET_PERSISTENT_QUEUE_STATE_INFO: u32 = super::rpc::GetPersistentQueueStateInfo::TL_ID;
    /// `blockchain.getPersistentShardStateChunk`.
    pub const GET_PERSISTENT_SHARD_STATE_CHUNK: u32 =
        super::rpc::GetPersistentShardStateChunk::TL_ID;
    /// `blockchain.getPersistentShardStateRootChunk`.
    pub const GET_PERSISTENT_SHARD_STATE_ROOT_CHUNK: u32 =
        super::rpc::GetPersistentShardStateRootChunk::TL_ID;
    /// `blockchain.getPersistentShardStatePartChunk`.
    pub const GET_PERSISTENT_SHARD_STATE_PART_CHUNK: u32 =
        super::rpc::GetPersistentShardStatePartChunk::TL_ID;
    /// `blockchain.getPersistentQueueStateChunk`.
    pub const GET_PERSISTENT_QUEUE_STATE_CHUNK: u32 =
        super::rpc::GetPersistentQueueStateChunk::TL_ID;
    /// `regolith.getNextBlocksFull` (a regolith extension).
    pub const GET_NEXT_BLOCKS_FULL: u32 = super::rpc::GetNextBlocksFull::TL_ID;
}

/// The fixed block-data chunk size (§2.7): 1 MiB.
pub const BLOCK_CHUNK_SIZE: u32 = 1 << 20;

/// The blockchain public overlay id of a zerostate (§2.8): SHA-256 of the boxed `overlayIdData`.
pub fn overlay_id(zerostate_root_hash: &[u8; 32], zerostate_file_hash: &[u8; 32]) -> [u8; 32] {
    let data = tl_proto::serialize(OverlayIdData {
        zerostate_root_hash: *zerostate_root_hash,
        zerostate_file_hash: *zerostate_file_hash,
    });
    sha2::Sha256::digest(&data).into()
}

/// `blockchain.overlayIdData`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, TlRead, TlWrite)]
#[tl(boxed, id = 0x4ec33e39)]
pub struct OverlayIdData {
    /// Representation hash of the zerostate root.
    pub zerostate_root_hash: [u8; 32],
    /// File hash of the zerostate.
    pub zerostate_file_hash: [u8; 32],
}

/// `overlay.ping`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, TlRead, TlWrite)]
#[tl(boxed, id = 0x6d81c833)]
pub struct Ping;

/// `overlay.pong`, sent bare (not inside `overlay.response`, §2.2 item 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, TlRead, TlWrite)]
#[tl(boxed, id = 0x67700804)]
pub struct Pong;

/// `overlay.response.ok ‖ value` or `overlay.response.err ‖ code`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OverlayResponse<T> {
    /// A value.
    Ok(T),
    /// A processing failure (§2.6).
    Err(u32),
}

impl<T: TlWrite<Repr = tl_proto::Boxed>> TlWrite for OverlayResponse<T> {
    type Repr = tl_proto::Boxed;

    fn max_size_hint(&self) -> usize {
        4 + match self {
            Self::Ok(value) => value.max_size_hint(),
            Self::Err(_) => 4,
        }
    }

    fn write_to<P: TlPacket>(&self, packet: &mut P) {
        match self {
            Self::Ok(value) => {
                packet.write_u32(ids::RESPONSE_OK);
                value.write_to(packet);
            }
            Self::Err(code) => {
                packet.write_u32(ids::RESPONSE_ERR);
                packet.write_u32(*code);
            }
        }
    }
}

impl<'a, T: TlRead<'a, Repr = tl_proto::Boxed>> TlRead<'a> for OverlayResponse<T> {
    type Repr = tl_proto::Boxed;

    fn read_from(packet: &mut &'a [u8]) -> TlResult<Self> {
        match u32::read_from(packet)? {
            ids::RESPONSE_OK => T::read_from(packet).map(Self::Ok),
            ids::RESPONSE_ERR => u32::read_from(packet).map(Self::Err),
            _ => Err(TlError::UnknownConstructor),
        }
    }
}

/// `blockchain.keyBlockIds`.
#[derive(Debug, Clone, PartialEq, Eq, TlRead, TlWrite)]
#[tl(boxed, id = 0x338aa3fc)]
pub struct KeyBlockIds {
    /// Bare block ids.
    #[tl(with = "codec::block_id_vec")]
    pub block_ids: Vec<BlockId>,
    /// Whether the known chain ends here.
    pub incomplete: bool,
}

/// `blockchain.blockData`: the first chunk of the compressed block and the sizes.
#[derive(Debug, Clone, PartialEq, Eq, TlRead, TlWrite)]
#[tl(boxed, id = 0xc0e78f5b)]
pub struct BlockData {
    /// The first chunk.
    pub data: Bytes,
    /// Size of the whole compressed blob (NZ).
    #[tl(with = "codec::nz_u32")]
    pub size: u32,
    /// Chunk size (NZ).
    #[tl(with = "codec::nz_u32")]
    pub chunk_size: u32,
}

/// `blockchain.BlockFull`.
#[derive(Debug, Clone, PartialEq, Eq, TlRead, TlWrite)]
#[tl(boxed)]
pub enum BlockFull {
    /// `blockchain.blockFull.found`.
    #[tl(id = 0xcd0fcf0a)]
    Found {
        /// Bare block id.
        #[tl(with = "codec::block_id")]
        block_id: BlockId,
        /// Boxed block data (trap 2).
        block: BlockData,
        /// Raw proof.
        proof: Bytes,
        /// Raw queue diff.
        queue_diff: Bytes,
    },
    /// `blockchain.blockFull.notFound`.
    #[tl(id = 0xcc093d98)]
    NotFound,
}

/// `blockchain.KeyBlockProof`.
#[derive(Debug, Clone, PartialEq, Eq, TlRead, TlWrite)]
#[tl(boxed)]
pub enum KeyBlockProof {
    /// `blockchain.keyBlockProof.found`.
    #[tl(id = 0xb6e6e4e8)]
    Found {
        /// Raw proof.
        proof: Bytes,
    },
    /// `blockchain.keyBlockProof.notFound`.
    #[tl(id = 0x7c9e7346)]
    NotFound,
}

/// `blockchain.ZerostateProof`.
#[derive(Debug, Clone, PartialEq, Eq, TlRead, TlWrite)]
#[tl(boxed)]
pub enum ZerostateProof {
    /// `blockchain.zerostateProof.found`.
    #[tl(id = 0x233a0cbb)]
    Found {
        /// Raw proof.
        proof: Bytes,
    },
    /// `blockchain.zerostateProof.notFound`.
    #[tl(id = 0xc8524f22)]
    NotFound,
}

/// `blockchain.ArchiveInfo`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, TlRead, TlWrite)]
#[tl(boxed)]
pub enum ArchiveInfo {
    /// `blockchain.archiveInfo.found`; `chunk_size` is 4 bytes on the wire (trap 1).
    #[tl(id = 0xcb32f986)]
    Found {
        /// Archive id.
        id: u64,
        /// Compressed size (NZ).
        #[tl(with = "codec::nz_u64")]
        size: u64,
        /// Chunk size (NZ, 4 bytes).
        #[tl(with = "codec::nz_u32")]
        chunk_size: u32,
    },
    /// `blockchain.archiveInfo.tooNew`.
    #[tl(id = 0xc57c0ee6)]
    TooNew,
    /// `blockchain.archiveInfo.notFound`.
    #[tl(id = 0xed05f5cd)]
    NotFound,
}

/// `blockchain.persistentStatePartInfo` (always boxed, trap 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, TlRead, TlWrite)]
#[tl(boxed, id = 0xd4eccf17)]
pub struct PersistentStatePartInfo {
    /// Shard prefix of the part.
    pub prefix: u64,
    /// Compressed size (NZ).
    #[tl(with = "codec::nz_u64")]
    pub size: u64,
}

/// `blockchain.PersistentStateInfo`.
#[derive(Debug, Clone, PartialEq, Eq, TlRead, TlWrite)]
#[tl(boxed)]
pub enum PersistentStateInfo {
    /// `blockchain.persistentStateInfo.found`; `chunk_size` is 4 bytes (trap 1).
    #[tl(id = 0x9f5de39b)]
    Found {
        /// Compressed size (NZ).
        #[tl(with = "codec::nz_u64")]
        size: u64,
        /// Chunk size (NZ, 4 bytes).
        #[tl(with = "codec::nz_u32")]
        chunk_size: u32,
    },
    /// `blockchain.persistentStateInfo.foundWithParts`.
    #[tl(id = 0xb06ee5d4)]
    FoundWithParts {
        /// Compressed size of the root (NZ).
        #[tl(with = "codec::nz_u64")]
        size: u64,
        /// Chunk size (NZ, 4 bytes).
        #[tl(with = "codec::nz_u32")]
        chunk_size: u32,
        /// Split depth (NZ).
        #[tl(with = "codec::nz_u32")]
        split_depth: u32,
        /// At most 64 boxed parts.
        #[tl(with = "codec::part_vec")]
        parts: Vec<PersistentStatePartInfo>,
    },
    /// `blockchain.persistentStateInfo.notFound`.
    #[tl(id = 0x33cf6999)]
    NotFound,
}

/// `blockchain.data`.
#[derive(Debug, Clone, PartialEq, Eq, TlRead, TlWrite)]
#[tl(boxed, id = 0x921c0ea3)]
pub struct Data {
    /// The chunk.
    pub data: Bytes,
}

/// `blockchain.broadcast.message`.
#[derive(Debug, Clone, PartialEq, Eq, TlRead, TlWrite)]
#[tl(boxed, id = 0xe74485b6)]
pub struct MessageBroadcast {
    /// The external message BOC.
    pub data: Bytes,
}

/// `regolith.nextBlock`: one block of a batch, its whole compressed data in the answer.
#[derive(Debug, Clone, PartialEq, Eq, TlRead, TlWrite)]
#[tl(boxed, id = 0x7af79157)]
pub struct NextBlock {
    /// Bare block id.
    #[tl(with = "codec::block_id")]
    pub block_id: BlockId,
    /// The whole compressed block blob.
    pub data: Bytes,
    /// Raw proof.
    pub proof: Bytes,
    /// Raw queue diff.
    pub queue_diff: Bytes,
}

/// `regolith.nextBlocks`: mc blocks in order after the asked one, each followed by the shard blocks it is
/// the first to reference (as many as fit); empty when the server has nothing it can batch.
#[derive(Debug, Clone, PartialEq, Eq, TlRead, TlWrite)]
#[tl(boxed, id = 0x9bf7fa6a)]
pub struct NextBlocks {
    /// At most [`codec::next_block_vec::MAX_ENTRIES`] boxed entries.
    #[tl(with = "codec::next_block_vec")]
    pub blocks: Vec<NextBlock>,
}

/// The most mc blocks one `regolith.nextBlocks` answer carries.
pub const MAX_BATCH_MC_BLOCKS: u32 = 16;
/// The most shard blocks one mc block of a batch brings along.
pub const MAX_BATCH_SHARD_BLOCKS: usize = 64;
/// The most bytes of one `regolith.nextBlocks` answer (4 MiB; the frame limit may lower it).
pub const MAX_BATCH_BYTES: u32 = 4 << 20;

/// The body of a broadcast overlay message (§2.2 item 2): `broadcastPrefix ‖ broadcast.message`.
pub fn broadcast_body(message: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(12 + message.len());
    out.extend_from_slice(&ids::BROADCAST_PREFIX.to_le_bytes());
    MessageBroadcast {
        data: Bytes::copy_from_slice(message),
    }
    .write_to(&mut out);
    Bytes::from(out)
}

/// Request functions (§2.4).
pub mod rpc {
    use super::*;

    /// `blockchain.getNextKeyBlockIds`.
    #[derive(Debug, Clone, PartialEq, Eq, TlRead, TlWrite)]
    #[tl(boxed, id = 0x5b17ca62)]
    pub struct GetNextKeyBlockIds {
        /// The block to start from.
        #[tl(with = "codec::block_id")]
        pub block_id: BlockId,
        /// The most ids wanted (schema name `count`).
        pub max_size: u32,
    }

    /// `blockchain.getBlockFull`.
    #[derive(Debug, Clone, PartialEq, Eq, TlRead, TlWrite)]
    #[tl(boxed, id = 0x331be15f)]
    pub struct GetBlockFull {
        /// The block.
        #[tl(with = "codec::block_id")]
        pub block_id: BlockId,
    }

    /// `blockchain.getNextBlockFull`.
    #[derive(Debug, Clone, PartialEq, Eq, TlRead, TlWrite)]
    #[tl(boxed, id = 0xc34ea56d)]
    pub struct GetNextBlockFull {
        /// The previous block.
        #[tl(with = "codec::block_id")]
        pub prev_block_id: BlockId,
    }

    /// `blockchain.getBlockDataChunk`; the offset is 4 bytes.
    #[derive(Debug, Clone, PartialEq, Eq, TlRead, TlWrite)]
    #[tl(boxed, id = 0xaa265efe)]
    pub struct GetBlockDataChunk {
        /// The block.
        #[tl(with = "codec::block_id")]
        pub block_id: BlockId,
        /// Offset into the compressed blob.
        pub offset: u32,
    }

    /// `blockchain.getKeyBlockProof`.
    #[derive(Debug, Clone, PartialEq, Eq, TlRead, TlWrite)]
    #[tl(boxed, id = 0x28ea8f3b)]
    pub struct GetKeyBlockProof {
        /// The key block.
        #[tl(with = "codec::block_id")]
        pub block_id: BlockId,
    }

    /// `blockchain.getZerostateProof`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, TlRead, TlWrite)]
    #[tl(boxed, id = 0xf326a06b)]
    pub struct GetZerostateProof;

    /// `blockchain.getArchiveInfo`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, TlRead, TlWrite)]
    #[tl(boxed, id = 0xa4856ada)]
    pub struct GetArchiveInfo {
        /// An mc seqno the archive must hold.
        pub mc_seqno: u32,
    }

    /// `blockchain.getArchiveChunk`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, TlRead, TlWrite)]
    #[tl(boxed, id = 0x6f791e27)]
    pub struct GetArchiveChunk {
        /// Archive id (64 bits on the wire).
        pub archive_id: u64,
        /// Offset into the compressed archive.
        pub offset: u64,
    }

    /// `blockchain.getPersistentShardStateInfo`.
    #[derive(Debug, Clone, PartialEq, Eq, TlRead, TlWrite)]
    #[tl(boxed, id = 0x398752be)]
    pub struct GetPersistentShardStateInfo {
        /// The block of the state.
        #[tl(with = "codec::block_id")]
        pub block_id: BlockId,
    }

    /// `blockchain.getPersistentQueueStateInfo`.
    #[derive(Debug, Clone, PartialEq, Eq, TlRead, TlWrite)]
    #[tl(boxed, id = 0xe36180cc)]
    pub struct GetPersistentQueueStateInfo {
        /// The block of the state.
        #[tl(with = "codec::block_id")]
        pub block_id: BlockId,
    }

    /// `blockchain.getPersistentShardStateChunk`.
    #[derive(Debug, Clone, PartialEq, Eq, TlRead, TlWrite)]
    #[tl(boxed, id = 0x9f85ddda)]
    pub struct GetPersistentShardStateChunk {
        /// The block of the state.
        #[tl(with = "codec::block_id")]
        pub block_id: BlockId,
        /// Offset.
        pub offset: u64,
    }

    /// `blockchain.getPersistentShardStateRootChunk`.
    #[derive(Debug, Clone, PartialEq, Eq, TlRead, TlWrite)]
    #[tl(boxed, id = 0x2e4301fe)]
    pub struct GetPersistentShardStateRootChunk {
        /// The block of the state.
        #[tl(with = "codec::block_id")]
        pub block_id: BlockId,
        /// Offset.
        pub offset: u64,
    }

    /// `blockchain.getPersistentShardStatePartChunk`.
    #[derive(Debug, Clone, PartialEq, Eq, TlRead, TlWrite)]
    #[tl(boxed, id = 0x65a1bf0b)]
    pub struct GetPersistentShardStatePartChunk {
        /// The block of the state.
        #[tl(with = "codec::block_id")]
        pub block_id: BlockId,
        /// Shard prefix of the part.
        pub prefix: u64,
        /// Offset.
        pub offset: u64,
    }

    /// `blockchain.getPersistentQueueStateChunk`.
    #[derive(Debug, Clone, PartialEq, Eq, TlRead, TlWrite)]
    #[tl(boxed, id = 0x26f5620a)]
    pub struct GetPersistentQueueStateChunk {
        /// The block of the state.
        #[tl(with = "codec::block_id")]
        pub block_id: BlockId,
        /// Offset.
        pub offset: u64,
    }

    /// `regolith.getNextBlocksFull` (a regolith extension): up to `max_mc_blocks` mc blocks after
    /// `prev_block_id` with their shard blocks, in at most `max_bytes`.
    #[derive(Debug, Clone, PartialEq, Eq, TlRead, TlWrite)]
    #[tl(boxed, id = 0x5cd74557)]
    pub struct GetNextBlocksFull {
        /// The last mc block the asker has.
        #[tl(with = "codec::block_id")]
        pub prev_block_id: BlockId,
        /// The most mc blocks wanted (the server caps it at [`super::MAX_BATCH_MC_BLOCKS`]).
        pub max_mc_blocks: u32,
        /// The most bytes wanted (the server caps it at [`super::MAX_BATCH_BYTES`] and its frame).
        pub max_bytes: u32,
    }
}

/// Declares the request methods once: for each, its variant name, its request type (whose boxed TL id is
/// the method's id), its metrics label and its §6.2 rate-limit class. [`RpcRequest`], [`Method`] with
/// `from_id`, `name`, `is_heavy` and [`RpcRequest::decode`] all follow from this one table.
macro_rules! rpc_methods {
    ($($(#[$doc:meta])* $variant:ident($request:ty) = $name:literal, $class:ident;)*) => {
        /// A decoded request body (dispatch on the first u32, §3.1).
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum RpcRequest {
            $($(#[$doc])* $variant($request),)*
        }

        /// The request methods, for metrics labels and rate-limit classes.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Method {
            $($(#[$doc])* $variant,)*
        }

        impl Method {
            /// Every method, in declaration order.
            pub const ALL: &'static [Method] = &[$(Self::$variant,)*];

            /// The method a constructor id names, if any.
            pub fn from_id(id: u32) -> Option<Self> {
                $(if id == <$request>::TL_ID {
                    return Some(Self::$variant);
                })*
                None
            }

            /// The boxed TL id of the method's request.
            pub fn id(self) -> u32 {
                match self {
                    $(Self::$variant => <$request>::TL_ID,)*
                }
            }

            /// A stable label for metrics.
            pub fn name(self) -> &'static str {
                match self {
                    $(Self::$variant => $name,)*
                }
            }

            /// Whether the §6.2 policy charges the method to the heavy class (otherwise light).
            pub fn is_heavy(self) -> bool {
                match self {
                    $(Self::$variant => rpc_methods!(@heavy $class),)*
                }
            }
        }

        impl RpcRequest {
            /// Decodes a body; trailing bytes are accepted (§2.1), anything undecodable is an error.
            pub fn decode(body: &[u8]) -> TlResult<Self> {
                let method = Method::of_body(body).ok_or(TlError::UnknownConstructor)?;
                let mut packet = body;
                Ok(match method {
                    $(Method::$variant => Self::$variant(<$request>::read_from(&mut packet)?),)*
                })
            }

            /// The method of the request.
            pub fn method(&self) -> Method {
                match self {
                    $(Self::$variant(_) => Method::$variant,)*
                }
            }

            /// The request's boxed TL encoding (every request field has a fixed size, so it is canonical).
            pub fn encode(&self) -> Vec<u8> {
                match self {
                    $(Self::$variant(request) => tl_proto::serialize(request),)*
                }
            }
        }
    };
    (@heavy heavy) => { true };
    (@heavy light) => { false };
}

rpc_methods! {
    /// `overlay.ping`.
    Ping(Ping) = "ping", light;
    /// `getNextKeyBlockIds`.
    GetNextKeyBlockIds(rpc::GetNextKeyBlockIds) = "getNextKeyBlockIds", heavy;
    /// `getBlockFull`.
    GetBlockFull(rpc::GetBlockFull) = "getBlockFull", heavy;
    /// `getNextBlockFull`.
    GetNextBlockFull(rpc::GetNextBlockFull) = "getNextBlockFull", heavy;
    /// `getBlockDataChunk`.
    GetBlockDataChunk(rpc::GetBlockDataChunk) = "getBlockDataChunk", light;
    /// `getKeyBlockProof`.
    GetKeyBlockProof(rpc::GetKeyBlockProof) = "getKeyBlockProof", heavy;
    /// `getZerostateProof`.
    GetZerostateProof(rpc::GetZerostateProof) = "getZerostateProof", heavy;
    /// `getArchiveInfo`.
    GetArchiveInfo(rpc::GetArchiveInfo) = "getArchiveInfo", light;
    /// `getArchiveChunk`.
    GetArchiveChunk(rpc::GetArchiveChunk) = "getArchiveChunk", light;
    /// `getPersistentShardStateInfo`.
    GetPersistentShardStateInfo(rpc::GetPersistentShardStateInfo) = "getPersistentShardStateInfo", light;
    /// `getPersistentQueueStateInfo`.
    GetPersistentQueueStateInfo(rpc::GetPersistentQueueStateInfo) = "getPersistentQueueStateInfo", light;
    /// `getPersistentShardStateChunk`.
    GetPersistentShardStateChunk(rpc::GetPersistentShardStateChunk) = "getPersistentShardStateChunk", heavy;
    /// `getPersistentShardStateRootChunk`.
    GetPersistentShardStateRootChunk(rpc::GetPersistentShardStateRootChunk) =
        "getPersistentShardStateRootChunk", heavy;
    /// `getPersistentShardStatePartChunk`.
    GetPersistentShardStatePartChunk(rpc::GetPersistentShardStatePartChunk) =
        "getPersistentShardStatePartChunk", heavy;
    /// `getPersistentQueueStateChunk`.
    GetPersistentQueueStateChunk(rpc::GetPersistentQueueStateChunk) = "getPersistentQueueStateChunk", heavy;
    /// `regolith.getNextBlocksFull` (a regolith extension).
    GetNextBlocksFull(rpc::GetNextBlocksFull) = "getNextBlocksFull", heavy;
}

impl Method {
    /// Whether the method is a regolith extension (`regolith.*`), which stock nodes do not answer.
    pub fn is_extension(self) -> bool {
        matches!(self, Self::GetNextBlocksFull)
    }

    /// The method of a body, from its first u32.
    pub fn of_body(body: &[u8]) -> Option<Self> {
        let id = u32::from_le_bytes(body.get(..4)?.try_into().ok()?);
        Self::from_id(id)
    }
}
