//! A stored state as the one-root BOC of its persistent state file (state.md §7.4), read from the cell rows:
//! the bytes tycho-types' `Boc::encode` gives for the same state (cells in its order, no index, no CRC),
//! without building the state's cells in memory. One walk reads each row once in the encoder's order
//! (children before parents, each cell once) and keeps its body; the cells are then written from the bodies.
//! Memory holds the bodies and an index per cell, a fraction of what the loaded cells and the encoder's own
//! tables take.

use std::collections::HashMap;
use std::io::Write;

use regolith_storage::CellStorage;
use tycho_types::cell::{CellDescriptor, HashBytes};

use crate::cell_row;
use crate::error::StateError;

/// The rows of one stored state in the BOC encoder's order ([`crate::StateStore::read_state_boc`]).
pub struct StateBoc {
    /// The bodies, in the order they were read.
    bodies: Vec<u8>,
    /// (start, length) of each cell's body in `bodies`, in the encoder's order (children first).
    spans: Vec<(usize, u32)>,
    /// Each cell's position in `spans`.
    order: HashMap<HashBytes, u32, ahash::RandomState>,
    /// The repr hashes of the cells whose descriptor says to store their hashes (the encoder writes each
    /// level's hash and depth before their data), by position.
    with_hashes: HashMap<u32, HashBytes, ahash::RandomState>,
    /// Data bytes of all cells.
    data_bytes: u64,
    /// References of all cells.
    references: u64,
}

/// A cell of the walk whose children are being finished.
struct Frame {
    hash: HashBytes,
    /// Its body in `StateBoc::bodies`.
    start: usize,
    len: u32,
    /// Where its child hashes start in `StateBoc::bodies`.
    children: usize,
    count: u8,
    next: u8,
    store_hashes: bool,
}

impl StateBoc {
    /// Reads the state rooted at `root`.
    pub(crate) fn read(cells: &CellStorage, root: &HashBytes) -> Result<Self, StateError> {
        let mut boc = Self {
            bodies: Vec::new(),
            spans: Vec::new(),
            order: HashMap::default(),
            with_hashes: HashMap::default(),
            data_bytes: 0,
            references: 0,
        };
        let mut stack = vec![boc.read_row(cells, root)?];
        while let Some(frame) = stack.last_mut() {
            if frame.next < frame.count {
                let at = frame.children + 32 * frame.next as usize;
                frame.next += 1;
                let child = HashBytes(boc.bodies[at..at + 32].try_into().expect("32 bytes"));
                // A cell being walked is an ancestor and is never reached again: the cells form a DAG. Damaged
                // rows could form a cycle, which the depth bound turns into an error.
                if !boc.order.contains_key(&child) {
                    if stack.len() > usize::from(u16::MAX) {
                        return Err(StateError::Corruption {
                            hash: child,
                            reason: "reached deeper than any cell can be (a cycle of damaged rows)"
                                .into(),
                        });
                    }
                    let frame = boc.read_row(cells, &child)?;
                    stack.push(frame);
                }
                continue;
            }
            let Frame {
                hash,
                start,
                len,
                store_hashes,
                ..
            } = stack.pop().expect("the frame just looked at");
            let position = boc.spans.len() as u32;
            boc.order.insert(hash, position);
            if store_hashes {
                boc.with_hashes.insert(position, hash);
            }
            boc.spans.push((start, len));
        }
        Ok(boc)
    }

    /// Reads the row of `hash` into the bodies.
    fn read_row(&mut self, cells: &CellStorage, hash: &HashBytes) -> Result<Frame, StateError> {
        let start = self.bodies.len();
        let bodies = &mut self.bodies;
        cells
            .with_cell(hash, |body| bodies.extend_from_slice(body))?
            .ok_or_else(|| StateError::Corruption {
                hash: *hash,
                reason: "the cell is not stored".into(),
            })?;
        let body = &self.bodies[start..];
        let (descriptor, data, children) =
            cell_row::boc_parts(body).map_err(|reason| StateError::Corruption {
                hash: *hash,
                reason,
            })?;
        let count = descriptor.reference_count();
        let store_hashes = descriptor.store_hashes();
        if store_hashes {
            // Its hashes are written from the decoded row: a row that does not decode is refused here.
            cell_row::decode(hash, body).map_err(|reason| StateError::Corruption {
                hash: *hash,
                reason,
            })?;
        }
        self.data_bytes += data.len() as u64;
        if store_hashes {
            self.data_bytes += (u64::from(descriptor.level_mask().level()) + 1) * (32 + 2);
        }
        self.references += u64::from(count);
        let children = start + (body.len() - children.len());
        Ok(Frame {
            hash: *hash,
            start,
            len: body.len() as u32,
            children,
            count,
            next: 0,
            store_hashes,
        })
    }

    /// The size of the BOC.
    pub fn size(&self) -> u64 {
        self.layout().total
    }

    fn layout(&self) -> BocLayout {
        let cells = self.spans.len() as u64;
        let ref_size = bytes_to_fit(cells);
        let cells_size = self.data_bytes + 2 * cells + ref_size as u64 * self.references;
        let offset_size = bytes_to_fit(cells_size);
        // Tag, flags, offset size, cell count, root count, absent count, cells size, the root's index.
        let total = 4 + 2 + 4 * ref_size as u64 + offset_size as u64 + cells_size;
        BocLayout {
            ref_size,
            offset_size,
            cells_size,
            total,
        }
    }

    /// Writes the BOC: the header, then the cells from the root (index 0) on, each child after its parents.
    pub fn write(&self, out: &mut impl Write) -> Result<(), StateError> {
        let layout = self.layout();
        let cells = self.spans.len() as u32;
        let ref_size = layout.ref_size;
        let mut chunk = Vec::with_capacity(64 << 10);
        chunk.extend_from_slice(&[0xb5, 0xee, 0x9c, 0x72]);
        chunk.extend_from_slice(&[ref_size as u8, layout.offset_size as u8]);
        chunk.extend_from_slice(&cells.to_be_bytes()[4 - ref_size..]);
        chunk.extend_from_slice(&1u32.to_be_bytes()[4 - ref_size..]);
        chunk.extend_from_slice(&[0; 4][4 - ref_size..]);
        chunk.extend_from_slice(&layout.cells_size.to_be_bytes()[8 - layout.offset_size..]);
        chunk.extend_from_slice(&[0; 4][4 - ref_size..]);
        for (position, &(start, len)) in self.spans.iter().enumerate().rev() {
            let body = &self.bodies[start..start + len as usize];
            let (descriptor, data, children) =
                cell_row::boc_parts(body).expect("a body checked when read");
            let CellDescriptor { d1, d2 } = descriptor;
            chunk.extend_from_slice(&[d1, d2]);
            if let Some(hash) = self.with_hashes.get(&(position as u32)) {
                let row = cell_row::decode(hash, body).expect("a row decoded when read");
                let mask = descriptor.level_mask();
                for level in mask {
                    let (hash, _) =
                        cell_row::level_descr(descriptor, &row.data, &row.hashes, level);
                    chunk.extend_from_slice(hash.as_array());
                }
                for level in mask {
                    let (_, depth) =
                        cell_row::level_descr(descriptor, &row.data, &row.hashes, level);
                    chunk.extend_from_slice(&depth.to_be_bytes());
                }
            }
            chunk.extend_from_slice(data);
            for child in children.chunks_exact(32) {
                let child = HashBytes(child.try_into().expect("32 bytes"));
                let position = self.order[&child];
                let index = cells - 1 - position;
                chunk.extend_from_slice(&index.to_be_bytes()[4 - ref_size..]);
            }
            if chunk.len() >= 60 << 10 {
                out.write_all(&chunk).map_err(StateError::BocWrite)?;
                chunk.clear();
            }
        }
        out.write_all(&chunk).map_err(StateError::BocWrite)?;
        Ok(())
    }
}

struct BocLayout {
    ref_size: usize,
    offset_size: usize,
    cells_size: u64,
    total: u64,
}

/// Bytes that hold `n` (at least 1), as the BOC header sizes its numbers.
fn bytes_to_fit(n: u64) -> usize {
    (8 - n.leading_zeros() / 8).max(1) as usize
}
