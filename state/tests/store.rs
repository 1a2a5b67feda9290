//! The cell store on a real RocksDB with generated chains: counts equal the generator's oracle after every
//! write and GC, applies reach the generator's roots, a bad update is refused, and damaged rows are errors.

use std::collections::{HashMap, HashSet};

use regolith_chain::{state_cell_counts, ChainShape, Generator};
use regolith_formats::{BlockId, HashBytes, ParsedBlock};
use regolith_state::{check, gc, import, ChainStates, StateError, StateStore};
use regolith_storage::tables::{Cells, StoredHash};
use regolith_storage::{BlockHandle, NewBlockMeta, Storage, StorageConfig};
use regolith_test_support::fixture_bytes;
use tycho_types::boc::Boc;
use tycho_types::cell::{Cell, DynCell};
use tycho_types::merkle::MerkleUpdate;

struct Node {
    _dir: tempfile::TempDir,
    storage: Storage,
    store: StateStore,
}

impl Node {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let storage = Storage::open(StorageConfig::new(dir.path())).unwrap();
        let store = StateStore::new(&storage);
        Self {
            _dir: dir,
            storage,
            store,
        }
    }

    fn handle(&self, id: &BlockId) -> BlockHandle {
        let meta = NewBlockMeta::zero_state(0, id.is_masterchain());
        self.storage
            .handles()
            .create_or_load_handle(id, meta)
            .unwrap()
            .0
    }

    /// Stores the generator's zerostates as the first checkpoint.
    fn genesis(&self, generator: &Generator) -> ChainStates {
        let genesis = &generator.genesis;
        let mut states = vec![(self.handle(&genesis.mc.id), genesis.mc.root.clone())];
        for shard in &genesis.shards {
            states.push((self.handle(&shard.id), shard.root.clone()));
        }
        let stats = self
            .store
            .write_states(&states, "genesis", |b| b.put_checkpoint(&genesis.mc.id))
            .unwrap();
        assert_eq!(stats.states, states.len());
        ChainStates::load(&self.store, &genesis.mc.id).unwrap()
    }

    /// Stores the newest states as a checkpoint at their mc block.
    fn checkpoint(&self, states: &mut ChainStates) {
        let mc = states.mc().id;
        let all: Vec<(BlockHandle, Cell)> = std::iter::once(states.mc())
            .chain(states.shards())
            .map(|s| (self.handle(&s.id), s.root.clone()))
            .collect();
        self.store
            .write_states(&all, "a checkpoint", |b| b.put_checkpoint(&mc))
            .unwrap();
        states.reload(&self.store).unwrap();
    }

    /// The stored counts: every cell with its count (a row, or 1).
    fn stored_counts(&self) -> HashMap<HashBytes, u32> {
        let cells = self.store.cells();
        let rows: HashMap<HashBytes, u64> = cells.ref_count_rows().unwrap().into_iter().collect();
        let mut counts = HashMap::new();
        cells
            .for_each_cell(|hash, _| {
                counts.insert(*hash, rows.get(hash).copied().unwrap_or(1) as u32);
                Ok(true)
            })
            .unwrap();
        counts
    }

    /// The oracle's counts of the stored roots, computed on the states read back through the store.
    fn oracle_counts(&self) -> HashMap<HashBytes, u32> {
        let roots: Vec<Cell> = self
            .store
            .cells()
            .state_roots()
            .unwrap()
            .iter()
            .map(|(_, root)| self.store.load_cell(root).unwrap())
            .collect();
        let counts = state_cell_counts(&roots);
        assert!(self.store.take_read_error().is_none());
        counts
    }

    fn assert_exact(&self, when: &str) {
        let report = check::check(self.store.cells()).unwrap();
        assert_eq!(report.first_mismatch, None, "{when}: the checker");
        assert_eq!(
            self.stored_counts(),
            self.oracle_counts(),
            "{when}: counts vs the oracle"
        );
    }
}

fn generator(mc_blocks: u32) -> Generator {
    let shape = ChainShape {
        key_block_every: 5,
        rotate_every: 2,
        messages: 6,
        ..ChainShape::default()
    };
    Generator::new(
        shape.options(mc_blocks, 10),
        &fixture_bytes("zerostate.boc"),
    )
    .unwrap()
}

/// The blocks of the generator's next group: (id, prev ids, state update), shard blocks first.
fn next_group(generator: &mut Generator) -> Vec<(BlockId, Vec<BlockId>, MerkleUpdate)> {
    let group = generator.next_mc_block().unwrap();
    group
        .blocks
        .iter()
        .map(|b| {
            let parsed = ParsedBlock::parse(&b.id, &b.data).unwrap();
            let update = parsed.block.load_state_update().unwrap();
            (b.id, parsed.prev_ids().unwrap(), update)
        })
        .collect()
}

#[test]
fn stored_zerostates_have_the_oracles_counts() {
    let node = Node::new();
    let generator = generator(1);
    let states = node.genesis(&generator);
    node.assert_exact("after genesis");
    assert_eq!(
        states.mc().root.repr_hash(),
        generator.genesis.mc.root.repr_hash()
    );
    assert_eq!(states.shards().len(), generator.genesis.shards.len());
    // Writing the same states again changes nothing: each block has one row.
    let genesis = &generator.genesis;
    let again = node
        .store
        .write_states(
            &[(node.handle(&genesis.mc.id), genesis.mc.root.clone())],
            "genesis again",
            |_| {},
        )
        .unwrap();
    assert_eq!(again.states, 0);
    node.assert_exact("after writing genesis again");
    let handle = node.handle(&genesis.mc.id);
    assert!(handle.has_state());
}

#[test]
fn applying_a_generated_chain_reaches_its_roots_with_exact_counts_through_checkpoints_and_gc() {
    let node = Node::new();
    let mut generator = generator(40);
    let mut states = node.genesis(&generator);
    let mut removed = 0;
    for seqno in 1..=24u32 {
        for (id, prev, update) in next_group(&mut generator) {
            states.apply(&node.store, &id, &prev, &update).unwrap();
        }
        assert_eq!(states.mc().id, generator.last_mc_block());
        if seqno % 4 == 0 {
            node.checkpoint(&mut states);
            node.assert_exact(&format!("checkpoint at mc {seqno}"));
            let stats = gc::collect(&node.store, &node.storage, 2, || {}).unwrap();
            removed += stats.removed_states;
            node.assert_exact(&format!("GC after mc {seqno}"));
            // Kept: the zerostates and the last two checkpoints (mc state and its shard tops).
            let kept: HashSet<u32> = node
                .store
                .cells()
                .state_roots()
                .unwrap()
                .iter()
                .filter(|(id, _)| id.is_masterchain())
                .map(|(id, _)| id.seqno)
                .collect();
            let expected: HashSet<u32> = [0, seqno, seqno.saturating_sub(4)]
                .into_iter()
                .filter(|s| *s == 0 || *s >= 4)
                .collect();
            assert_eq!(kept, expected, "mc states kept after GC at {seqno}");
        }
    }
    assert!(removed > 0, "GC removed no state");
    assert_eq!(
        states.mc().root.repr_hash(),
        generator.mc_state_root().repr_hash()
    );
    let tips = generator.shard_tips();
    assert_eq!(states.shards().len(), tips.len());
    for (state, (id, root)) in states.shards().iter().zip(&tips) {
        assert_eq!(state.id, *id);
        assert_eq!(state.root.repr_hash(), root.repr_hash());
    }
    // A restart loads the last checkpoint and reaches the same roots by applying the same blocks.
    let reloaded = ChainStates::load(&node.store, &states.mc().id).unwrap();
    assert_eq!(reloaded.mc().root.repr_hash(), states.mc().root.repr_hash());
}

#[test]
fn checkpoints_count_exactly_while_gc_keeps_one_and_a_reader_holds_the_states_before() {
    let node = Node::new();
    let mut generator = generator(20);
    let mut states = node.genesis(&generator);
    // A reader's snapshot, alive until the checkpoint after the one it was taken before: through the GC
    // that removes the states its stored cells were read from, and through the next write walk.
    let mut reader = None;
    let mut removed = 0;
    for seqno in 1..=12u32 {
        for (id, prev, update) in next_group(&mut generator) {
            states.apply(&node.store, &id, &prev, &update).unwrap();
        }
        assert_eq!(states.mc().id, generator.last_mc_block());
        if seqno % 2 == 0 {
            let previous = reader.replace(states.clone());
            node.checkpoint(&mut states);
            node.assert_exact(&format!("checkpoint at mc {seqno}"));
            removed += gc::collect(&node.store, &node.storage, 1, || {})
                .unwrap()
                .removed_states;
            node.assert_exact(&format!("GC keeping one after mc {seqno}"));
            drop(previous);
        }
    }
    assert!(removed > 0, "GC removed no state");
    assert_eq!(
        states.mc().root.repr_hash(),
        generator.mc_state_root().repr_hash()
    );
    for (state, (id, root)) in states.shards().iter().zip(&generator.shard_tips()) {
        assert_eq!(state.id, *id);
        assert_eq!(state.root.repr_hash(), root.repr_hash());
    }
}

#[test]
fn a_stored_state_read_from_its_rows_is_the_boc_tycho_encodes_for_it() {
    let node = Node::new();
    let mut generator = generator(12);
    let mut states = node.genesis(&generator);
    for _ in 0..10 {
        for (id, prev, update) in next_group(&mut generator) {
            states.apply(&node.store, &id, &prev, &update).unwrap();
        }
    }
    node.checkpoint(&mut states);
    let roots = node.store.cells().state_roots().unwrap();
    assert!(roots.len() >= 6, "{} states", roots.len());
    for (id, root) in roots {
        let boc = node.store.read_state_boc(&root).unwrap();
        let mut bytes = Vec::new();
        boc.write(&mut bytes).unwrap();
        let expected = Boc::encode(node.store.load_cell(&root).unwrap());
        assert!(bytes == expected, "the BOC of the state of {id} differs");
        assert_eq!(
            boc.size(),
            bytes.len() as u64,
            "the size of the state of {id}"
        );
        assert_eq!(Boc::decode(&bytes).unwrap().repr_hash(), &root);
    }
}

#[test]
fn an_update_that_does_not_follow_the_state_is_refused_as_invalid() {
    let node = Node::new();
    let mut generator = generator(5);
    let mut states = node.genesis(&generator);
    let first = next_group(&mut generator);
    let second = next_group(&mut generator);
    let (mc1, prev1, update1) = first.last().cloned().unwrap();
    let (mc1, prev1, update1) = (&mc1, &prev1, &update1);

    // Block 2's update applied to the state before block 1: its old hash is not that state.
    let (_, _, update2) = second.last().unwrap();
    let err = states.apply(&node.store, mc1, prev1, update2).unwrap_err();
    assert!(err.is_invalid_block(), "{err}");
    assert!(err.to_string().contains("starts from state"), "{err}");

    // The right old state but a wrong new hash.
    let mut forged = update1.clone();
    forged.new_hash = HashBytes([7; 32]);
    let err = states.apply(&node.store, mc1, prev1, &forged).unwrap_err();
    assert!(err.is_invalid_block(), "{err}");
    assert!(err.to_string().contains("does not apply"), "{err}");

    // Nothing moved: the right update still applies.
    assert_eq!(states.mc().id, generator.genesis.mc.id);
    for (id, prev, update) in first {
        states.apply(&node.store, &id, &prev, &update).unwrap();
    }
    assert_eq!(states.mc().id, *mc1);

    // A block of a shard the states do not know (as after a split) is refused as unsupported.
    let (id, prev, update) = &second[0];
    let mut foreign = *id;
    foreign.shard = foreign.shard.split().unwrap().0;
    let err = states
        .apply(&node.store, &foreign, prev, update)
        .unwrap_err();
    assert!(matches!(err, StateError::Unsupported { .. }), "{err}");
}

#[test]
fn a_missing_cell_is_a_corruption_error_naming_it() {
    let node = Node::new();
    let generator = generator(1);
    node.genesis(&generator);
    let root = generator.genesis.mc.root.clone();
    // Delete a child of the root (a cell of the mc zerostate alone).
    let victim = root.reference_repr_hash(0).unwrap();
    node.storage
        .db()
        .delete::<Cells>(&StoredHash(victim))
        .unwrap();

    let report = check::check(node.store.cells()).unwrap();
    let mismatch = report.first_mismatch.expect("the checker sees the hole");
    assert!(mismatch.contains(&victim.to_string()), "{mismatch}");

    // Walking the stored state meets the hole: no panic, the loader names the cell.
    let stored = node.store.load_cell(root.repr_hash()).unwrap();
    fn walk(cell: &DynCell, seen: &mut usize) {
        *seen += 1;
        for child in cell.references() {
            walk(child, seen);
        }
    }
    let mut seen = 0;
    walk(stored.as_ref(), &mut seen);
    match node.store.take_read_error() {
        Some(StateError::Corruption { hash, .. }) => assert_eq!(hash, victim),
        other => panic!("expected a corruption of {victim}, got {other:?}"),
    }

    // Reading it for its BOC meets it too.
    match node.store.read_state_boc(root.repr_hash()) {
        Err(StateError::Corruption { hash, .. }) => assert_eq!(hash, victim),
        Err(e) => panic!("expected a corruption of {victim}, got {e}"),
        Ok(_) => panic!("expected a corruption of {victim}, got a BOC"),
    }

    // Removing the state meets it too, and removes nothing.
    let before = node.stored_counts();
    let err = node
        .store
        .remove_state(&generator.genesis.mc.id)
        .unwrap_err();
    assert!(matches!(err, StateError::Corruption { .. }), "{err}");
    assert_eq!(node.stored_counts(), before);
}

#[test]
fn states_gc_keeps_a_root_a_reader_pinned_until_the_pin_is_dropped() {
    let node = Node::new();
    let mut generator = generator(20);
    let mut states = node.genesis(&generator);
    let checkpoint = |states: &mut ChainStates, generator: &mut Generator| {
        for (id, prev, update) in next_group(generator) {
            states.apply(&node.store, &id, &prev, &update).unwrap();
        }
        node.checkpoint(states);
    };
    checkpoint(&mut states, &mut generator);
    // The state of mc block 1, which GC removes once two newer checkpoints exist.
    let first = states.mc().id;
    let root = node.store.cells().state_root(&first).unwrap().unwrap();
    let pin = node.store.pin(&root);
    checkpoint(&mut states, &mut generator);
    checkpoint(&mut states, &mut generator);
    let stats = gc::collect(&node.store, &node.storage, 2, || {}).unwrap();
    assert_eq!(
        node.store.cells().state_root(&first).unwrap(),
        Some(root),
        "{stats:?}"
    );
    // The pinned state is whole and exactly counted, and readable.
    node.assert_exact("with a pinned state");
    let read = node.store.load_state(&first).unwrap().unwrap();
    assert!(state_cell_counts(&[read]).len() > 10);
    assert!(node.store.take_read_error().is_none());

    drop(pin);
    gc::collect(&node.store, &node.storage, 2, || {}).unwrap();
    assert_eq!(node.store.cells().state_root(&first).unwrap(), None);
    node.assert_exact("after the pin was dropped");
}

/// Imports `states` through the journal, `batch_cells` rows a batch, with a "crash" (a panic that leaves the
/// rows as they are) after batch `crash_after`, if it comes; then resumes as a restart does. The number of
/// batches of the import that was interrupted (or of the whole import).
fn import_with_crash(
    node: &Node,
    states: &[(BlockHandle, Cell)],
    checkpoint: &BlockId,
    batch_cells: usize,
    crash_after: u64,
) -> u64 {
    let dir = node._dir.path().join("state_import");
    let mut written = 0u64;
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        import::import_states(
            &node.store,
            &dir,
            states,
            Some(checkpoint),
            batch_cells,
            || {
                written += 1;
                if written == crash_after {
                    panic!("crash point");
                }
            },
        )
    }));
    match outcome {
        Ok(stats) => stats.unwrap().batches,
        Err(_) => {
            // The interrupted import: its journal is open and the checker says the counts are not final.
            assert!(import::is_open(&node.store).unwrap());
            let report = check::check(node.store.cells()).unwrap();
            assert!(report
                .first_mismatch
                .unwrap()
                .contains("a state import is open"));
            assert!(dir.join("state-import.delta").exists());
            // A restart: a new store over the same rows resumes from the journal's cursor.
            let store = StateStore::new(&node.storage);
            let resumed = import::resume(&store, &node.storage, &dir, batch_cells, || {})
                .unwrap()
                .expect("an open import is resumed");
            assert!(resumed.batches >= 1);
            assert!(!import::is_open(&node.store).unwrap());
            assert!(!dir.join("state-import.delta").exists());
            crash_after
        }
    }
}

#[test]
fn a_journaled_import_interrupted_after_any_batch_resumes_to_the_oracles_counts() {
    let mut generator = generator(12);
    let mut zerostates = vec![(generator.genesis.mc.id, generator.genesis.mc.root.clone())];
    for shard in &generator.genesis.shards {
        zerostates.push((shard.id, shard.root.clone()));
    }
    let zero_mc = generator.genesis.mc.id;
    // The state of mc 10 in memory, applied on a store that is thrown away (the import's second state).
    let scratch = Node::new();
    let mut later = scratch.genesis(&generator);
    for _ in 1..=10u32 {
        for (id, prev, update) in next_group(&mut generator) {
            later.apply(&scratch.store, &id, &prev, &update).unwrap();
        }
    }
    let mut crash_after = 1u64;
    loop {
        let node = Node::new();
        let first: Vec<(BlockHandle, Cell)> = zerostates
            .iter()
            .map(|(id, root)| (node.handle(id), root.clone()))
            .collect();
        let batches = import_with_crash(&node, &first, &zero_mc, 40, crash_after);
        node.assert_exact(&format!(
            "the zerostates imported, crash after batch {crash_after}"
        ));
        assert_eq!(node.store.cells().checkpoint().unwrap(), Some(zero_mc));
        for (handle, root) in &first {
            assert!(handle.has_state());
            assert_eq!(
                node.store.cells().state_root(handle.id()).unwrap(),
                Some(*root.repr_hash())
            );
        }
        // A second import over stored cells: shared cells get their counts raised, not stored again.
        let second: Vec<(BlockHandle, Cell)> = std::iter::once(later.mc())
            .chain(later.shards())
            .map(|s| (node.handle(&s.id), s.root.clone()))
            .collect();
        let second_batches = import_with_crash(&node, &second, &later.mc().id, 40, crash_after);
        node.assert_exact(&format!("mc 10 imported, crash after batch {crash_after}"));
        assert_eq!(
            node.store.cells().checkpoint().unwrap(),
            Some(later.mc().id)
        );
        let loaded = ChainStates::load(&node.store, &later.mc().id).unwrap();
        assert_eq!(loaded.mc().root.repr_hash(), later.mc().root.repr_hash());
        if crash_after > batches.max(second_batches) {
            break;
        }
        crash_after += 1;
    }
    assert!(
        crash_after > 3,
        "the imports took too few batches to crash between them"
    );
}

#[test]
fn a_delta_file_without_a_journal_is_removed_and_a_damaged_one_is_refused() {
    let node = Node::new();
    let generator = generator(1);
    let genesis = &generator.genesis;
    let dir = node._dir.path().join("state_import");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("state-import.delta"),
        b"left by a crash before the journal",
    )
    .unwrap();
    assert!(import::resume(&node.store, &node.storage, &dir, 10, || {})
        .unwrap()
        .is_none());
    assert!(!dir.join("state-import.delta").exists());
    // Interrupt an import, then damage its delta file: the resume refuses it and names the file.
    let states = vec![(node.handle(&genesis.mc.id), genesis.mc.root.clone())];
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        import::import_states(&node.store, &dir, &states, None, 10, || {
            panic!("crash point")
        })
    }));
    assert!(outcome.is_err());
    let path = dir.join("state-import.delta");
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let err = import::resume(&node.store, &node.storage, &dir, 10, || {})
        .expect_err("a damaged delta file is refused")
        .to_string();
    assert!(err.contains("state-import.delta"), "{err}");
    assert!(import::is_open(&node.store).unwrap(), "the journal stays");
}
