use tycho_types::cell::{Cell, CellBuilder, HashBytes};
use tycho_types::dict::Dict;
use tycho_types::models::ShardIdent;

use super::*;

/// A state-shaped tree: a root whose reference 1 is `accounts$1 ^dict` over `keys`.
fn state_with(keys: &[[u8; 32]]) -> Cell {
    let mut dict = Dict::<HashBytes, u32>::new();
    for (i, key) in keys.iter().enumerate() {
        dict.set(HashBytes(*key), i as u32).unwrap();
    }
    let mut accounts = CellBuilder::new();
    match dict.root() {
        Some(root) => {
            accounts.store_bit_one().unwrap();
            accounts.store_reference(root.clone()).unwrap();
        }
        None => accounts.store_bit_zero().unwrap(),
    }
    accounts.store_u32(0xabcd).unwrap();
    let mut queue = CellBuilder::new();
    queue.store_u64(42).unwrap();
    let mut root = CellBuilder::new();
    root.store_u32(0x9023afe2).unwrap();
    root.store_reference(queue.build().unwrap()).unwrap();
    root.store_reference(accounts.build().unwrap()).unwrap();
    root.build().unwrap()
}

fn key(first: u8, n: u8) -> [u8; 32] {
    let mut k = [n; 32];
    k[0] = first;
    k
}

fn full() -> ShardIdent {
    ShardIdent::new_full(0)
}

fn files(state: &Cell, parts: &[SplitPart]) -> (Vec<u8>, Vec<(u64, Vec<u8>)>) {
    let root = encode_root(state, parts).unwrap();
    let parts = parts.iter().map(|p| (p.prefix, encode_part(p))).collect();
    (root, parts)
}

fn check(
    root: &[u8],
    parts: &[(u64, Vec<u8>)],
    expected: &HashBytes,
) -> Result<(), SplitStateError> {
    let parts: Vec<(u64, &[u8])> = parts.iter().map(|(p, b)| (*p, b.as_slice())).collect();
    check_split_state(root, &parts, expected)
}

#[test]
fn parts_follow_the_key_prefixes_and_check_against_the_state_hash() {
    // Keys under 00, 01 (two), 11; nothing under 10.
    let keys = [key(0x10, 1), key(0x50, 2), key(0x60, 3), key(0xf0, 4)];
    let state = state_with(&keys);
    let parts = split_accounts(&state, &full(), 2).unwrap();
    let prefixes: Vec<u64> = parts.iter().map(|p| p.prefix).collect();
    assert_eq!(
        prefixes,
        [
            0x2000_0000_0000_0000,
            0x6000_0000_0000_0000,
            0xe000_0000_0000_0000
        ]
    );
    regolith_checks(&state, &parts);
}

fn regolith_checks(state: &Cell, parts: &[SplitPart]) {
    let (root, files) = files(state, parts);
    let hash = *state.repr_hash();
    check(&root, &files, &hash).unwrap();
    // The root file alone is smaller than the state and leaves out exactly the parts.
    let decoded = decode_root(&root).unwrap();
    assert_eq!(decoded.state_hash(), hash);
    assert_eq!(decoded.absent.len(), parts.len());
    // Any order of the parts is fine; a missing one, a repeated one, a foreign one or a flipped byte is not.
    let mut reversed = files.clone();
    reversed.reverse();
    check(&root, &reversed, &hash).unwrap();
    let missing = &files[1..];
    assert!(check(&root, missing, &hash)
        .unwrap_err()
        .0
        .contains("leaves out"));
    let mut repeated = files.clone();
    repeated.push(files[0].clone());
    assert!(check(&root, &repeated, &hash).is_err());
    let other = state_with(&[key(0x11, 9)]);
    assert!(check(&root, &files, other.repr_hash())
        .unwrap_err()
        .0
        .contains("new state"));
    for i in 0..files.len() {
        let mut flipped = files.clone();
        let n = flipped[i].1.len();
        flipped[i].1[n - 1] ^= 1;
        assert!(check(&root, &flipped, &hash).is_err(), "part {i} flipped");
    }
    let mut flipped_root = root.clone();
    let n = flipped_root.len();
    flipped_root[n - 2] ^= 0x40;
    assert!(check(&flipped_root, &files, &hash).is_err(), "root flipped");
}

#[test]
fn a_labelled_node_becomes_the_part_of_its_whole_prefix() {
    // All keys under 0110…: the dictionary root's label covers the split depth.
    let keys = [key(0x61, 1), key(0x62, 2), key(0x63, 3)];
    let state = state_with(&keys);
    let parts = split_accounts(&state, &full(), 3).unwrap();
    assert_eq!(parts.len(), 1);
    assert_eq!(parts[0].prefix, 0x7000_0000_0000_0000, "011 and its tag");
    let dict_root = state
        .reference_cloned(1)
        .unwrap()
        .reference_cloned(0)
        .unwrap();
    assert_eq!(parts[0].root.repr_hash(), dict_root.repr_hash());
    regolith_checks(&state, &parts);
}

#[test]
fn a_shard_splits_below_its_own_prefix() {
    // Shard 0:4000… holds keys starting with bit 0; split depth 1 → prefixes 00 and 01 at depth 2.
    let shard = ShardIdent::new(0, 0x4000_0000_0000_0000).unwrap();
    let keys = [key(0x10, 1), key(0x20, 2), key(0x50, 3)];
    let state = state_with(&keys);
    let parts = split_accounts(&state, &shard, 1).unwrap();
    let prefixes: Vec<u64> = parts.iter().map(|p| p.prefix).collect();
    assert_eq!(prefixes, [0x2000_0000_0000_0000, 0x6000_0000_0000_0000]);
    crate::persistent_state::validate_split_parts(
        &tycho_types::models::BlockId {
            shard,
            ..Default::default()
        },
        crate::persistent_state::StateKind::Shard,
        1,
        &prefixes,
    )
    .unwrap();
    regolith_checks(&state, &parts);
    // A key outside the shard is refused.
    let outside = state_with(&[key(0x10, 1), key(0x90, 2)]);
    assert!(split_accounts(&outside, &shard, 1).is_err());
}

#[test]
fn no_accounts_no_parts_and_bad_depths_are_refused() {
    let state = state_with(&[]);
    assert!(split_accounts(&state, &full(), 2).unwrap().is_empty());
    assert!(split_accounts(&state, &full(), 0).is_err());
    assert!(split_accounts(&state, &full(), 7).is_err());
    assert!(split_accounts(&state, &ShardIdent::MASTERCHAIN, 1).is_err());
}

#[test]
fn a_root_file_without_absent_cells_is_the_state() {
    let state = state_with(&[key(0x10, 1), key(0x90, 2)]);
    let root = encode_root(&state, &[]).unwrap();
    assert_eq!(Boc::decode(&root).unwrap().repr_hash(), state.repr_hash());
    assert_eq!(
        decode_root(&root).unwrap().root.repr_hash(),
        state.repr_hash()
    );
    // The standard encoder's output decodes too.
    let standard = Boc::encode(&state);
    assert_eq!(
        decode_root(&standard).unwrap().state_hash(),
        *state.repr_hash()
    );
}

#[test]
fn truncated_or_lying_root_files_are_errors() {
    let state = state_with(&[key(0x10, 1), key(0x90, 2), key(0xa0, 3)]);
    let parts = split_accounts(&state, &full(), 1).unwrap();
    let root = encode_root(&state, &parts).unwrap();
    for n in 0..root.len() {
        assert!(decode_root(&root[..n]).is_err(), "truncated at {n}");
    }
    // A cell count far beyond the file.
    let mut lying = root.clone();
    lying[6..10].copy_from_slice(&u32::MAX.to_be_bytes());
    assert!(decode_root(&lying).is_err());
    let mut extra = root.clone();
    extra.push(0);
    assert!(decode_root(&extra).is_err());
}

#[test]
fn a_root_file_with_a_crc_is_checked() {
    let state = state_with(&[key(0x10, 1), key(0x90, 2)]);
    let mut with_crc = Vec::new();
    let header: tycho_types::boc::ser::BocHeader<'_> =
        tycho_types::boc::ser::BocHeader::with_root(state.as_ref());
    header.with_crc(true).encode(&mut with_crc);
    assert_eq!(
        decode_root(&with_crc).unwrap().state_hash(),
        *state.repr_hash()
    );
    let n = with_crc.len();
    with_crc[n - 1] ^= 1;
    assert!(decode_root(&with_crc).unwrap_err().0.contains("CRC"));
}
