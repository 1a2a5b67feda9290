//! The checks of an external message before the API hands it to the node (api.md §4 sendMessage, step 2),
//! in the order the spec lists them, each failing with -32003 and the spec's message.

use std::collections::HashMap;

use bytes::Bytes;
use tycho_types::boc::Boc;
use tycho_types::cell::{Cell, CellType, DynCell, HashBytes};
use tycho_types::models::{IntAddr, MsgInfo, OwnedMessage};

use crate::backend::ExternalMessage;
use crate::error::ApiError;

/// The largest message BOC accepted, in bytes.
pub(crate) const MAX_BOC_SIZE: usize = 65535;
/// The deepest cell tree accepted (a root's representation depth).
const MAX_REPR_DEPTH: u16 = 512;
/// Distinct cells of a message at most.
const MAX_MSG_CELLS: usize = 1 << 13;
/// Data bits of a message's distinct cells at most.
const MAX_MSG_BITS: u64 = 1 << 21;
/// Nested Merkle cells along any path at most.
const MAX_MERKLE_DEPTH: u8 = 2;

// api.md §4 sendMessage step 2: these texts are the wire's.
const BOC_TOO_BIG: &str = "BOC size exceeds maximum allowed size";
const INVALID_BOC: &str = "invalid message BOC";
const ROOT_LEVEL: &str = "too big root cell level";
const REPR_DEPTH: &str = "max cell repr depth exceeded";
const INVALID_MESSAGE: &str = "invalid message";
const SIZE_LIMITS: &str = "message size limits exceeded";

/// Checks `boc` as an external inbound message (api.md §4 sendMessage step 2, in that order).
pub(crate) fn check_external_message(boc: Bytes) -> Result<ExternalMessage, ApiError> {
    let fail = ApiError::invalid_message;
    if boc.len() > MAX_BOC_SIZE {
        return Err(fail(BOC_TOO_BIG));
    }
    let root: Cell = Boc::decode(&boc).map_err(|_| fail(INVALID_BOC))?;
    if root.level() != 0 {
        return Err(fail(ROOT_LEVEL));
    }
    if root.repr_depth() > MAX_REPR_DEPTH {
        return Err(fail(REPR_DEPTH));
    }
    if root.is_exotic() {
        return Err(fail(INVALID_MESSAGE));
    }
    let message = root
        .parse::<OwnedMessage>()
        .map_err(|_| fail(INVALID_MESSAGE))?;
    let dst = match message.info {
        MsgInfo::ExtIn(info) => match info.dst {
            IntAddr::Std(addr) if addr.anycast.is_none() => addr,
            _ => return Err(fail(INVALID_MESSAGE)),
        },
        _ => return Err(fail(INVALID_MESSAGE)),
    };
    let mut stats = Stats::default();
    if stats.visit(root.as_ref()).is_none() || stats.bits > MAX_MSG_BITS {
        return Err(fail(SIZE_LIMITS));
    }
    let hash: HashBytes = *root.repr_hash();
    Ok(ExternalMessage {
        boc,
        root,
        hash,
        dst,
    })
}

/// Distinct cells, their bits, and the Merkle depth of each subtree.
#[derive(Default)]
struct Stats {
    merkle_depth: HashMap<HashBytes, u8>,
    bits: u64,
}

impl Stats {
    /// The Merkle depth of `cell`'s subtree; `None` once a limit is passed. Recursion is bounded by the repr
    /// depth checked before (≤ 512).
    fn visit(&mut self, cell: &DynCell) -> Option<u8> {
        if let Some(depth) = self.merkle_depth.get(cell.repr_hash()) {
            return Some(*depth);
        }
        if self.merkle_depth.len() >= MAX_MSG_CELLS {
            return None;
        }
        // Reserve the slot first so that the cell count is right while the children are visited.
        self.merkle_depth.insert(*cell.repr_hash(), 0);
        self.bits += u64::from(cell.bit_len());
        if self.bits > MAX_MSG_BITS {
            return None;
        }
        let mut depth = 0u8;
        for child in cell.references() {
            depth = depth.max(self.visit(child)?);
        }
        if matches!(
            cell.cell_type(),
            CellType::MerkleProof | CellType::MerkleUpdate
        ) {
            depth += 1;
        }
        if depth > MAX_MERKLE_DEPTH {
            return None;
        }
        self.merkle_depth.insert(*cell.repr_hash(), depth);
        Some(depth)
    }
}

#[cfg(test)]
mod tests {
    use tycho_types::cell::{CellBuilder, CellFamily};
    use tycho_types::models::{ExtInMsgInfo, IntMsgInfo, MsgInfo, StdAddr};

    use super::*;

    fn message(info: MsgInfo, body: Cell) -> Bytes {
        let msg = OwnedMessage {
            info,
            init: None,
            body: body.into(),
            layout: None,
        };
        let cell = CellBuilder::build_from(&msg).unwrap();
        Bytes::from(Boc::encode(&cell))
    }

    fn ext_in(dst: StdAddr) -> MsgInfo {
        MsgInfo::ExtIn(ExtInMsgInfo {
            src: None,
            dst: IntAddr::Std(dst),
            import_fee: Default::default(),
        })
    }

    fn err(boc: Bytes) -> String {
        check_external_message(boc)
            .unwrap_err()
            .message
            .into_owned()
    }

    #[test]
    fn a_valid_external_message_passes_with_its_hash_and_destination() {
        let dst = StdAddr::new(0, HashBytes([7; 32]));
        let boc = message(ext_in(dst.clone()), Cell::empty_cell());
        let checked = check_external_message(boc.clone()).unwrap();
        assert_eq!(checked.dst, dst);
        assert_eq!(checked.hash, *Boc::decode(&boc).unwrap().repr_hash());
    }

    #[test]
    fn each_failure_has_the_spec_message() {
        assert_eq!(err(Bytes::from(vec![0u8; MAX_BOC_SIZE + 1])), BOC_TOO_BIG);
        assert_eq!(err(Bytes::from_static(b"not a boc")), INVALID_BOC);
        let internal = MsgInfo::Int(IntMsgInfo::default());
        assert_eq!(err(message(internal, Cell::empty_cell())), INVALID_MESSAGE);
        let plain = CellBuilder::build_from(0xdeadu16).unwrap();
        assert_eq!(err(Bytes::from(Boc::encode(&plain))), INVALID_MESSAGE);

        // A chain of 600 cells is deeper than 512.
        let mut deep = Cell::empty_cell();
        for _ in 0..600 {
            let mut b = CellBuilder::new();
            b.store_reference(deep).unwrap();
            deep = b.build().unwrap();
        }
        let dst = StdAddr::new(0, HashBytes([7; 32]));
        assert_eq!(err(message(ext_in(dst.clone()), deep)), REPR_DEPTH);

        // Over 8192 distinct cells (a binary tree of 4200 distinct 16-bit leaves, some 41 KB of BOC) break
        // the size limits.
        let mut layer: Vec<Cell> = (0..4200u16)
            .map(|i| CellBuilder::build_from(i).unwrap())
            .collect();
        while layer.len() > 1 {
            layer = layer
                .chunks(2)
                .map(|pair| {
                    let mut b = CellBuilder::new();
                    for c in pair {
                        b.store_reference(c.clone()).unwrap();
                    }
                    b.build().unwrap()
                })
                .collect();
        }
        let big = message(ext_in(dst), layer.pop().unwrap());
        assert!(big.len() <= MAX_BOC_SIZE);
        assert_eq!(err(big), SIZE_LIMITS);
    }
}
