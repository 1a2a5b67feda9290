//! A cell read from the `cells` table, whose children are read on first access (state.md §7.3, lazy loading).
//!
//! tycho-types asks a cell for a child through `CellImpl::reference`, which returns an `Option`; a child that
//! cannot be read (a missing row, a body that does not decode, a failed read) is `None` there, and the
//! [`Loader`] keeps the error, which the caller turns into [`StateError::Corruption`] or a storage error:
//! never a panic.

use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use regolith_storage::CellStorage;
use tycho_types::cell::{
    Cell, CellDescriptor, CellImpl, CellInner, DynCell, HashBytes, VirtualCellWrapper,
};

use crate::cell_row::{self, CellRow};
use crate::error::StateError;

/// Reads stored cells and keeps the first error a lazy read met.
pub(crate) struct Loader {
    cells: CellStorage,
    error: Mutex<Option<StateError>>,
}

impl Loader {
    pub(crate) fn new(cells: CellStorage) -> Arc<Self> {
        Arc::new(Self {
            cells,
            error: Mutex::new(None),
        })
    }

    pub(crate) fn cells(&self) -> &CellStorage {
        &self.cells
    }

    /// The stored cell `hash`.
    pub(crate) fn load(self: &Arc<Self>, hash: &HashBytes) -> Result<Cell, StateError> {
        let row = self
            .cells
            .with_cell(hash, |body| cell_row::decode(hash, body))?
            .ok_or_else(|| StateError::Corruption {
                hash: *hash,
                reason: "the cell is not stored".into(),
            })?
            .map_err(|reason| StateError::Corruption {
                hash: *hash,
                reason,
            })?;
        Ok(Cell::from(CellInner::new(StoredCell::new(
            self.clone(),
            row,
        ))))
    }

    /// Keeps `error` unless an earlier one is kept.
    fn failed(&self, error: StateError) {
        tracing::error!(error = %error, "a stored cell could not be read");
        self.error.lock().get_or_insert(error);
    }

    /// The first error a lazy read met since the last call, if any.
    pub(crate) fn take_error(&self) -> Option<StateError> {
        self.error.lock().take()
    }
}

/// A stored cell: its row, and its children once read.
pub(crate) struct StoredCell {
    loader: Arc<Loader>,
    descriptor: CellDescriptor,
    bit_len: u16,
    data: Box<[u8]>,
    hashes: Box<[(HashBytes, u16)]>,
    children: Box<[(HashBytes, OnceLock<Cell>)]>,
}

impl StoredCell {
    fn new(loader: Arc<Loader>, row: CellRow) -> Self {
        Self {
            loader,
            descriptor: row.descriptor,
            bit_len: row.bit_len,
            data: row.data,
            hashes: row.hashes,
            children: row
                .children
                .into_iter()
                .map(|h| (h, OnceLock::new()))
                .collect(),
        }
    }

    fn child(&self, index: u8) -> Option<&Cell> {
        let (hash, slot) = self.children.get(index as usize)?;
        if let Some(cell) = slot.get() {
            return Some(cell);
        }
        match self.loader.load(hash) {
            Ok(cell) => Some(slot.get_or_init(|| cell)),
            Err(e) => {
                self.loader.failed(e);
                None
            }
        }
    }

    fn level_descr(&self, level: u8) -> (&HashBytes, u16) {
        cell_row::level_descr(self.descriptor, &self.data, &self.hashes, level)
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
        &self.data
    }

    fn bit_len(&self) -> u16 {
        self.bit_len
    }

    fn reference(&self, index: u8) -> Option<&DynCell> {
        self.child(index).map(AsRef::as_ref)
    }

    fn reference_cloned(&self, index: u8) -> Option<Cell> {
        self.child(index).cloned()
    }

    fn reference_repr_hash(&self, index: u8) -> Option<HashBytes> {
        self.children.get(index as usize).map(|(h, _)| *h)
    }

    fn virtualize(&self) -> &DynCell {
        VirtualCellWrapper::wrap(self)
    }

    fn hash(&self, level: u8) -> &HashBytes {
        self.level_descr(level).0
    }

    fn depth(&self, level: u8) -> u16 {
        self.level_descr(level).1
    }
}
