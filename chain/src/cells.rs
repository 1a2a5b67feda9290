//! The cells of a chain's current state, counted, so that a state update needs to visit only the cells a
//! block adds and the cells it drops, not the whole new state.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

use tycho_types::cell::{Cell, DynCell, HashBytes};
use tycho_types::merkle::MerkleUpdate;

use crate::error::{build_err, ChainError};

/// A hasher for cell hashes: they are already uniform, so their first 8 bytes are the hash.
#[derive(Default)]
pub(crate) struct CellHashHasher(u64);

impl Hasher for CellHashHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut head = [0u8; 8];
        let n = bytes.len().min(8);
        head[..n].copy_from_slice(&bytes[..n]);
        self.0 ^= u64::from_le_bytes(head);
    }

    // The length prefix of the hash array is the same for every key.
    fn write_usize(&mut self, _: usize) {}
}

/// The hasher state of the sets and maps keyed by cell hash.
pub(crate) type CellHashState = BuildHasherDefault<CellHashHasher>;

/// A set of cell hashes.
pub(crate) type CellHashSet = HashSet<HashBytes, CellHashState>;

/// The reference count of every distinct cell of the states `roots`, each root held once: the oracle that a
/// cell store's counts are checked against (one per reference from a distinct cell of the set, one per root).
pub fn state_cell_counts(roots: &[Cell]) -> HashMap<HashBytes, u32> {
    let mut cells = StateCells::default();
    for root in roots {
        cells.retain(root.as_ref());
    }
    cells.counts.into_iter().collect()
}

/// The distinct cells of one state, each with its reference count: one per reference from a distinct cell of
/// the set, one per root held.
#[derive(Default)]
pub(crate) struct StateCells {
    counts: HashMap<HashBytes, u32, CellHashState>,
}

impl StateCells {
    /// The cells of the state `root` (held once).
    pub(crate) fn of(root: &Cell) -> Self {
        let mut cells = Self::default();
        cells.retain(root.as_ref());
        cells
    }

    /// Holds `root` once more; a cell not counted yet is added, and its references with it.
    fn retain(&mut self, root: &DynCell) {
        let mut stack = vec![root];
        while let Some(cell) = stack.pop() {
            match self.counts.entry(*cell.repr_hash()) {
                Entry::Occupied(mut e) => *e.get_mut() += 1,
                Entry::Vacant(e) => {
                    e.insert(1);
                    stack.extend(cell.references());
                }
            }
        }
    }

    /// Lets `root` go once; a cell whose count reaches zero is removed and lets its references go. Every cell
    /// let go of (the root, and each reference of a removed cell) is put into `touched`.
    fn release(&mut self, root: &DynCell, touched: &mut CellHashSet) {
        let mut stack = vec![root];
        while let Some(cell) = stack.pop() {
            let hash = *cell.repr_hash();
            touched.insert(hash);
            let Entry::Occupied(mut e) = self.counts.entry(hash) else {
                // Not counted: the caller's old root was not this state's.
                continue;
            };
            *e.get_mut() -= 1;
            if *e.get() == 0 {
                e.remove();
                stack.extend(cell.references());
            }
        }
    }

    /// Moves from the state `old` (the one counted) to `new` and returns the Merkle update between them.
    ///
    /// The filter is the old cells the update must know: those the new state no longer has, and the topmost
    /// old cells it keeps (reached from a dropped cell); kept cells are pruned in both halves, so only the
    /// changed paths and the new cells are in the update. With `new` held, letting `old` go removes exactly
    /// the old cells that `new` lacks, and what it lets go of is that filter: the old root, every dropped
    /// cell, and every reference of a dropped cell.
    pub(crate) fn update(&mut self, old: &Cell, new: &Cell) -> Result<MerkleUpdate, ChainError> {
        self.retain(new.as_ref());
        let mut filter = CellHashSet::default();
        self.release(old.as_ref(), &mut filter);
        MerkleUpdate::create(old.as_ref(), new.as_ref(), filter)
            .build()
            .map_err(build_err("a state update"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tycho_types::cell::CellBuilder;

    fn leaf(n: u32) -> Cell {
        let mut b = CellBuilder::new();
        b.store_u32(n).unwrap();
        b.build().unwrap()
    }

    fn node(n: u32, children: &[&Cell]) -> Cell {
        let mut b = CellBuilder::new();
        b.store_u32(n).unwrap();
        for c in children {
            b.store_reference((*c).clone()).unwrap();
        }
        b.build().unwrap()
    }

    /// The filter as a full walk of both states computes it.
    fn walked_filter(old: &Cell, new: &Cell) -> HashSet<HashBytes> {
        let mut in_new = HashSet::new();
        let mut stack = vec![new.as_ref()];
        while let Some(cell) = stack.pop() {
            if in_new.insert(*cell.repr_hash()) {
                stack.extend(cell.references());
            }
        }
        let mut changed = HashSet::new();
        let mut stack = vec![old.as_ref()];
        while let Some(cell) = stack.pop() {
            let hash = *cell.repr_hash();
            if !changed.insert(hash) || in_new.contains(&hash) {
                continue;
            }
            stack.extend(cell.references());
        }
        changed
    }

    #[test]
    fn the_counted_filter_is_the_walked_one() {
        // Shared cells, a cell referenced twice by one parent, a kept cell under a dropped one and a kept
        // subtree referenced from both a dropped and a kept parent.
        let a = leaf(1);
        let b = leaf(2);
        let shared = node(3, &[&a, &a]);
        let kept = node(4, &[&shared, &b]);
        let dropped = node(5, &[&shared, &kept]);
        let old = node(6, &[&dropped, &kept, &a]);
        let added = node(7, &[&kept, &leaf(8)]);
        let new = node(9, &[&added, &a]);
        let newer = node(10, &[&shared, &dropped]);

        let mut cells = StateCells::of(&old);
        for (from, to) in [(&old, &new), (&new, &newer), (&newer, &old)] {
            let expected = walked_filter(from, to);
            let mut copy = StateCells {
                counts: cells.counts.clone(),
            };
            copy.retain(to.as_ref());
            let mut got = CellHashSet::default();
            copy.release(from.as_ref(), &mut got);
            assert_eq!(got.into_iter().collect::<HashSet<_>>(), expected);
            cells.update(from, to).unwrap();
            assert_eq!(cells.counts, StateCells::of(to).counts);
        }
    }
}
