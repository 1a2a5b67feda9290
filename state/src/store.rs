//! The cell store (state.md §7.1): cells by repr hash with exact reference counts, written and removed a
//! whole state at a time, one batch per change, by one writer.
//!
//! rc(c) = references to c from stored cells (counting repeats) + `shard_states` rows rooted at c. A count of
//! 1 has no `cell_refs` row.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use regolith_formats::BlockId;
use regolith_storage::{BlockHandle, CellBatch, CellStorage, Storage};
use tycho_types::cell::{Cell, DynCell, HashBytes};

use crate::cell_row;
use crate::error::StateError;
use crate::state_boc::StateBoc;
use crate::stored_cell::Loader;

/// What one write of states did.
#[derive(Debug, Default, Clone, Copy)]
pub struct WriteStats {
    /// States whose roots were recorded now.
    pub states: usize,
    /// Cells stored now.
    pub new_cells: u64,
    /// Stored cells whose count went up.
    pub counted_cells: u64,
    /// Bytes of cell and count rows written.
    pub bytes: u64,
    /// Seconds the walk and the write took.
    pub seconds: f64,
}

/// What one removal of a state did.
#[derive(Debug, Default, Clone, Copy)]
pub struct RemoveStats {
    /// Cells deleted (their count reached 0).
    pub deleted_cells: u64,
    /// Cells whose count went down and stayed above 0.
    pub released_cells: u64,
}

/// The stored shard states: reading them lazily, writing and removing them.
#[derive(Clone)]
pub struct StateStore {
    loader: Arc<Loader>,
    /// The one writer of the cell tables.
    writer: Arc<Mutex<()>>,
    /// Roots readers hold (how many times each): states GC keeps the states with these roots.
    pins: Arc<Mutex<HashMap<HashBytes, usize>>>,
}

/// A root a reader holds ([`StateStore::pin`]); states GC keeps its states until this is dropped.
pub struct PinnedRoot {
    pins: Arc<Mutex<HashMap<HashBytes, usize>>>,
    root: HashBytes,
}

impl PinnedRoot {
    /// The root held.
    pub fn root(&self) -> &HashBytes {
        &self.root
    }
}

impl Drop for PinnedRoot {
    fn drop(&mut self) {
        let mut pins = self.pins.lock();
        if let Entry::Occupied(mut e) = pins.entry(self.root) {
            *e.get_mut() -= 1;
            if *e.get() == 0 {
                e.remove();
            }
        }
    }
}

impl StateStore {
    /// The store over the cell tables of `storage`.
    pub fn new(storage: &Storage) -> Self {
        Self {
            loader: Loader::new(storage.cells().clone()),
            writer: Arc::new(Mutex::new(())),
            pins: Arc::default(),
        }
    }

    /// Holds the state root `root` for a reader: states GC removes no state with this root until the
    /// returned guard is dropped. Pin the root, then read its state (a state GC removed before the pin is
    /// simply not found).
    pub fn pin(&self, root: &HashBytes) -> PinnedRoot {
        *self.pins.lock().entry(*root).or_default() += 1;
        PinnedRoot {
            pins: self.pins.clone(),
            root: *root,
        }
    }

    /// The lock of the one writer of the cell tables.
    pub(crate) fn writer(&self) -> &Mutex<()> {
        &self.writer
    }

    /// The cell rows.
    pub fn cells(&self) -> &CellStorage {
        self.loader.cells()
    }

    /// The stored cell `hash`; its children are read when first reached.
    pub fn load_cell(&self, hash: &HashBytes) -> Result<Cell, StateError> {
        self.loader.load(hash)
    }

    /// The stored state of block `id`, if one is stored.
    pub fn load_state(&self, id: &BlockId) -> Result<Option<Cell>, StateError> {
        match self.cells().state_root(id)? {
            Some(root) => self.load_cell(&root).map(Some),
            None => Ok(None),
        }
    }

    /// The stored state `root` read for its BOC (the bytes tycho-types' `Boc::encode` gives for it) without
    /// loading its cells. The state must stay stored meanwhile (a persistent save's states are held from
    /// states GC).
    pub fn read_state_boc(&self, root: &HashBytes) -> Result<StateBoc, StateError> {
        StateBoc::read(self.cells(), root)
    }

    /// The first error a lazy read of a child met since the last call (a child that could not be read
    /// looks absent to tycho-types; whoever saw a cell end early asks here why).
    pub fn take_read_error(&self) -> Option<StateError> {
        self.loader.take_error()
    }

    /// Stores the states `states` (each block's handle and its state root) in one batch with what `more`
    /// adds to it. A state whose block has a `shard_states` row already is skipped. Cells reached for the
    /// first time are looked up and stored if absent; a stored cell gets its count raised and is not
    /// descended (state.md §7.3, the write walk).
    pub fn write_states(
        &self,
        states: &[(BlockHandle, Cell)],
        what: &str,
        more: impl FnOnce(&mut CellBatch),
    ) -> Result<WriteStats, StateError> {
        let _writer = self.writer.lock();
        let started = Instant::now();
        let cells = self.cells();
        let mut walk = WriteWalk::default();
        let mut batch = cells.batch();
        let mut stats = WriteStats::default();
        for (handle, root) in states {
            if cells.state_root(handle.id())?.is_some() {
                continue;
            }
            // A new cell's row goes into the batch as the walk reaches it: the walk keeps no bodies.
            walk.add_root(cells, root.as_ref(), |hash, body| {
                batch.put_cell(hash, body);
                stats.new_cells += 1;
            })?;
            if let Some(e) = self.take_read_error() {
                return Err(e);
            }
            batch.put_state_root(handle, root.repr_hash());
            stats.states += 1;
        }
        for (hash, entry) in walk.entries {
            if entry.is_new {
                if entry.delta >= 2 {
                    batch.set_ref_count(&hash, entry.delta);
                }
            } else {
                let old = cells.ref_count_row(&hash)?.unwrap_or(1);
                batch.set_ref_count(&hash, old + entry.delta);
                stats.counted_cells += 1;
            }
        }
        more(&mut batch);
        stats.bytes = batch.bytes();
        cells.write(batch, format_args!("storing the states of {what}"))?;
        stats.seconds = started.elapsed().as_secs_f64();
        Ok(stats)
    }

    /// Removes the stored state of block `id` in one batch: its row goes, its root's count drops by one, and
    /// a cell whose count reaches 0 is deleted and lets its children go. `None` if it has no row, or if a
    /// reader holds its root ([`Self::pin`]).
    pub fn remove_state(&self, id: &BlockId) -> Result<Option<RemoveStats>, StateError> {
        let _writer = self.writer.lock();
        let cells = self.cells();
        let Some(root) = cells.state_root(id)? else {
            return Ok(None);
        };
        if self.pins.lock().contains_key(&root) {
            return Ok(None);
        }
        let mut counts: HashMap<HashBytes, u64> = HashMap::new();
        let mut stack = vec![root];
        let mut batch = cells.batch();
        while let Some(hash) = stack.pop() {
            let count = match counts.get_mut(&hash) {
                Some(count) => count,
                None => {
                    if !cells.contains_cell(&hash)? {
                        return Err(StateError::Corruption {
                            hash,
                            reason: format!("referenced by the state of {id} but not stored"),
                        });
                    }
                    let stored = cells.ref_count_row(&hash)?.unwrap_or(1);
                    counts.entry(hash).or_insert(stored)
                }
            };
            if *count == 0 {
                return Err(StateError::Corruption {
                    hash,
                    reason: format!(
                        "released more often than counted while removing the state of {id}"
                    ),
                });
            }
            *count -= 1;
            if *count == 0 {
                let children = cells
                    .with_cell(&hash, cell_row::children)?
                    .ok_or_else(|| StateError::Corruption {
                        hash,
                        reason: "not stored".into(),
                    })?
                    .map_err(|reason| StateError::Corruption { hash, reason })?;
                stack.extend(children);
            }
        }
        let mut stats = RemoveStats::default();
        for (hash, count) in counts {
            if count == 0 {
                batch.delete_cell(&hash);
                batch.set_ref_count(&hash, 1);
                stats.deleted_cells += 1;
            } else {
                batch.set_ref_count(&hash, count);
                stats.released_cells += 1;
            }
        }
        batch.delete_state_root(id);
        cells.write(batch, format_args!("removing the state of {id}"))?;
        Ok(Some(stats))
    }
}

/// The cells one write reaches: for each, whether it is new (not stored before the walk) and the references
/// (and roots) added to it. The bodies of new cells go to the walk's caller as they are reached.
#[derive(Default)]
pub(crate) struct WriteWalk {
    pub(crate) entries: HashMap<HashBytes, WalkEntry>,
    body: Vec<u8>,
}

#[derive(Clone, Copy)]
pub(crate) struct WalkEntry {
    /// Not stored before the walk: its body went to the caller.
    pub(crate) is_new: bool,
    /// References (and roots) added.
    pub(crate) delta: u64,
}

impl WriteWalk {
    /// Walks the cells of `root`: a cell reached again gets one more reference; a stored cell is counted and
    /// not descended; a new cell's body goes to `new_cell` (once per cell) and its children are walked.
    pub(crate) fn add_root(
        &mut self,
        cells: &CellStorage,
        root: &DynCell,
        mut new_cell: impl FnMut(&HashBytes, &[u8]),
    ) -> Result<(), StateError> {
        let mut stack = vec![root];
        while let Some(cell) = stack.pop() {
            let hash = *cell.repr_hash();
            match self.entries.entry(hash) {
                Entry::Occupied(mut e) => e.get_mut().delta += 1,
                Entry::Vacant(e) => {
                    if cells.contains_cell(&hash)? {
                        e.insert(WalkEntry {
                            is_new: false,
                            delta: 1,
                        });
                        continue;
                    }
                    self.body.clear();
                    cell_row::encode(cell, &mut self.body);
                    new_cell(&hash, &self.body);
                    e.insert(WalkEntry {
                        is_new: true,
                        delta: 1,
                    });
                    for i in 0..cell.reference_count() {
                        let child = cell.reference(i).ok_or_else(|| StateError::Corruption {
                            hash: cell.reference_repr_hash(i).unwrap_or_default(),
                            reason: format!("a child of the new cell {hash} cannot be read"),
                        })?;
                        stack.push(child);
                    }
                }
            }
        }
        Ok(())
    }
}
