//! The stored form of a message (the body of a `shard_int_messages` value): a single-root BOC in which every
//! cell but the root carries its representation hash and depth (the BOC's own `with_hashes` descriptor bit).
//!
//! Reading a message back then costs no hashing: the root's hash is the message hash of the row's key, the
//! other hashes are in the BOC, and each depth is recomputed and compared with the stored one. The bytes stay a
//! standard BOC that any BOC reader decodes (computing the hashes itself). Trees this form does not cover —
//! exotic cells, cells with a level, trees deeper than [`MAX_FAST_DEPTH`] — are written as the plain BOC of
//! `Boc::encode`, and so are the values of data dirs written before this form: [`decode`] falls back to
//! `Boc::decode` for every BOC that is not in it, and then checks the computed root hash against the key.

use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::ptr::addr_of_mut;
use std::sync::Arc;

use tycho_types::boc::Boc;
use tycho_types::cell::{
    Cell, CellContext, CellDescriptor, CellFamily, CellImpl, CellInner, CellParts, DynCell,
    HashBytes, LoadMode,
};

/// The generic BOC tag.
const BOC_TAG: [u8; 4] = [0xb5, 0xee, 0x9c, 0x72];
/// Bytes of a stored hash and depth (level 0 only).
const HASH_AND_DEPTH_LEN: usize = 32 + 2;
/// The deepest tree read without hashing (dropping such a tree recurses once per level).
const MAX_FAST_DEPTH: u16 = 128;
/// Cells looked up by a linear scan before the encoder switches to a map.
const LINEAR_DEDUP: usize = 16;

/// Appends the stored form of the tree under `root` to `out`.
pub(crate) fn encode(root: &DynCell, out: &mut Vec<u8>) {
    match collect(root) {
        Some((cells, seen)) => write_hashed(&cells, &seen, out),
        None => out.extend_from_slice(&Boc::encode(root)),
    }
}

/// The cells of the tree in reverse BOC order (children before parents, the root last), each once, and
/// their positions; `None` when a cell is exotic, has a level, or the tree is deeper than [`MAX_FAST_DEPTH`].
fn collect(root: &DynCell) -> Option<(Vec<&DynCell>, Seen)> {
    if root.repr_depth() > MAX_FAST_DEPTH {
        return None;
    }
    let mut order: Vec<&DynCell> = Vec::new();
    let mut seen = Seen::default();
    let mut stack: Vec<(&DynCell, u8)> = vec![(root, 0)];
    while let Some(&mut (cell, ref mut next)) = stack.last_mut() {
        if *next < cell.reference_count() {
            let child = cell.reference(*next)?;
            *next += 1;
            if seen.position(child.repr_hash(), &order).is_none() {
                stack.push((child, 0));
            }
            continue;
        }
        stack.pop();
        let descriptor = cell.descriptor();
        if descriptor.is_exotic() || !descriptor.level_mask().is_empty() {
            return None;
        }
        seen.insert(cell.repr_hash(), &order);
        order.push(cell);
    }
    Some((order, seen))
}

/// The positions of the collected cells by hash: a scan while the tree is small, a map beyond.
#[derive(Default)]
struct Seen {
    map: Option<HashMap<HashBytes, usize>>,
}

impl Seen {
    fn position(&self, hash: &HashBytes, order: &[&DynCell]) -> Option<usize> {
        match &self.map {
            Some(map) => map.get(hash).copied(),
            None => order.iter().position(|cell| cell.repr_hash() == hash),
        }
    }

    /// Records the cell that goes next after `order`.
    fn insert(&mut self, hash: &HashBytes, order: &[&DynCell]) {
        let position = order.len();
        if let Some(map) = &mut self.map {
            map.insert(*hash, position);
        } else if position >= LINEAR_DEDUP {
            let mut map = HashMap::with_capacity(4 * LINEAR_DEDUP);
            for (position, cell) in order.iter().enumerate() {
                map.insert(*cell.repr_hash(), position);
            }
            map.insert(*hash, position);
            self.map = Some(map);
        }
    }
}

/// Bytes needed for `value` in a BOC size field (at least one).
fn size_bytes(value: u64) -> usize {
    (64 - value.leading_zeros() as usize).div_ceil(8).max(1)
}

fn write_hashed(cells: &[&DynCell], seen: &Seen, out: &mut Vec<u8>) {
    let count = cells.len();
    let ref_size = size_bytes(count as u64);
    // The root is the last cell collected and goes first; every other cell carries its hash and depth.
    let mut cells_size = 0u64;
    for (position, cell) in cells.iter().enumerate() {
        let stored = if position + 1 == count {
            0
        } else {
            HASH_AND_DEPTH_LEN
        };
        cells_size += (2 + stored + cell.data().len()) as u64
            + u64::from(cell.reference_count()) * ref_size as u64;
    }
    let offset_size = size_bytes(cells_size);

    out.reserve(4 + 2 + 4 * ref_size + offset_size + cells_size as usize);
    out.extend_from_slice(&BOC_TAG);
    out.push(ref_size as u8);
    out.push(offset_size as u8);
    out.extend_from_slice(&(count as u32).to_be_bytes()[4 - ref_size..]);
    out.extend_from_slice(&1u32.to_be_bytes()[4 - ref_size..]);
    out.extend_from_slice(&0u32.to_be_bytes()[4 - ref_size..]);
    out.extend_from_slice(&cells_size.to_be_bytes()[8 - offset_size..]);
    out.extend_from_slice(&0u32.to_be_bytes()[4 - ref_size..]);
    for (index, cell) in cells.iter().rev().enumerate() {
        let descriptor = cell.descriptor();
        let mut d1 = descriptor.d1 & !CellDescriptor::STORE_HASHES_MASK;
        if index > 0 {
            d1 |= CellDescriptor::STORE_HASHES_MASK;
        }
        out.extend_from_slice(&[d1, descriptor.d2]);
        if index > 0 {
            out.extend_from_slice(cell.repr_hash().as_ref());
            out.extend_from_slice(&cell.repr_depth().to_be_bytes());
        }
        out.extend_from_slice(cell.data());
        for child in cell.references() {
            // Collected before its parent, so present.
            let position = seen.position(child.repr_hash(), cells).unwrap_or_default();
            let child_index = (count - 1 - position) as u32;
            out.extend_from_slice(&child_index.to_be_bytes()[4 - ref_size..]);
        }
    }
}

/// Decodes a stored message whose key carries `root_hash`. A BOC not in the stored form is decoded by
/// `Boc::decode`, and its root hash must then equal `root_hash`; so is one in the stored form that does not
/// hold together (a stored depth the tree contradicts, say), which is logged: its cells and their computed
/// hashes decide, never the stored ones.
pub(crate) fn decode(bytes: &[u8], root_hash: &HashBytes) -> Result<Cell, String> {
    let inconsistent = match decode_hashed(bytes, root_hash) {
        Ok(Some(cell)) => return Ok(cell),
        Ok(None) => None,
        Err(reason) => Some(reason),
    };
    let cell = Boc::decode_ext(bytes, &WithoutStoredHashBit).map_err(|e| match &inconsistent {
        Some(reason) => format!("{reason}; as a plain BOC: {e}"),
        None => format!("message BOC: {e}"),
    })?;
    if let Some(reason) = inconsistent {
        tracing::warn!(message = %root_hash, %reason, "stored message read by hashing its cells");
    }
    if cell.repr_hash() != root_hash {
        return Err(format!(
            "message BOC hashes to {}, its key says {root_hash}",
            cell.repr_hash()
        ));
    }
    Ok(cell)
}

/// Builds cells as the default context does, but without the with-hashes bit of their BOC descriptor
/// (the default decoder keeps it, and a cell re-encoded later would carry its hashes again).
struct WithoutStoredHashBit;

impl CellContext for WithoutStoredHashBit {
    fn finalize_cell(&self, mut cell: CellParts<'_>) -> Result<Cell, tycho_types::error::Error> {
        cell.descriptor.d1 &= !CellDescriptor::STORE_HASHES_MASK;
        Cell::empty_context().finalize_cell(cell)
    }

    fn load_cell(&self, cell: Cell, mode: LoadMode) -> Result<Cell, tycho_types::error::Error> {
        Cell::empty_context().load_cell(cell, mode)
    }

    fn load_dyn_cell<'s: 'a, 'a>(
        &'s self,
        cell: &'a DynCell,
        mode: LoadMode,
    ) -> Result<&'a DynCell, tycho_types::error::Error> {
        Cell::empty_context().load_dyn_cell(cell, mode)
    }
}

/// A big-endian unsigned integer of `len` (≤ 8) bytes at the front of `bytes`, which is advanced.
fn take_be(bytes: &mut &[u8], len: usize, what: &str) -> Result<u64, String> {
    if bytes.len() < len {
        return Err(format!("message BOC ends inside its {what}"));
    }
    let (head, rest) = bytes.split_at(len);
    *bytes = rest;
    Ok(head.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b)))
}

/// The stored form, or `None` when the BOC is not in it (another BOC layout, exotic or level cells, a
/// missing stored hash, a deep tree): the caller then decodes it in full. An error is a BOC in the stored
/// layout that is malformed.
fn decode_hashed(bytes: &[u8], root_hash: &HashBytes) -> Result<Option<Cell>, String> {
    let Some(mut rest) = bytes.strip_prefix(&BOC_TAG) else {
        return Ok(None);
    };
    let [flags, offset_size, ..] = *rest else {
        return Ok(None);
    };
    rest = &rest[2..];
    // No index, no CRC, no cache bits: the encoder above writes none of them.
    let ref_size = usize::from(flags);
    if !(1..=4).contains(&ref_size) || !(1..=8).contains(&offset_size) {
        return Ok(None);
    }
    let count = take_be(&mut rest, ref_size, "cell count")? as usize;
    let roots = take_be(&mut rest, ref_size, "root count")?;
    let absent = take_be(&mut rest, ref_size, "absent count")?;
    let cells_size = take_be(&mut rest, usize::from(offset_size), "cells size")?;
    if roots != 1 || absent != 0 || count == 0 {
        return Ok(None);
    }
    if take_be(&mut rest, ref_size, "root index")? != 0 {
        return Ok(None);
    }
    if rest.len() as u64 != cells_size {
        return Err(format!(
            "message BOC declares {cells_size} bytes of cells, has {}",
            rest.len()
        ));
    }
    // Each cell takes at least two bytes: a count beyond that is a lie, found before any allocation.
    if count > rest.len() / 2 {
        return Err(format!(
            "message BOC declares {count} cells in {} bytes",
            rest.len()
        ));
    }

    // A message is a few cells: their working arrays stay on the stack up to [`INLINE_CELLS`].
    if count <= INLINE_CELLS {
        let mut raw: [Option<RawCell<'_>>; INLINE_CELLS] = Default::default();
        let mut built: [Option<Cell>; INLINE_CELLS] = Default::default();
        build_cells(
            rest,
            ref_size,
            root_hash,
            &mut raw[..count],
            &mut built[..count],
        )
    } else {
        let mut raw: Vec<Option<RawCell<'_>>> = (0..count).map(|_| None).collect();
        let mut built: Vec<Option<Cell>> = vec![None; count];
        build_cells(rest, ref_size, root_hash, &mut raw, &mut built)
    }
}

/// Cells of a message handled without a heap allocation for the working arrays.
const INLINE_CELLS: usize = 4;

/// Reads the `raw.len()` cells of a stored form from `rest`, then builds them from the last to the root, so
/// that every child exists before its parent; `None` when the bytes are outside the stored form.
fn build_cells<'a>(
    mut rest: &'a [u8],
    ref_size: usize,
    root_hash: &HashBytes,
    raw: &mut [Option<RawCell<'a>>],
    built: &mut [Option<Cell>],
) -> Result<Option<Cell>, String> {
    let count = raw.len();
    for (index, slot) in raw.iter_mut().enumerate() {
        let Some(cell) = RawCell::read(&mut rest, index, ref_size)? else {
            return Ok(None);
        };
        *slot = Some(cell);
    }

    for index in (0..count).rev() {
        let Some(cell) = &raw[index] else {
            return Err(format!("message BOC cell {index} missing"));
        };
        let mut references: [Option<Cell>; 4] = Default::default();
        let mut depth = 0u16;
        for (slot, child_index) in references.iter_mut().zip(cell.references()) {
            let child_index = child_index as usize;
            if child_index <= index || child_index >= count {
                return Err(format!(
                    "message BOC cell {index} refers to cell {child_index} of {count}"
                ));
            }
            let child = built[child_index]
                .clone()
                .ok_or_else(|| format!("message BOC cell {child_index} missing"))?;
            depth = depth.max(child.repr_depth() + 1);
            *slot = Some(child);
        }
        if depth > MAX_FAST_DEPTH {
            return Ok(None);
        }
        let hash = match cell.stored {
            Some((hash, stored_depth)) => {
                if stored_depth != depth {
                    return Err(format!(
                        "message BOC cell {index} stores depth {stored_depth}, its children give {depth}"
                    ));
                }
                hash
            }
            None => *root_hash,
        };
        built[index] = Some(StoredCell::new_cell(cell, references, hash, depth));
    }
    Ok(built[0].take())
}

/// One cell as it lies in the BOC.
struct RawCell<'a> {
    descriptor: CellDescriptor,
    stored: Option<(HashBytes, u16)>,
    data: &'a [u8],
    refs: &'a [u8],
    ref_size: usize,
}

impl<'a> RawCell<'a> {
    /// Reads cell `index`; `None` when it is outside the stored form.
    fn read(bytes: &mut &'a [u8], index: usize, ref_size: usize) -> Result<Option<Self>, String> {
        let [d1, d2, ..] = **bytes else {
            return Err(format!("message BOC ends inside cell {index}"));
        };
        let descriptor = CellDescriptor::new([d1, d2]);
        if descriptor.is_absent() {
            return Err(format!("message BOC cell {index} is absent"));
        }
        // The root carries no stored hash (the key has it), every other cell does.
        if descriptor.is_exotic()
            || !descriptor.level_mask().is_empty()
            || descriptor.store_hashes() != (index > 0)
        {
            return Ok(None);
        }
        let ref_count = usize::from(descriptor.reference_count());
        if ref_count > 4 {
            return Err(format!(
                "message BOC cell {index} has {ref_count} references"
            ));
        }
        let hashes = if index > 0 { HASH_AND_DEPTH_LEN } else { 0 };
        let data_len = usize::from(descriptor.byte_len());
        let total = 2 + hashes + data_len + ref_count * ref_size;
        if bytes.len() < total {
            return Err(format!("message BOC ends inside cell {index}"));
        }
        let (cell, rest) = bytes.split_at(total);
        *bytes = rest;
        let stored = (index > 0).then(|| {
            let mut hash = HashBytes::ZERO;
            hash.0.copy_from_slice(&cell[2..34]);
            (hash, u16::from_be_bytes([cell[34], cell[35]]))
        });
        let data = &cell[2 + hashes..2 + hashes + data_len];
        if !descriptor.is_aligned() && data.last().is_none_or(|last| last & 0x7f == 0) {
            return Err(format!("message BOC cell {index} has no completion tag"));
        }
        Ok(Some(Self {
            descriptor,
            stored,
            data,
            refs: &cell[2 + hashes + data_len..],
            ref_size,
        }))
    }

    fn references(&self) -> impl Iterator<Item = u32> + '_ {
        self.refs
            .chunks_exact(self.ref_size)
            .map(|chunk| chunk.iter().fold(0u32, |acc, b| (acc << 8) | u32::from(*b)))
    }

    fn bit_len(&self) -> u16 {
        let len = self.data.len() as u16 * 8;
        match self.data.last() {
            Some(last) if !self.descriptor.is_aligned() => len - last.trailing_zeros() as u16 - 1,
            _ => len,
        }
    }
}

/// An ordinary level-0 cell read from the stored form: its hash and depth come with it.
struct StoredCell {
    hash: HashBytes,
    references: [Option<Cell>; 4],
    descriptor: CellDescriptor,
    bit_len: u16,
    depth: u16,
    /// Bytes of `data` written (the descriptor's byte length).
    data_len: u8,
    /// The first `data_len` bytes are the cell's data; the rest is never written nor read.
    data: MaybeUninit<[u8; 128]>,
}

impl StoredCell {
    /// The cell, built in its shared allocation: only its data bytes are copied, and no 128-byte buffer is
    /// zeroed or moved on the way.
    fn new_cell(
        raw: &RawCell<'_>,
        references: [Option<Cell>; 4],
        hash: HashBytes,
        depth: u16,
    ) -> Cell {
        let descriptor = CellDescriptor::new([
            raw.descriptor.d1 & !CellDescriptor::STORE_HASHES_MASK,
            raw.descriptor.d2,
        ]);
        // `RawCell::read` took exactly the descriptor's byte length, at most 128 ((255 + 1) / 2).
        let len = raw.data.len().min(128);
        debug_assert_eq!(len, usize::from(descriptor.byte_len()));
        let mut inner = Arc::<Self>::new_uninit();
        let cell = Arc::get_mut(&mut inner)
            .expect("a new allocation is unique")
            .as_mut_ptr();
        // SAFETY: `cell` points to the new, unique and properly aligned allocation. Every field but `data` is
        // written whole before `assume_init`; `data` is `MaybeUninit`, of which the first `len` (≤ 128) bytes
        // are copied from `raw.data` (at least `len` bytes long, and not overlapping a new allocation), and
        // `data()` reads no further than `data_len`, which is `len`.
        unsafe {
            addr_of_mut!((*cell).hash).write(hash);
            addr_of_mut!((*cell).references).write(references);
            addr_of_mut!((*cell).descriptor).write(descriptor);
            addr_of_mut!((*cell).bit_len).write(raw.bit_len());
            addr_of_mut!((*cell).depth).write(depth);
            addr_of_mut!((*cell).data_len).write(len as u8);
            addr_of_mut!((*cell).data)
                .cast::<u8>()
                .copy_from_nonoverlapping(raw.data.as_ptr(), len);
            Cell::from(inner.assume_init())
        }
    }
}

impl CellImpl for StoredCell {
    fn untrack(self: CellInner<Self>) -> Cell {
        Cell::from(self)
    }

    fn descriptor(&self) -> CellDescriptor {
        self.descriptor
    }

    fn data(&self) -> &[u8] {
        // SAFETY: `new_cell` initialised the first `data_len` bytes of `data` (at most 128 of its 128).
        unsafe {
            std::slice::from_raw_parts(self.data.as_ptr().cast::<u8>(), usize::from(self.data_len))
        }
    }

    fn bit_len(&self) -> u16 {
        self.bit_len
    }

    fn reference(&self, index: u8) -> Option<&DynCell> {
        self.references.get(usize::from(index))?.as_deref()
    }

    fn reference_cloned(&self, index: u8) -> Option<Cell> {
        self.references.get(usize::from(index))?.clone()
    }

    fn reference_repr_hash(&self, index: u8) -> Option<HashBytes> {
        Some(*self.reference(index)?.repr_hash())
    }

    fn virtualize(&self) -> &DynCell {
        // A level-0 cell looks the same at every level.
        self
    }

    fn hash(&self, _level: u8) -> &HashBytes {
        &self.hash
    }

    fn depth(&self, _level: u8) -> u16 {
        self.depth
    }
}

#[cfg(test)]
mod tests {
    use tycho_types::cell::CellBuilder;

    use super::*;

    fn leaf(seed: u32, bits: u16) -> Cell {
        let mut b = CellBuilder::new();
        let mut left = bits;
        let mut word = seed;
        while left >= 32 {
            b.store_u32(word).unwrap();
            word = word.wrapping_mul(0x9e37_79b9).wrapping_add(1);
            left -= 32;
        }
        if left > 0 {
            b.store_uint(u64::from(word) & ((1 << left) - 1), left)
                .unwrap();
        }
        b.build().unwrap()
    }

    fn node(seed: u32, bits: u16, children: &[Cell]) -> Cell {
        let mut b = CellBuilder::new();
        b.store_slice(leaf(seed, bits).as_slice().unwrap()).unwrap();
        for child in children {
            b.store_reference(child.clone()).unwrap();
        }
        b.build().unwrap()
    }

    /// Trees the stored form covers: a lone cell, a message-like pair, a shared child, four references,
    /// unaligned and empty data, a chain, and a tree large enough for the encoder's map.
    fn covered_trees() -> Vec<Cell> {
        let body = leaf(7, 960);
        let shared = leaf(3, 13);
        let mut wide = Vec::new();
        for i in 0..40u32 {
            wide.push(node(i, 100 + i as u16, &[leaf(i + 1000, (i % 9) as u16)]));
        }
        let mut layer: Vec<Cell> = wide.chunks(4).map(|c| node(5, 7, c)).collect();
        while layer.len() > 1 {
            layer = layer.chunks(4).map(|c| node(6, 1, c)).collect();
        }
        let mut chain = leaf(1, 1);
        for i in 0..MAX_FAST_DEPTH as u32 {
            chain = node(i, 9, &[chain]);
        }
        vec![
            leaf(1, 1023),
            leaf(2, 0),
            node(1, 600, std::slice::from_ref(&body)),
            node(
                2,
                3,
                &[shared.clone(), shared.clone(), node(9, 8, &[shared])],
            ),
            node(3, 1000, &[leaf(1, 1), leaf(2, 2), leaf(3, 3), body]),
            layer.pop().unwrap(),
            chain,
        ]
    }

    /// Both trees have the same cells: data, lengths, descriptors, hashes and depths, all the way down.
    fn assert_same(a: &DynCell, b: &DynCell) {
        let (da, db) = (a.descriptor(), b.descriptor());
        assert_eq!((da.d1, da.d2), (db.d1, db.d2));
        assert_eq!(a.bit_len(), b.bit_len());
        assert_eq!(a.data(), b.data());
        assert_eq!(a.repr_hash(), b.repr_hash());
        assert_eq!(a.repr_depth(), b.repr_depth());
        assert_eq!(a.reference_count(), b.reference_count());
        for i in 0..a.reference_count() {
            assert_eq!(a.reference_repr_hash(i), b.reference_repr_hash(i));
            assert_same(a.reference(i).unwrap(), b.reference(i).unwrap());
        }
    }

    fn stored(cell: &Cell) -> Vec<u8> {
        let mut out = Vec::new();
        encode(cell.as_ref(), &mut out);
        out
    }

    #[test]
    fn covered_trees_come_back_without_hashing_and_stay_standard_bocs() {
        for tree in covered_trees() {
            let bytes = stored(&tree);
            let fast = decode_hashed(&bytes, tree.repr_hash())
                .unwrap()
                .expect("in the stored form");
            assert_same(tree.as_ref(), fast.as_ref());
            // A standard reader computes the same hashes.
            let standard = Boc::decode(&bytes).unwrap();
            assert_eq!(standard.repr_hash(), tree.repr_hash());
            // Written back by the standard encoder, the read tree is the original's BOC: no descriptor
            // keeps the stored-hash bit.
            assert_eq!(Boc::encode(&fast), Boc::encode(&tree));
            let mut again = Vec::new();
            encode(fast.as_ref(), &mut again);
            assert_eq!(again, bytes);
        }
    }

    #[test]
    fn a_stored_form_carries_each_cell_once() {
        let shared = leaf(3, 13);
        let tree = node(
            2,
            3,
            &[shared.clone(), shared.clone(), node(9, 8, &[shared])],
        );
        let bytes = stored(&tree);
        assert_eq!(bytes[6], 3, "three distinct cells");
        assert!(bytes.len() < Boc::encode(&tree).len() + 3 * HASH_AND_DEPTH_LEN);
    }

    #[test]
    fn trees_outside_the_form_are_plain_bocs_checked_against_the_key() {
        let mut library = CellBuilder::new();
        library.set_exotic(true);
        library.store_u8(2).unwrap();
        library.store_u256(&HashBytes([5; 32])).unwrap();
        let library = library.build().unwrap();
        let mut deep = leaf(1, 1);
        for i in 0..=MAX_FAST_DEPTH as u32 {
            deep = node(i, 9, &[deep]);
        }
        for tree in [node(1, 8, &[library]), deep] {
            let bytes = stored(&tree);
            assert_eq!(bytes, Boc::encode(&tree));
            assert_eq!(decode_hashed(&bytes, tree.repr_hash()).unwrap(), None);
            assert_same(
                tree.as_ref(),
                decode(&bytes, tree.repr_hash()).unwrap().as_ref(),
            );
        }
        // A data dir written before the stored form: plain BOCs, decoded in full.
        let old = node(1, 600, &[leaf(7, 960)]);
        let bytes = Boc::encode(&old);
        assert_eq!(decode_hashed(&bytes, old.repr_hash()).unwrap(), None);
        assert_same(
            old.as_ref(),
            decode(&bytes, old.repr_hash()).unwrap().as_ref(),
        );
        let error = decode(&bytes, &HashBytes([1; 32])).unwrap_err();
        assert!(error.contains("its key says"), "{error}");
    }

    #[test]
    fn a_stored_depth_that_disagrees_with_the_tree_is_not_trusted() {
        let tree = node(1, 600, &[leaf(7, 960)]);
        let mut bytes = stored(&tree);
        // Header 4 + 2 + 3 × 1 + 1 + root index 1 = 11; root: 2 + data + 1 ref; then the child's
        // descriptor (2) and hash (32), then its depth.
        let depth_at = 11 + 2 + tree.data().len() + 1 + 2 + 32;
        assert_eq!(&bytes[depth_at..depth_at + 2], &[0, 0]);
        bytes[depth_at + 1] = 1;
        let error = decode_hashed(&bytes, tree.repr_hash()).unwrap_err();
        assert!(error.contains("depth"), "{error}");
        // The cells themselves are whole: hashed in full, they are the message of the key, and only that.
        assert_same(
            tree.as_ref(),
            decode(&bytes, tree.repr_hash()).unwrap().as_ref(),
        );
        let error = decode(&bytes, &HashBytes([1; 32])).unwrap_err();
        assert!(error.contains("its key says"), "{error}");
        // Cut short, it is neither form.
        let error = decode(&bytes[..bytes.len() - 1], tree.repr_hash()).unwrap_err();
        assert!(error.contains("as a plain BOC"), "{error}");
    }

    #[test]
    fn no_corruption_of_a_stored_form_panics() {
        for tree in covered_trees().into_iter().take(5) {
            let bytes = stored(&tree);
            for len in 0..bytes.len() {
                let _ = decode(&bytes[..len], tree.repr_hash());
            }
            for at in 0..bytes.len() {
                for flip in [0x01u8, 0x10, 0x80, 0xff] {
                    let mut bad = bytes.clone();
                    bad[at] ^= flip;
                    let _ = decode(&bad, tree.repr_hash());
                }
            }
        }
    }
}
