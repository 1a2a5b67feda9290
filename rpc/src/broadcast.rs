//! Receiving external-message broadcasts (rpc.md §5.3–5.5): the framing check, the validity rules of an
//! external message and the listeners that get the valid ones.

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use tycho_network::InboundRequestMeta;
use tycho_types::boc::de::{BocHeader, Options};
use tycho_types::cell::{Cell, CellSlice, CellType, HashBytes, Load};
use tycho_types::models::{IntAddr, MsgInfo, StateInit};
use tycho_types::prelude::Boc;

use crate::proto::ids;

/// The largest accepted external message BOC.
pub const MAX_EXTERNAL_BOC_SIZE: usize = 65_535;
/// The most cells a message may declare or span.
pub const MAX_EXTERNAL_CELLS: usize = 8_192;
/// The largest root depth.
pub const MAX_EXTERNAL_DEPTH: u16 = 512;
/// The most bits after the header.
pub const MAX_EXTERNAL_BITS: u64 = 1 << 21;
/// The deepest Merkle nesting.
pub const MAX_MERKLE_DEPTH: u8 = 2;
/// Bodies above this size are validated on the blocking pool.
pub const INLINE_VALIDATION_LIMIT: usize = 4096;

/// Why a broadcast was dropped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BroadcastError {
    /// Not `broadcastPrefix ‖ broadcast.message ‖ bytes` with exact padding.
    #[error("bad framing: {0}")]
    Framing(&'static str),
    /// The message breaks a rule of §5.4.
    #[error("invalid external message: {0}")]
    Invalid(String),
}

/// Strips the framing of §5.3 (steps 1–2) and returns the raw BOC.
pub fn unwrap_broadcast(body: &[u8]) -> Result<&[u8], BroadcastError> {
    if body.len() < 8 {
        return Err(BroadcastError::Framing("body under 8 bytes"));
    }
    let word = |i: usize| u32::from_le_bytes([body[i], body[i + 1], body[i + 2], body[i + 3]]);
    if word(0) != ids::BROADCAST_PREFIX {
        return Err(BroadcastError::Framing("wrong first prefix"));
    }
    if word(4) != ids::BROADCAST_MESSAGE {
        return Err(BroadcastError::Framing("wrong second prefix"));
    }
    let rest = &body[8..];
    let (header, len) = match rest.first() {
        None => return Err(BroadcastError::Framing("no bytes header")),
        Some(&254) => {
            if rest.len() < 4 {
                return Err(BroadcastError::Framing("truncated bytes header"));
            }
            (
                4,
                u32::from_le_bytes([rest[1], rest[2], rest[3], 0]) as usize,
            )
        }
        Some(&255) => return Err(BroadcastError::Framing("invalid bytes header")),
        Some(&n) => (1, n as usize),
    };
    let unpadded = header + len;
    let padded = unpadded.div_ceil(4) * 4;
    if padded != rest.len() {
        return Err(BroadcastError::Framing(
            "length and padding do not match the body",
        ));
    }
    if rest[unpadded..].iter().any(|b| *b != 0) {
        return Err(BroadcastError::Framing("non-zero padding"));
    }
    Ok(&rest[header..unpadded])
}

fn invalid(reason: impl Into<String>) -> BroadcastError {
    BroadcastError::Invalid(reason.into())
}

/// Checks the rules of §5.4 on an external message BOC.
pub fn validate_external_message(boc: &[u8]) -> Result<(), BroadcastError> {
    if boc.len() > MAX_EXTERNAL_BOC_SIZE {
        return Err(invalid(format!("BOC of {} bytes", boc.len())));
    }
    let header = BocHeader::decode(boc, &Options::exact(1))
        .map_err(|e| invalid(format!("BOC header: {e}")))?;
    if header.cells().len() > MAX_EXTERNAL_CELLS {
        return Err(invalid(format!("{} cells declared", header.cells().len())));
    }
    drop(header);
    let root = Boc::decode(boc).map_err(|e| invalid(format!("BOC: {e}")))?;
    if root.is_exotic() {
        return Err(invalid("exotic root"));
    }
    if root.level() != 0 {
        return Err(invalid("root level is not 0"));
    }
    if root.repr_depth() > MAX_EXTERNAL_DEPTH {
        return Err(invalid(format!("depth {}", root.repr_depth())));
    }
    let mut slice = root
        .as_slice()
        .map_err(|e| invalid(format!("root slice: {e}")))?;
    check_message(&mut slice)
}

fn check_message(slice: &mut CellSlice<'_>) -> Result<(), BroadcastError> {
    match slice.get_small_uint(0, 2) {
        Ok(0b10) => {}
        Ok(_) => return Err(invalid("not an ext_in_msg_info header")),
        Err(e) => return Err(invalid(format!("header: {e}"))),
    }
    let info = MsgInfo::load_from(slice).map_err(|e| invalid(format!("header: {e}")))?;
    let MsgInfo::ExtIn(info) = info else {
        return Err(invalid("not an ext_in_msg_info header"));
    };
    match &info.dst {
        IntAddr::Std(addr) if addr.anycast.is_none() => {}
        IntAddr::Std(_) => return Err(invalid("anycast destination")),
        IntAddr::Var(_) => return Err(invalid("addr_var destination")),
    }
    check_rest_stats(slice)?;

    // init:(Maybe (Either StateInit ^StateInit))
    if load_bit(slice)? {
        if load_bit(slice)? {
            let cell = slice
                .load_reference_cloned()
                .map_err(|e| invalid(format!("state init ref: {e}")))?;
            let mut init_slice = cell
                .as_slice()
                .map_err(|e| invalid(format!("state init cell: {e}")))?;
            StateInit::load_from(&mut init_slice)
                .map_err(|e| invalid(format!("state init: {e}")))?;
            if !init_slice.is_empty() {
                return Err(invalid("state init reference with trailing data"));
            }
        } else {
            StateInit::load_from(slice).map_err(|e| invalid(format!("state init: {e}")))?;
        }
    }
    // body:(Either X ^X)
    if load_bit(slice)? && (slice.size_bits() != 0 || slice.size_refs() != 1) {
        return Err(invalid("body reference flag with extra data"));
    }
    Ok(())
}

fn load_bit(slice: &mut CellSlice<'_>) -> Result<bool, BroadcastError> {
    slice
        .load_bit()
        .map_err(|e| invalid(format!("truncated message: {e}")))
}

/// The rest of the root slice: ≤ 2^21 bits and ≤ 8 192 distinct cells, Merkle depth ≤ 2.
fn check_rest_stats(slice: &CellSlice<'_>) -> Result<(), BroadcastError> {
    let mut seen: HashSet<HashBytes> = HashSet::new();
    let mut bits = u64::from(slice.size_bits());
    let mut stack: Vec<(Cell, u8)> = Vec::new();
    for i in 0..slice.size_refs() {
        if let Ok(cell) = slice.get_reference_cloned(i) {
            stack.push((cell, 0));
        }
    }
    while let Some((cell, merkle_depth)) = stack.pop() {
        if !seen.insert(*cell.repr_hash()) {
            continue;
        }
        if seen.len() > MAX_EXTERNAL_CELLS {
            return Err(invalid("more than 8192 cells"));
        }
        bits += u64::from(cell.bit_len());
        if bits > MAX_EXTERNAL_BITS {
            return Err(invalid("more than 2^21 bits"));
        }
        let depth = match cell.cell_type() {
            CellType::MerkleProof | CellType::MerkleUpdate => merkle_depth + 1,
            _ => merkle_depth,
        };
        if depth > MAX_MERKLE_DEPTH {
            return Err(invalid("Merkle depth over 2"));
        }
        for child in cell.references().cloned() {
            stack.push((child, depth));
        }
    }
    Ok(())
}

/// Receives valid external messages from the network, with the sender (§5.5).
#[async_trait]
pub trait BroadcastListener: Send + Sync + 'static {
    /// Called once per valid message.
    async fn handle_message(&self, meta: Arc<InboundRequestMeta>, message: Bytes);
}

#[async_trait]
impl<T: BroadcastListener + ?Sized> BroadcastListener for Arc<T> {
    async fn handle_message(&self, meta: Arc<InboundRequestMeta>, message: Bytes) {
        (**self).handle_message(meta, message).await;
    }
}

#[async_trait]
impl BroadcastListener for Box<dyn BroadcastListener> {
    async fn handle_message(&self, meta: Arc<InboundRequestMeta>, message: Bytes) {
        (**self).handle_message(meta, message).await;
    }
}

macro_rules! impl_listener_tuple {
    ($($name:ident),+) => {
        #[async_trait]
        impl<$($name: BroadcastListener),+> BroadcastListener for ($($name,)+) {
            #[allow(non_snake_case)]
            async fn handle_message(&self, meta: Arc<InboundRequestMeta>, message: Bytes) {
                let ($($name,)+) = self;
                futures_util::join!($($name.handle_message(meta.clone(), message.clone())),+);
            }
        }
    };
}

impl_listener_tuple!(A, B);
impl_listener_tuple!(A, B, C);
impl_listener_tuple!(A, B, C, D);
impl_listener_tuple!(A, B, C, D, E);

/// A listener that ignores every message.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoopBroadcastListener;

#[async_trait]
impl BroadcastListener for NoopBroadcastListener {
    async fn handle_message(&self, _: Arc<InboundRequestMeta>, _: Bytes) {}
}
