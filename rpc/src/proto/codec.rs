//! Field codecs the derive cannot express on its own: the bare 80-byte `blockchain.blockId` with its shard
//! checks (§2.1), non-zero integers (NZ fields) and bounded vectors.

use tl_proto::{TlError, TlPacket, TlRead, TlResult, TlWrite};
use tycho_types::models::{BlockId, ShardIdent};
use tycho_types::prelude::HashBytes;

/// Size of a bare block id on the wire.
pub const BLOCK_ID_WIRE_LEN: usize = 80;

/// The bare, 80-byte `blockchain.blockId` (never boxed, §2.1).
pub mod block_id {
    use super::*;

    /// Always 80 bytes.
    pub const fn size_hint(_: &BlockId) -> usize {
        BLOCK_ID_WIRE_LEN
    }

    /// `i32 workchain, u64 prefix, u32 seqno, [32] root_hash, [32] file_hash`.
    pub fn write<P: TlPacket>(id: &BlockId, packet: &mut P) {
        packet.write_i32(id.shard.workchain());
        packet.write_u64(id.shard.prefix());
        packet.write_u32(id.seqno);
        packet.write_raw_slice(id.root_hash.as_slice());
        packet.write_raw_slice(id.file_hash.as_slice());
    }

    /// Rejects a zero prefix, a prefix with any of its 3 low bits set and a masterchain prefix other than
    /// `0x8000000000000000`.
    pub fn read(packet: &mut &[u8]) -> TlResult<BlockId> {
        let workchain = i32::read_from(packet)?;
        let prefix = u64::read_from(packet)?;
        let seqno = u32::read_from(packet)?;
        let root_hash = <[u8; 32]>::read_from(packet)?;
        let file_hash = <[u8; 32]>::read_from(packet)?;
        let shard = check_shard(workchain, prefix).ok_or(TlError::InvalidData)?;
        Ok(BlockId {
            shard,
            seqno,
            root_hash: HashBytes(root_hash),
            file_hash: HashBytes(file_hash),
        })
    }
}

/// A shard ident from wire fields, or `None` when §2.1 forbids it.
pub fn check_shard(workchain: i32, prefix: u64) -> Option<ShardIdent> {
    if prefix == 0 || prefix & 0b111 != 0 {
        return None;
    }
    if workchain == -1 && prefix != ShardIdent::PREFIX_FULL {
        return None;
    }
    ShardIdent::new(workchain, prefix)
}

/// A vector of bare block ids.
pub mod block_id_vec {
    use super::*;

    /// Count plus 80 bytes per id.
    pub fn size_hint(ids: &[BlockId]) -> usize {
        4 + ids.len() * BLOCK_ID_WIRE_LEN
    }

    /// u32 count, then each id bare.
    pub fn write<P: TlPacket>(ids: &[BlockId], packet: &mut P) {
        packet.write_u32(ids.len() as u32);
        for id in ids {
            block_id::write(id, packet);
        }
    }

    /// The count is bounded by the remaining bytes, so a huge count cannot allocate.
    pub fn read(packet: &mut &[u8]) -> TlResult<Vec<BlockId>> {
        let len = u32::read_from(packet)? as usize;
        if len > packet.len() / BLOCK_ID_WIRE_LEN {
            return Err(TlError::UnexpectedEof);
        }
        let mut ids = Vec::with_capacity(len);
        for _ in 0..len {
            ids.push(block_id::read(packet)?);
        }
        Ok(ids)
    }
}

/// A u32 that must not be 0 (NZ).
pub mod nz_u32 {
    use super::*;

    /// 4 bytes.
    pub const fn size_hint(_: &u32) -> usize {
        4
    }

    /// LE u32.
    pub fn write<P: TlPacket>(value: &u32, packet: &mut P) {
        packet.write_u32(*value);
    }

    /// Rejects 0.
    pub fn read(packet: &mut &[u8]) -> TlResult<u32> {
        match u32::read_from(packet)? {
            0 => Err(TlError::InvalidData),
            value => Ok(value),
        }
    }
}

/// A u64 that must not be 0 (NZ).
pub mod nz_u64 {
    use super::*;

    /// 8 bytes.
    pub const fn size_hint(_: &u64) -> usize {
        8
    }

    /// LE u64.
    pub fn write<P: TlPacket>(value: &u64, packet: &mut P) {
        packet.write_u64(*value);
    }

    /// Rejects 0.
    pub fn read(packet: &mut &[u8]) -> TlResult<u64> {
        match u64::read_from(packet)? {
            0 => Err(TlError::InvalidData),
            value => Ok(value),
        }
    }
}

/// Shared by the bounded vectors of boxed items: count plus the items.
fn boxed_size_hint<T: TlWrite>(items: &[T]) -> usize {
    4 + items.iter().map(TlWrite::max_size_hint).sum::<usize>()
}

/// u32 count, then each item with its id.
fn write_boxed<T: TlWrite, P: TlPacket>(items: &[T], packet: &mut P) {
    packet.write_u32(items.len() as u32);
    for item in items {
        item.write_to(packet);
    }
}

/// Rejects a count above `max`, and one the remaining bytes cannot hold at `min_item_len` bytes an item,
/// before anything is allocated for it.
fn read_boxed<'a, T: TlRead<'a>>(
    packet: &mut &'a [u8],
    max: usize,
    min_item_len: usize,
) -> TlResult<Vec<T>> {
    let len = u32::read_from(packet)? as usize;
    if len > max {
        return Err(TlError::InvalidData);
    }
    if len > packet.len() / min_item_len.max(1) {
        return Err(TlError::UnexpectedEof);
    }
    let mut items = Vec::with_capacity(len);
    for _ in 0..len {
        items.push(T::read_from(packet)?);
    }
    Ok(items)
}

/// At most 64 boxed `persistentStatePartInfo` items.
pub mod part_vec {
    use super::*;
    use crate::proto::PersistentStatePartInfo;

    /// The largest accepted count.
    pub const MAX_PARTS: usize = 64;
    /// One item: its id, the prefix and the size.
    const ITEM_LEN: usize = 4 + 8 + 8;

    /// Count plus the boxed items.
    pub fn size_hint(parts: &[PersistentStatePartInfo]) -> usize {
        boxed_size_hint(parts)
    }

    /// u32 count, then each item with its id.
    pub fn write<P: TlPacket>(parts: &[PersistentStatePartInfo], packet: &mut P) {
        write_boxed(parts, packet);
    }

    /// Rejects more than 64 items.
    pub fn read(packet: &mut &[u8]) -> TlResult<Vec<PersistentStatePartInfo>> {
        read_boxed(packet, MAX_PARTS, ITEM_LEN)
    }
}

/// At most [`next_block_vec::MAX_ENTRIES`] boxed `regolith.nextBlock` items.
pub mod next_block_vec {
    use super::*;
    use crate::proto::{NextBlock, MAX_BATCH_MC_BLOCKS, MAX_BATCH_SHARD_BLOCKS};

    /// The largest accepted count: every mc block of a batch with all the shard blocks it may bring.
    pub const MAX_ENTRIES: usize = MAX_BATCH_MC_BLOCKS as usize * (1 + MAX_BATCH_SHARD_BLOCKS);
    /// The fewest bytes one item takes: its id, the bare block id and three empty byte strings.
    const MIN_ITEM_LEN: usize = 4 + BLOCK_ID_WIRE_LEN + 3 * 4;

    /// Count plus the boxed items.
    pub fn size_hint(items: &[NextBlock]) -> usize {
        boxed_size_hint(items)
    }

    /// u32 count, then each item with its id.
    pub fn write<P: TlPacket>(items: &[NextBlock], packet: &mut P) {
        write_boxed(items, packet);
    }

    /// Rejects more than [`MAX_ENTRIES`] items, and a count the remaining bytes cannot hold.
    pub fn read(packet: &mut &[u8]) -> TlResult<Vec<NextBlock>> {
        read_boxed(packet, MAX_ENTRIES, MIN_ITEM_LEN)
    }
}
