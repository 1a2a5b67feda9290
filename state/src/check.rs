//! The checker of the cell store (state.md §7.7.1): every stored count is the references from stored cells
//! (counting repeats) plus the `shard_states` rows rooted at the cell; no cell is unreferenced; every child and
//! every root is stored; no `cell_refs` row is below 2 or without its cell.

use std::collections::HashMap;

use regolith_storage::CellStorage;
use tycho_types::cell::HashBytes;

use crate::cell_row;
use crate::error::StateError;

/// What the checker found.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct CheckReport {
    /// Stored states (`shard_states` rows).
    pub states: usize,
    /// Stored cells.
    pub cells: u64,
    /// Bytes of the cell bodies.
    pub cell_bytes: u64,
    /// `cell_refs` rows.
    pub counted_cells: usize,
    /// The first count or row that is wrong, if any.
    pub first_mismatch: Option<String>,
}

/// Checks every count of the stored states; a read failure is an error, a wrong count is reported.
pub fn check(cells: &CellStorage) -> Result<CheckReport, StateError> {
    let mut report = CheckReport::default();
    if cells.import_journal()?.is_some() {
        // The rows hold a part of an import (state.md §7.6): the counts are final only once it is resumed.
        report.first_mismatch = Some(
            "a state import is open (interrupted; the node's next start finishes it), so the counts are \
             not final"
                .into(),
        );
        return Ok(report);
    }
    // References each cell gets: from stored cells and from roots.
    let mut referenced: HashMap<HashBytes, u64> = HashMap::new();
    let roots = cells.state_roots()?;
    report.states = roots.len();
    for (_, root) in &roots {
        *referenced.entry(*root).or_default() += 1;
    }
    let mut stored: Vec<HashBytes> = Vec::new();
    cells.for_each_cell(|hash, body| {
        report.cells += 1;
        report.cell_bytes += body.len() as u64;
        stored.push(*hash);
        match cell_row::children(body) {
            Ok(children) => {
                for child in children {
                    *referenced.entry(child).or_default() += 1;
                }
            }
            Err(reason) => {
                report
                    .first_mismatch
                    .get_or_insert(format!("cell {hash}: {reason}"));
            }
        }
        Ok(true)
    })?;
    let counts: HashMap<HashBytes, u64> = cells.ref_count_rows()?.into_iter().collect();
    report.counted_cells = counts.len();
    if report.first_mismatch.is_some() {
        return Ok(report);
    }
    let mismatch = (|| {
        for (hash, count) in &counts {
            if *count < 2 {
                return Some(format!("cell {hash}: a cell_refs row of {count}"));
            }
            if stored.binary_search(hash).is_err() {
                return Some(format!(
                    "cell {hash}: a cell_refs row of {count} without its cell"
                ));
            }
        }
        for hash in &stored {
            let expected = referenced.remove(hash).unwrap_or(0);
            let actual = counts.get(hash).copied().unwrap_or(1);
            if expected == 0 {
                return Some(format!(
                    "cell {hash}: stored with count {actual}, but nothing references it"
                ));
            }
            if expected != actual {
                return Some(format!(
                    "cell {hash}: count {actual}, but {expected} references and roots"
                ));
            }
        }
        // What is left is referenced but not stored.
        let missing = referenced.keys().min()?;
        let by_root = roots.iter().find(|(_, r)| r == missing);
        Some(match by_root {
            Some((key, _)) => format!("the root {missing} of the state {key:?} is not stored"),
            None => format!("cell {missing} is referenced but not stored"),
        })
    })();
    report.first_mismatch = mismatch;
    Ok(report)
}
