//! Conformance of the zerostate proof with the format a stock Tycho node serves and checks (rpc.md §3.3).
//!
//! The stock bytes are written down here from the format itself, cell by cell, not by our builder: the
//! answer's `proof` is the BOC of the partially pruned mc zerostate tree, with no Merkle-proof wrapper. Every
//! cell the parse of the state and of its `McStateExtra` reads is kept, with each of its references kept as a
//! cell; the config params and shard hashes dictionaries are kept whole; every other reference is a pruned
//! branch (merkle depth 0). Its root is the zerostate's root cell, so its level-0 hash is the zerostate root
//! hash. Both directions are checked: our builder produces exactly these bytes and passes a checker written
//! here from the stock rules, and our checker accepts these bytes.

use std::collections::HashSet;

use regolith_formats::zerostate::{check_zerostate_proof, McZerostate, ZerostateError};
use regolith_test_support::fixture_bytes;
use tycho_types::boc::Boc;
use tycho_types::cell::{
    Cell, CellBuilder, CellFamily, DynCell, HashBytes, UsageTree, UsageTreeMode,
};
use tycho_types::merkle::make_pruned_branch;
use tycho_types::models::ShardStateUnsplit;

/// Every cell of the subtree below `root` (its repr hashes).
fn subtree(root: &DynCell, out: &mut HashSet<HashBytes>) {
    let mut stack = vec![root];
    while let Some(cell) = stack.pop() {
        if out.insert(*cell.repr_hash()) {
            stack.extend(cell.references());
        }
    }
}

/// `cell` with the same data and each reference replaced by `child(reference)`.
fn rebuild(cell: &DynCell, mut child: impl FnMut(&DynCell) -> Cell) -> Cell {
    assert!(
        !cell.descriptor().is_exotic(),
        "a zerostate has ordinary cells"
    );
    let mut b = CellBuilder::new();
    b.store_raw(cell.data(), cell.bit_len()).unwrap();
    for r in cell.references() {
        b.store_reference(child(r)).unwrap();
    }
    b.build_ext(Cell::empty_context()).unwrap()
}

/// The stock node's zerostate proof for `root`, built cell by cell from the format.
fn stock_zerostate_proof(root: &Cell) -> Vec<u8> {
    // The cells whose data the parse of the state and its McStateExtra reads.
    let read = UsageTree::new(UsageTreeMode::OnDataAccess);
    let tracked = read.track(root);
    let state = tracked.parse::<ShardStateUnsplit>().unwrap();
    let extra = state
        .load_custom()
        .unwrap()
        .expect("an mc zerostate has McStateExtra");
    // The two dictionaries, whole.
    let mut whole = HashSet::new();
    subtree(
        extra
            .config
            .params
            .as_dict()
            .root()
            .as_ref()
            .unwrap()
            .as_ref(),
        &mut whole,
    );
    subtree(
        extra.shards.as_dict().root().as_ref().unwrap().as_ref(),
        &mut whole,
    );

    fn kept(cell: &DynCell, read: &UsageTree, whole: &HashSet<HashBytes>) -> Cell {
        if whole.contains(cell.repr_hash()) {
            // Kept whole: the cell itself.
            return rebuild(cell, rebuild_whole);
        }
        if read.contains(cell.repr_hash()) {
            return rebuild(cell, |r| kept(r, read, whole));
        }
        // Reached as a reference but not read: kept as a cell, everything below it pruned.
        rebuild(cell, |r| {
            make_pruned_branch(r, 0, Cell::empty_context()).unwrap()
        })
    }
    fn rebuild_whole(cell: &DynCell) -> Cell {
        rebuild(cell, rebuild_whole)
    }
    assert!(read.contains(root.repr_hash()));
    let proof = kept(root.as_ref(), &read, &whole);
    Boc::encode(&proof)
}

/// The stock checker's rules, written down from the format: the root's level-0 hash is the zerostate root
/// hash, the virtualized root parses as ShardStateUnsplit with McStateExtra, the config dictionary root has
/// an empty level mask, the shard hashes dictionary is not empty.
fn stock_check(proof: &[u8], zerostate_root_hash: &HashBytes) -> Result<(), String> {
    let cell = Boc::decode(proof).map_err(|e| e.to_string())?;
    if cell.hash(0) != zerostate_root_hash {
        return Err(format!(
            "proof has an incorrect root hash (found {}, expected {zerostate_root_hash})",
            cell.hash(0)
        ));
    }
    let state = cell
        .virtualize()
        .parse::<ShardStateUnsplit>()
        .map_err(|e| e.to_string())?;
    let extra = state
        .load_custom()
        .map_err(|e| e.to_string())?
        .ok_or("no McStateExtra")?;
    let raw = cell
        .parse::<ShardStateUnsplit>()
        .map_err(|e| e.to_string())?
        .load_custom()
        .map_err(|e| e.to_string())?
        .ok_or("no McStateExtra")?;
    if raw
        .config
        .params
        .as_dict()
        .root()
        .as_ref()
        .is_some_and(|r| !r.level_mask().is_empty())
    {
        return Err("the config has pruned branches".into());
    }
    if extra.shards.as_dict().is_empty() {
        return Err("empty shard hashes".into());
    }
    Ok(())
}

#[test]
fn our_zerostate_proof_is_byte_for_byte_the_stock_format() {
    let bytes = fixture_bytes("zerostate.boc");
    let zs = McZerostate::parse(&bytes).unwrap();
    let stock = stock_zerostate_proof(&zs.root);
    let ours = zs.build_proof().unwrap();
    assert_eq!(
        ours, stock,
        "the zerostate proof differs from the stock format"
    );
    // And it passes the stock node's check, which the Merkle-proof-wrapped format failed.
    stock_check(&ours, &zs.id.root_hash).unwrap();
    // Something is pruned (the accounts): the root has level 1.
    let root = Boc::decode(&ours).unwrap();
    assert_eq!(root.level_mask().level(), 1);
    assert!(ours.len() < bytes.len());
}

#[test]
fn our_checker_accepts_the_stock_format_and_refuses_everything_else() {
    let zs = McZerostate::parse(&fixture_bytes("zerostate.boc")).unwrap();
    let stock = stock_zerostate_proof(&zs.root);
    let checked = check_zerostate_proof(&stock, &zs.id.root_hash).unwrap();
    assert_eq!(
        checked
            .extra
            .config
            .params
            .as_dict()
            .root()
            .as_ref()
            .map(|c| *c.repr_hash()),
        zs.extra
            .config
            .params
            .as_dict()
            .root()
            .as_ref()
            .map(|c| *c.repr_hash()),
    );
    assert!(checked.extra.config.get_current_validator_set().is_ok());

    // A Merkle-proof cell around the same tree (the format regolith served before): refused.
    let tree = Boc::decode(&stock).unwrap();
    let mut b = CellBuilder::new();
    b.set_exotic(true);
    b.store_u8(3).unwrap(); // Merkle proof tag
    b.store_u256(tree.hash(0)).unwrap();
    b.store_u16(tree.depth(0)).unwrap();
    b.store_reference(tree.clone()).unwrap();
    let wrapped = Boc::encode(b.build_ext(Cell::empty_context()).unwrap());
    assert!(stock_check(&wrapped, &zs.id.root_hash).is_err());
    assert_eq!(
        check_zerostate_proof(&wrapped, &zs.id.root_hash).err(),
        Some(ZerostateError::ExoticRoot("Merkle-proof".into()))
    );

    // A pruned branch of the root alone: refused.
    let pruned =
        Boc::encode(make_pruned_branch(zs.root.as_ref(), 0, Cell::empty_context()).unwrap());
    assert!(matches!(
        check_zerostate_proof(&pruned, &zs.id.root_hash),
        Err(ZerostateError::ExoticRoot(_))
    ));

    // The proof of another zerostate: refused by both.
    let other = HashBytes([0x11; 32]);
    assert!(stock_check(&stock, &other).is_err());
    assert!(matches!(
        check_zerostate_proof(&stock, &other),
        Err(ZerostateError::ProofOfAnotherRoot { .. })
    ));
}
