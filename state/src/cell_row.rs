//! The body of a `cells` row (state.md §1.2, without stock's index prefix):
//! `d1 d2 ‖ bit_len u16 LE ‖ repr depth u16 LE ‖ data ‖ (hash 32 ‖ depth u16 LE) per lower level ‖ child repr
//! hashes (32 each)`. The repr hash is the row's key. A pruned branch stores no lower levels: they are in its
//! data.

use tycho_types::cell::{CellDescriptor, DynCell, HashBytes, LevelMask};

/// The longest body: descriptor, bit length, depth, 128 data bytes, three lower levels, four children.
pub(crate) const MAX_BODY_LEN: usize = 6 + 128 + 3 * (32 + 2) + 4 * 32;

/// A decoded row: everything a cell needs but its children's cells.
pub(crate) struct CellRow {
    pub(crate) descriptor: CellDescriptor,
    pub(crate) bit_len: u16,
    pub(crate) data: Box<[u8]>,
    /// (hash, depth) by hash index; the last is the repr hash's. A pruned branch has only the repr entry.
    pub(crate) hashes: Box<[(HashBytes, u16)]>,
    pub(crate) children: Vec<HashBytes>,
}

/// Appends the body of `cell` to `out`.
pub(crate) fn encode(cell: &DynCell, out: &mut Vec<u8>) {
    let descriptor = cell.descriptor();
    out.extend_from_slice(&[descriptor.d1, descriptor.d2]);
    out.extend_from_slice(&cell.bit_len().to_le_bytes());
    out.extend_from_slice(&cell.repr_depth().to_le_bytes());
    out.extend_from_slice(cell.data());
    if !descriptor.is_pruned_branch() {
        let mask = descriptor.level_mask();
        for level in mask.into_iter().take(mask.level() as usize) {
            out.extend_from_slice(cell.hash(level).as_array());
            out.extend_from_slice(&cell.depth(level).to_le_bytes());
        }
    }
    for i in 0..descriptor.reference_count() {
        // A cell's child hashes are known without loading the child.
        let hash = cell.reference_repr_hash(i).unwrap_or_default();
        out.extend_from_slice(hash.as_array());
    }
}

/// The child repr hashes of a body (what the remove walk and the checker need), without decoding the rest.
pub(crate) fn children(body: &[u8]) -> Result<Vec<HashBytes>, String> {
    let layout = Layout::of(body)?;
    Ok(body[layout.children..]
        .chunks_exact(32)
        .map(|c| HashBytes(c.try_into().expect("chunks of 32")))
        .collect())
}

/// The parts of a body a BOC writes: the descriptor, the data bytes and the child repr hashes (32 bytes
/// each, concatenated).
pub(crate) fn boc_parts(body: &[u8]) -> Result<(CellDescriptor, &[u8], &[u8]), String> {
    let layout = Layout::of(body)?;
    Ok((
        layout.descriptor,
        &body[6..layout.lower],
        &body[layout.children..],
    ))
}

/// Decodes a body stored under `repr_hash`.
pub(crate) fn decode(repr_hash: &HashBytes, body: &[u8]) -> Result<CellRow, String> {
    let layout = Layout::of(body)?;
    let descriptor = layout.descriptor;
    let bit_len = u16::from_le_bytes([body[2], body[3]]);
    let repr_depth = u16::from_le_bytes([body[4], body[5]]);
    let data: Box<[u8]> = body[6..layout.lower].into();
    let mut hashes = Vec::with_capacity(layout.lower_levels + 1);
    for entry in body[layout.lower..layout.children].chunks_exact(34) {
        let hash = HashBytes(entry[..32].try_into().expect("32 bytes"));
        hashes.push((hash, u16::from_le_bytes([entry[32], entry[33]])));
    }
    hashes.push((*repr_hash, repr_depth));
    let children = body[layout.children..]
        .chunks_exact(32)
        .map(|c| HashBytes(c.try_into().expect("chunks of 32")))
        .collect();
    if descriptor.is_pruned_branch() {
        let level = descriptor.level_mask().level() as usize;
        if data.len() != 2 + level * 34 {
            return Err(format!(
                "a pruned branch of level {level} with {} data bytes",
                data.len()
            ));
        }
    }
    Ok(CellRow {
        descriptor,
        bit_len,
        data,
        hashes: hashes.into_boxed_slice(),
        children,
    })
}

/// (hash, depth) at `level`, as tycho-types defines them, of a decoded row's parts (a pruned branch keeps
/// its lower ones in its data).
pub(crate) fn level_descr<'a>(
    descriptor: CellDescriptor,
    data: &'a [u8],
    hashes: &'a [(HashBytes, u16)],
    level: u8,
) -> (&'a HashBytes, u16) {
    let index = descriptor.level_mask().hash_index(level) as usize;
    if descriptor.is_pruned_branch() {
        let level = descriptor.level_mask().level() as usize;
        if index < level {
            let hash = &data[2 + index * 32..2 + index * 32 + 32];
            let at = 2 + level * 32 + index * 2;
            let depth = u16::from_be_bytes([data[at], data[at + 1]]);
            return (HashBytes::wrap(hash.try_into().expect("32 bytes")), depth);
        }
        let (hash, depth) = hashes.last().expect("the repr entry");
        return (hash, *depth);
    }
    let (hash, depth) = hashes.get(index).or(hashes.last()).expect("the repr entry");
    (hash, *depth)
}

/// Where the parts of a body start, checked against its length.
struct Layout {
    descriptor: CellDescriptor,
    lower_levels: usize,
    lower: usize,
    children: usize,
}

impl Layout {
    fn of(body: &[u8]) -> Result<Self, String> {
        let head = body
            .get(..6)
            .ok_or_else(|| format!("a body of {} bytes has no header", body.len()))?;
        let descriptor = CellDescriptor::new([head[0], head[1]]);
        if descriptor.is_absent() {
            return Err("an absent cell is stored".into());
        }
        let refs = descriptor.reference_count() as usize;
        if refs > 4 {
            return Err(format!("{refs} references"));
        }
        let bit_len = u16::from_le_bytes([head[2], head[3]]);
        let byte_len = descriptor.byte_len() as usize;
        if byte_len > 128 || (bit_len as usize).div_ceil(8) != byte_len {
            return Err(format!(
                "{bit_len} data bits with a descriptor of {byte_len} bytes"
            ));
        }
        let mask: LevelMask = descriptor.level_mask();
        let lower_levels = if descriptor.is_pruned_branch() {
            0
        } else {
            mask.level() as usize
        };
        let lower = 6 + byte_len;
        let children = lower + lower_levels * 34;
        let expected = children + refs * 32;
        if body.len() != expected {
            return Err(format!(
                "a body of {} bytes, its header says {expected}",
                body.len()
            ));
        }
        Ok(Self {
            descriptor,
            lower_levels,
            lower,
            children,
        })
    }
}
