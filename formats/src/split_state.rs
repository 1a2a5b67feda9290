//! Split persistent shard states (rpc.md §7.7–§7.8), as the reference writes them.
//!
//! A shard state is split at the accounts dictionary (`ShardAccounts`, reference 1 of the state root): the
//! dictionary subtrees under every shard prefix `split_depth` bits below the block's shard become **parts**,
//! each a plain BOC whose root is an existing node of the dictionary; an empty prefix has no part. The
//! **root** file is a BOC of the rest of the state in which every part root is an *absent cell* (BOC
//! descriptor `0x17`: no data, no references, only the cell's hash and depth), so the root's hash is the
//! state's. A checker rebuilds the root with a pruned branch in place of each absent cell (its level-0 hash
//! is the absent cell's hash), requires that hash to be the block's new state hash, and requires the set of
//! absent hashes to equal the set of part root hashes: the parts are bound to the state by hash, not by name.
//!
//! Both files are written with an index, 4-byte references, no CRC, the root first and every reference
//! pointing forward.

use std::collections::{HashMap, HashSet};

use tycho_types::boc::Boc;
use tycho_types::cell::{Cell, CellBuilder, CellDescriptor, CellSlice, HashBytes, LevelMask};
use tycho_types::models::ShardIdent;

/// A split state that cannot be built or fails its check.
#[derive(Debug, thiserror::Error)]
#[error("split state: {0}")]
pub struct SplitStateError(pub String);

fn err<T>(reason: impl Into<String>) -> Result<T, SplitStateError> {
    Err(SplitStateError(reason.into()))
}

/// Deepest split the rules allow (§7.8).
pub const MAX_SPLIT_DEPTH: u8 = 6;

/// One part of a split state.
#[derive(Debug, Clone)]
pub struct SplitPart {
    /// Shard prefix of the part (with its tag bit), `split_depth` bits below the block's shard.
    pub prefix: u64,
    /// The dictionary node holding every account under that prefix.
    pub root: Cell,
}

/// The parts of the state `state_root` of a block in `shard`, split `split_depth` bits below the shard,
/// sorted by prefix. Empty when the state has no accounts (the state is then not split).
pub fn split_accounts(
    state_root: &Cell,
    shard: &ShardIdent,
    split_depth: u8,
) -> Result<Vec<SplitPart>, SplitStateError> {
    if shard.is_masterchain() {
        return err("masterchain states are never split");
    }
    if !(1..=MAX_SPLIT_DEPTH).contains(&split_depth) {
        return err(format!(
            "split depth {split_depth} is out of 1..={MAX_SPLIT_DEPTH}"
        ));
    }
    let depth = shard.prefix_len() + u16::from(split_depth);
    if depth > ShardIdent::MAX_SPLIT_DEPTH as u16 {
        return err(format!("prefix depth {depth} exceeds the deepest shard"));
    }
    let accounts = state_root
        .reference_cloned(1)
        .ok_or_else(|| SplitStateError("the state root has no accounts reference".into()))?;
    let mut slice = slice_of(&accounts)?;
    if !slice.load_bit().map_err(cell_error)? {
        return Ok(Vec::new());
    }
    let dict_root = slice
        .load_reference_cloned()
        .map_err(|e| SplitStateError(format!("the accounts dictionary root: {e}")))?;
    let mut parts = Vec::new();
    walk(dict_root, 256, 0, 0, depth, &mut parts)?;
    for part in &parts {
        let Some(part_shard) = ShardIdent::new(shard.workchain(), part.prefix) else {
            return err(format!("part prefix {:016x} is not a shard", part.prefix));
        };
        if !shard.is_ancestor_of(&part_shard) {
            return err(format!(
                "accounts under {:016x} are outside the block's shard {shard}",
                part.prefix
            ));
        }
    }
    parts.sort_by_key(|p| p.prefix);
    Ok(parts)
}

/// Collects the nodes that hold the keys under each `depth`-bit prefix: `bits` (left-aligned, `len` bits)
/// are the key bits above `cell`, `key_len` the key bits the cell's subtree still spans.
fn walk(
    cell: Cell,
    key_len: u16,
    bits: u64,
    len: u16,
    depth: u16,
    out: &mut Vec<SplitPart>,
) -> Result<(), SplitStateError> {
    let mut slice = slice_of(&cell)?;
    let label = read_label(&mut slice, key_len)?;
    let need = depth - len;
    if label.len >= need {
        let bits = bits | label.top(need) >> len;
        let tag = 1u64 << (63 - depth);
        out.push(SplitPart {
            prefix: bits | tag,
            root: cell,
        });
        return Ok(());
    }
    // A fork below the label: the left child continues with bit 0, the right with bit 1.
    if key_len <= label.len {
        return err("a dictionary leaf above the split depth");
    }
    let bits = bits | label.top(label.len) >> len;
    let len = len + label.len + 1;
    let key_len = key_len - label.len - 1;
    for (i, bit) in [(0u8, 0u64), (1, 1)] {
        let child = cell
            .reference_cloned(i)
            .ok_or_else(|| SplitStateError("a dictionary fork without two children".into()))?;
        walk(child, key_len, bits | bit << (64 - len), len, depth, out)?;
    }
    Ok(())
}

/// A dictionary edge label: its length and its first (at most 64) bits, left-aligned.
struct Label {
    len: u16,
    first: u64,
}

impl Label {
    /// The first `n` bits (n ≤ len, n ≤ 64), left-aligned.
    fn top(&self, n: u16) -> u64 {
        match n {
            0 => 0,
            n if n >= 64 => self.first,
            n => self.first & !(u64::MAX >> n),
        }
    }
}

/// `HmLabel ~l n`: hml_short$0 (unary length, bits), hml_long$10 (length in ⌈log2(n+1)⌉ bits, bits),
/// hml_same$11 (bit, length).
fn read_label(slice: &mut CellSlice<'_>, key_len: u16) -> Result<Label, SplitStateError> {
    let len_bits = 16 - key_len.leading_zeros() as u16;
    let bad = |e: tycho_types::error::Error| SplitStateError(format!("a dictionary label: {e}"));
    let read_bits = |slice: &mut CellSlice<'_>, len: u16| -> Result<Label, SplitStateError> {
        let mut first = 0u64;
        for i in 0..len {
            let bit = slice.load_bit().map_err(bad)?;
            if i < 64 && bit {
                first |= 1 << (63 - i);
            }
        }
        Ok(Label { len, first })
    };
    let label = if !slice.load_bit().map_err(bad)? {
        let mut len = 0u16;
        while slice.load_bit().map_err(bad)? {
            len += 1;
        }
        read_bits(slice, len)?
    } else if !slice.load_bit().map_err(bad)? {
        let len = slice.load_uint(len_bits).map_err(bad)? as u16;
        read_bits(slice, len)?
    } else {
        let bit = slice.load_bit().map_err(bad)?;
        let len = slice.load_uint(len_bits).map_err(bad)? as u16;
        Label {
            len,
            first: if bit { u64::MAX } else { 0 },
        }
    };
    if label.len > key_len {
        return err(format!(
            "a dictionary label of {} bits in a {key_len}-bit key",
            label.len
        ));
    }
    Ok(label)
}

fn slice_of(cell: &Cell) -> Result<CellSlice<'_>, SplitStateError> {
    cell.as_slice()
        .map_err(|e| SplitStateError(format!("a state cell: {e}")))
}

fn cell_error(e: tycho_types::error::Error) -> SplitStateError {
    SplitStateError(format!("a state cell: {e}"))
}

/// BOC magic of the generic format.
const BOC_MAGIC: [u8; 4] = [0xb5, 0xee, 0x9c, 0x72];
/// Bytes per reference and per count in the files written here.
const REF_SIZE: usize = 4;
/// Descriptor byte of an absent cell of level 0: store-hashes flag and reference count 7.
const ABSENT_D1: u8 = 0x17;

/// The root file of a split state: the state under `state_root` with each part root replaced by an absent
/// cell. Every part root must occur in the state.
pub fn encode_root(state_root: &Cell, parts: &[SplitPart]) -> Result<Vec<u8>, SplitStateError> {
    let absent: HashSet<HashBytes> = parts.iter().map(|p| *p.root.repr_hash()).collect();
    for part in parts {
        if part.root.descriptor().level_mask() != LevelMask::EMPTY {
            return err("a part root with a non-zero level");
        }
    }
    let (order, found) = order_cells(state_root, &absent);
    if found != absent.len() {
        return err(format!(
            "{} of {} part roots are not in the state",
            absent.len() - found,
            absent.len()
        ));
    }
    Ok(write_boc(&order, &absent))
}

/// A part file: a plain BOC of the part's subtree.
pub fn encode_part(part: &SplitPart) -> Vec<u8> {
    let (order, _) = order_cells(&part.root, &HashSet::new());
    write_boc(&order, &HashSet::new())
}

/// Unique cells from `root`, parents before children (reverse post-order), not descending into `absent`
/// cells; and how many of `absent` were met.
fn order_cells(root: &Cell, absent: &HashSet<HashBytes>) -> (Vec<Cell>, usize) {
    let mut seen = HashSet::new();
    let mut post = Vec::new();
    let mut found = 0;
    // (cell, next reference to visit)
    let mut stack: Vec<(Cell, u8)> = Vec::new();
    seen.insert(*root.repr_hash());
    stack.push((root.clone(), 0));
    if absent.contains(root.repr_hash()) {
        found += 1;
        stack.pop();
        post.push(root.clone());
    }
    while let Some((cell, next)) = stack.last_mut() {
        let refs = if absent.contains(cell.repr_hash()) {
            0
        } else {
            cell.reference_count()
        };
        if *next < refs {
            let child = cell.reference_cloned(*next).expect("reference in range");
            *next += 1;
            if seen.insert(*child.repr_hash()) {
                if absent.contains(child.repr_hash()) {
                    found += 1;
                    post.push(child);
                } else {
                    stack.push((child, 0));
                }
            }
        } else {
            let (cell, _) = stack.pop().expect("non-empty stack");
            post.push(cell);
        }
    }
    post.reverse();
    (post, found)
}

fn write_boc(order: &[Cell], absent: &HashSet<HashBytes>) -> Vec<u8> {
    let index: HashMap<HashBytes, u32> = order
        .iter()
        .enumerate()
        .map(|(i, c)| (*c.repr_hash(), i as u32))
        .collect();
    let mut cells = Vec::new();
    let mut ends = Vec::with_capacity(order.len());
    let mut absent_count = 0u32;
    for cell in order {
        if absent.contains(cell.repr_hash()) {
            absent_count += 1;
            cells.push(ABSENT_D1);
            cells.extend_from_slice(cell.repr_hash().as_slice());
            cells.extend_from_slice(&cell.repr_depth().to_be_bytes());
        } else {
            let d = cell.descriptor();
            cells.push(d.d1 & !CellDescriptor::STORE_HASHES_MASK);
            cells.push(d.d2);
            cells.extend_from_slice(cell.data());
            for child in cell.references() {
                cells.extend_from_slice(&index[child.repr_hash()].to_be_bytes());
            }
        }
        ends.push(cells.len() as u64);
    }
    let total = cells.len() as u64;
    let offset_size = (((64 - total.leading_zeros()) as usize).div_ceil(8)).clamp(1, 8);
    let mut out = Vec::with_capacity(22 + offset_size * (1 + order.len()) + cells.len());
    out.extend_from_slice(&BOC_MAGIC);
    out.push(0x80 | REF_SIZE as u8);
    out.push(offset_size as u8);
    out.extend_from_slice(&(order.len() as u32).to_be_bytes());
    out.extend_from_slice(&1u32.to_be_bytes());
    out.extend_from_slice(&absent_count.to_be_bytes());
    out.extend_from_slice(&total.to_be_bytes()[8 - offset_size..]);
    out.extend_from_slice(&0u32.to_be_bytes());
    for end in ends {
        out.extend_from_slice(&end.to_be_bytes()[8 - offset_size..]);
    }
    out.extend_from_slice(&cells);
    out
}

/// The root file decoded: the state tree with a pruned branch for each absent cell.
#[derive(Debug)]
pub struct SplitRoot {
    /// The root; its level-0 hash is the state's hash.
    pub root: Cell,
    /// Hashes of the absent cells, in file order.
    pub absent: Vec<HashBytes>,
}

impl SplitRoot {
    /// The state's hash (the level-0 hash of the rebuilt root).
    pub fn state_hash(&self) -> HashBytes {
        *self.root.hash(0)
    }
}

/// Decodes a root file (the generic BOC format with absent cells; one root; an optional index; an optional
/// CRC-32C, checked).
pub fn decode_root(bytes: &[u8]) -> Result<SplitRoot, SplitStateError> {
    let mut r = Reader { bytes, pos: 0 };
    if r.take(4)? != BOC_MAGIC {
        return err("the root file is not a generic BOC");
    }
    let flags = r.byte()?;
    let (has_index, has_crc) = (flags & 0x80 != 0, flags & 0x40 != 0);
    let ref_size = usize::from(flags & 0x07);
    if !(1..=4).contains(&ref_size) {
        return err(format!("reference size {ref_size}"));
    }
    let offset_size = usize::from(r.byte()?);
    if !(1..=8).contains(&offset_size) {
        return err(format!("offset size {offset_size}"));
    }
    let cell_count = r.uint(ref_size)? as usize;
    let roots = r.uint(ref_size)?;
    let _absent_count = r.uint(ref_size)?;
    let total = r.uint(offset_size)?;
    if roots != 1 {
        return err(format!("{roots} roots (one expected)"));
    }
    if r.uint(ref_size)? != 0 {
        return err("the root is not the first cell");
    }
    // Every cell takes at least one byte: a count beyond the input is a lie, caught before allocating.
    if cell_count == 0 || cell_count > bytes.len() || total > bytes.len() as u64 {
        return err(format!(
            "{cell_count} cells of {total} bytes in a {}-byte file",
            bytes.len()
        ));
    }
    if has_index {
        r.take(cell_count * offset_size)?;
    }
    let cells_start = r.pos;
    struct Raw<'a> {
        d1: u8,
        d2: u8,
        data: &'a [u8],
        refs: Vec<usize>,
        absent: Option<(HashBytes, u16)>,
    }
    let mut raw = Vec::with_capacity(cell_count);
    for i in 0..cell_count {
        let d1 = r.byte()?;
        let refs_count = usize::from(d1 & 0x07);
        if refs_count == 7 && d1 & 0x10 != 0 {
            let level = LevelMask::new(d1 >> 5);
            if level != LevelMask::EMPTY {
                return err(format!("absent cell {i} has a non-zero level"));
            }
            let hash = HashBytes::from_slice(r.take(32)?);
            let depth = u16::from_be_bytes(r.take(2)?.try_into().expect("two bytes"));
            raw.push(Raw {
                d1,
                d2: 0,
                data: &[],
                refs: Vec::new(),
                absent: Some((hash, depth)),
            });
            continue;
        }
        if refs_count > 4 {
            return err(format!("cell {i} has {refs_count} references"));
        }
        let d2 = r.byte()?;
        if d1 & 0x10 != 0 {
            let hashes = usize::from(LevelMask::new(d1 >> 5).level()) + 1;
            r.take(hashes * 34)?;
        }
        let data = r.take(usize::from(d2).div_ceil(2))?;
        let mut refs = Vec::with_capacity(refs_count);
        for _ in 0..refs_count {
            let child = r.uint(ref_size)? as usize;
            if child <= i || child >= cell_count {
                return err(format!("cell {i} refers to cell {child}"));
            }
            refs.push(child);
        }
        raw.push(Raw {
            d1,
            d2,
            data,
            refs,
            absent: None,
        });
    }
    if (r.pos - cells_start) as u64 != total {
        return err(format!(
            "the cells take {} bytes, the header says {total}",
            r.pos - cells_start
        ));
    }
    if has_crc {
        let expected = u32::from_le_bytes(r.take(4)?.try_into().expect("four bytes"));
        if crc32c::crc32c(&bytes[..r.pos - 4]) != expected {
            return err("CRC mismatch");
        }
    }
    if r.pos != bytes.len() {
        return err(format!("{} bytes after the BOC", bytes.len() - r.pos));
    }

    let mut built: Vec<Option<Cell>> = vec![None; cell_count];
    let mut absent = Vec::new();
    for i in (0..cell_count).rev() {
        let cell = &raw[i];
        let mut builder = CellBuilder::new();
        if let Some((hash, depth)) = cell.absent {
            absent.push(hash);
            // A pruned branch of level 1 carrying the hash and depth: its level-0 hash is `hash`.
            builder.set_exotic(true);
            let mut data = Vec::with_capacity(36);
            data.extend_from_slice(&[1, 1]);
            data.extend_from_slice(hash.as_slice());
            data.extend_from_slice(&depth.to_be_bytes());
            builder
                .store_raw(&data, 288)
                .map_err(|e| SplitStateError(format!("absent cell {i}: {e}")))?;
        } else {
            let bits = if cell.d2 % 2 == 0 {
                cell.data.len() as u16 * 8
            } else {
                match cell.data.last() {
                    Some(&last) if last != 0 => {
                        cell.data.len() as u16 * 8 - last.trailing_zeros() as u16 - 1
                    }
                    _ => return err(format!("cell {i} has no completion tag")),
                }
            };
            builder.set_exotic(cell.d1 & 0x08 != 0);
            builder
                .store_raw(cell.data, bits)
                .map_err(|e| SplitStateError(format!("cell {i}: {e}")))?;
            for &child in &cell.refs {
                let child = built[child]
                    .clone()
                    .ok_or_else(|| SplitStateError(format!("cell {i}: a reference backwards")))?;
                builder
                    .store_reference(child)
                    .map_err(|e| SplitStateError(format!("cell {i}: {e}")))?;
            }
        }
        let cell = builder
            .build()
            .map_err(|e| SplitStateError(format!("cell {i}: {e}")))?;
        built[i] = Some(cell);
    }
    absent.reverse();
    let root = built[0].take().expect("cell 0 built");
    Ok(SplitRoot { root, absent })
}

/// Checks a split state against `expected` (the block's new state hash): the root file's state hash, no
/// absent hash twice, and each part (a plain BOC) rooted at one absent hash, every absent hash covered.
/// `parts` are (prefix, decompressed file) in any order.
pub fn check_split_state(
    root_file: &[u8],
    parts: &[(u64, &[u8])],
    expected: &HashBytes,
) -> Result<(), SplitStateError> {
    let root = decode_root(root_file)?;
    if root.state_hash() != *expected {
        return err(format!(
            "the root file is of state {}, the block's new state is {expected}",
            root.state_hash()
        ));
    }
    let mut absent = HashSet::new();
    for hash in &root.absent {
        if !absent.insert(*hash) {
            return err(format!("absent cell {hash} appears twice"));
        }
    }
    let mut covered = HashSet::new();
    for (prefix, bytes) in parts {
        let cell = Boc::decode(bytes)
            .map_err(|e| SplitStateError(format!("part {prefix:016x} is not a BOC: {e}")))?;
        let hash = *cell.repr_hash();
        if !absent.contains(&hash) {
            return err(format!(
                "part {prefix:016x} has root {hash}, which the root file does not leave out"
            ));
        }
        if !covered.insert(hash) {
            return err(format!("part {prefix:016x} repeats root {hash}"));
        }
    }
    if covered.len() != absent.len() {
        return err(format!(
            "the root file leaves out {} subtrees, {} parts given",
            absent.len(),
            covered.len()
        ));
    }
    Ok(())
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], SplitStateError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&end| end <= self.bytes.len())
            .ok_or_else(|| SplitStateError(format!("the root file ends at byte {}", self.pos)))?;
        let out = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    fn byte(&mut self) -> Result<u8, SplitStateError> {
        Ok(self.take(1)?[0])
    }

    fn uint(&mut self, n: usize) -> Result<u64, SplitStateError> {
        Ok(self
            .take(n)?
            .iter()
            .fold(0u64, |acc, &b| acc << 8 | u64::from(b)))
    }
}

#[cfg(test)]
mod tests;
