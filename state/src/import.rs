//! Importing whole states into the cell store, journaled and resumable (state.md §7.6): the states of a node's
//! first mc block (the zerostates at genesis, the boot block's states after a cold boot or `import --states`).
//!
//! 1. **Decide.** With the writer's lock held, the states are walked once: a cell not stored yet is new and
//!    gets the references to it from new cells (counting repeats, +1 per root); a stored cell gets the same
//!    count added and is not descended. The list of (hash, delta, body of a new cell) goes, in hash order, to
//!    a delta file that is fsynced before the journal row naming it (with its length and BLAKE3) is written.
//! 2. **Apply** the list in batches of at most `batch_cells` rows; each batch also moves the journal's cursor.
//!    The last one writes the `shard_states` rows (and HAS_STATE), what the caller adds (the checkpoint) and
//!    closes the journal.
//!
//! A crash before the journal row leaves nothing but the delta file, deleted at the next start
//! ([`resume`]); a crash after it is resumed from the cursor. Until the journal closes, the cell rows hold a
//! part of the import, so nothing else may write them or check them: [`resume`] runs first.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::time::Instant;

use regolith_formats::{decode_block_id, encode_block_id, BlockId, BLOCK_ID_LEN};
use regolith_storage::{BlockHandle, Storage};
use tycho_types::cell::{Cell, HashBytes};

use crate::error::StateError;
use crate::store::{StateStore, WriteWalk};

/// The delta file's name in the import directory.
const DELTA_FILE: &str = "state-import.delta";
/// The journal's layout version.
const JOURNAL_VERSION: u8 = 1;
/// The length of a delta row's body for a cell that is stored already (its count is raised).
const STORED: u32 = u32::MAX;
/// Bytes of cell bodies a batch holds at most, whatever `batch_cells` says.
const MAX_BATCH_BYTES: u64 = 64 << 20;

/// What an import did.
#[derive(Debug, Default, Clone, Copy)]
pub struct ImportStats {
    /// States whose roots were recorded.
    pub states: usize,
    /// Cells stored.
    pub new_cells: u64,
    /// Stored cells whose count went up.
    pub counted_cells: u64,
    /// Batches written (the rows of the delta list and the closing one).
    pub batches: u64,
    /// Bytes of cell and count rows written.
    pub bytes: u64,
    /// Seconds the whole import took.
    pub seconds: f64,
}

/// Imports `states` (each block's handle and its state root) into the cell store through a journal in
/// `dir`, `batch_cells` rows per batch; `close` adds to the last batch (the checkpoint), and `after_each`
/// runs after every batch written (a crash point). A state whose block has a `shard_states` row already is
/// skipped.
pub fn import_states(
    store: &StateStore,
    dir: &Path,
    states: &[(BlockHandle, Cell)],
    checkpoint: Option<&BlockId>,
    batch_cells: usize,
    mut after_each: impl FnMut(),
) -> Result<ImportStats, StateError> {
    let _writer = store.writer().lock();
    let started = Instant::now();
    let cells = store.cells();
    if cells.import_journal()?.is_some() {
        return Err(StateError::Inconsistent(
            "a state import is open already; it must be resumed first".into(),
        ));
    }
    let mut walk = WriteWalk::default();
    // The delta file lists the new cells' bodies in hash order, after the walk: they are kept until then.
    let mut bodies: HashMap<HashBytes, Box<[u8]>> = HashMap::new();
    let mut roots = Vec::new();
    let mut handles = Vec::new();
    for (handle, root) in states {
        if cells.state_root(handle.id())?.is_some() {
            continue;
        }
        walk.add_root(cells, root.as_ref(), |hash, body| {
            bodies.insert(*hash, body.into());
        })?;
        if let Some(e) = store.take_read_error() {
            return Err(e);
        }
        roots.push((*handle.id(), *root.repr_hash()));
        handles.push(handle.clone());
    }
    std::fs::create_dir_all(dir).map_err(|e| io_error(dir, "create", &e))?;
    let path = dir.join(DELTA_FILE);
    let mut rows: Vec<_> = walk.entries.into_iter().collect();
    rows.sort_unstable_by_key(|row| row.0);
    let (len, digest) = write_delta_file(&path, &rows, &bodies)?;
    let row_count = rows.len() as u64;
    drop(rows);
    drop(bodies);
    let journal = Journal {
        file_len: len,
        file_blake3: digest,
        rows: row_count,
        cursor_rows: 0,
        cursor_offset: 0,
        checkpoint: checkpoint.copied(),
        roots,
    };
    let mut batch = cells.batch();
    batch.put_import_journal(&journal.encode());
    cells.write(batch, "opening a state import")?;
    after_each();
    let mut stats = apply(
        store,
        &path,
        journal,
        &handles,
        batch_cells,
        &mut after_each,
    )?;
    stats.seconds = started.elapsed().as_secs_f64();
    Ok(stats)
}

/// Resumes the import that the journal says is open, if any (its delta file in `dir`), and deletes a delta
/// file no journal names. Runs at start, before anything reads or writes the cell rows. `storage` gives the
/// handles of the imported states' blocks.
pub fn resume(
    store: &StateStore,
    storage: &Storage,
    dir: &Path,
    batch_cells: usize,
    mut after_each: impl FnMut(),
) -> Result<Option<ImportStats>, StateError> {
    let _writer = store.writer().lock();
    let started = Instant::now();
    let path = dir.join(DELTA_FILE);
    let Some(bytes) = store.cells().import_journal()? else {
        match std::fs::remove_file(&path) {
            Ok(()) => {
                tracing::info!(path = %path.display(), "removed the delta file of an unopened state import");
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_error(&path, "remove", &e)),
        }
        return Ok(None);
    };
    let journal = Journal::decode(&bytes).map_err(|reason| {
        StateError::Inconsistent(format!("the state import journal is damaged: {reason}"))
    })?;
    check_delta_file(&path, &journal)?;
    tracing::info!(
        rows = journal.rows,
        done = journal.cursor_rows,
        states = journal.roots.len(),
        "resuming an interrupted state import"
    );
    let handles = journal
        .roots
        .iter()
        .map(|(id, _)| load_handle(storage, id))
        .collect::<Result<Vec<_>, _>>()?;
    let mut stats = apply(
        store,
        &path,
        journal,
        &handles,
        batch_cells,
        &mut after_each,
    )?;
    stats.seconds = started.elapsed().as_secs_f64();
    Ok(Some(stats))
}

/// Whether a state import is open (its journal row exists): the cell rows then hold a part of it.
pub fn is_open(store: &StateStore) -> Result<bool, StateError> {
    Ok(store.cells().import_journal()?.is_some())
}

fn load_handle(storage: &Storage, id: &BlockId) -> Result<BlockHandle, StateError> {
    storage.handles().load_handle(id)?.ok_or_else(|| {
        StateError::Inconsistent(format!(
            "the state import journal names block {id}, which has no handle"
        ))
    })
}

/// Applies the delta rows from the journal's cursor on, then closes the journal.
fn apply(
    store: &StateStore,
    path: &Path,
    mut journal: Journal,
    handles: &[BlockHandle],
    batch_cells: usize,
    after_each: &mut impl FnMut(),
) -> Result<ImportStats, StateError> {
    let cells = store.cells();
    let file = File::open(path).map_err(|e| io_error(path, "open", &e))?;
    let mut reader = BufReader::with_capacity(1 << 20, file);
    reader
        .seek(SeekFrom::Start(journal.cursor_offset))
        .map_err(|e| io_error(path, "read", &e))?;
    let mut stats = ImportStats::default();
    let mut body = Vec::new();
    loop {
        let mut batch = cells.batch();
        let mut in_batch = 0usize;
        let mut body_bytes = 0u64;
        while journal.cursor_rows < journal.rows
            && in_batch < batch_cells.max(1)
            && body_bytes < MAX_BATCH_BYTES
        {
            let row = read_row(&mut reader, &mut body)
                .map_err(|e| delta_error(path, journal.cursor_offset, &e))?;
            match row.body_len {
                Some(len) => {
                    batch.put_cell(&row.hash, &body);
                    batch.set_ref_count(&row.hash, row.delta);
                    stats.new_cells += 1;
                    body_bytes += len as u64;
                }
                None => {
                    if !cells.contains_cell(&row.hash)? {
                        return Err(StateError::Corruption {
                            hash: row.hash,
                            reason: "counted by a state import but no longer stored".into(),
                        });
                    }
                    let old = cells.ref_count_row(&row.hash)?.unwrap_or(1);
                    batch.set_ref_count(&row.hash, old + row.delta);
                    stats.counted_cells += 1;
                }
            }
            journal.cursor_rows += 1;
            journal.cursor_offset += row.encoded_len;
            in_batch += 1;
        }
        let last = journal.cursor_rows == journal.rows;
        if last {
            for (handle, (_, root)) in handles.iter().zip(&journal.roots) {
                batch.put_state_root(handle, root);
            }
            if let Some(mc) = &journal.checkpoint {
                batch.put_checkpoint(mc);
            }
            batch.clear_import_journal();
        } else {
            batch.put_import_journal(&journal.encode());
        }
        stats.bytes += batch.bytes();
        cells.write(
            batch,
            format_args!(
                "importing states ({} of {} cell rows)",
                journal.cursor_rows, journal.rows
            ),
        )?;
        stats.batches += 1;
        if last {
            break;
        }
        after_each();
    }
    stats.states = journal.roots.len();
    if let Err(e) = std::fs::remove_file(path) {
        // The journal is closed: a leftover file is removed at the next start.
        tracing::warn!(path = %path.display(), error = %e, "cannot remove the state import's delta file");
    }
    Ok(stats)
}

/// Writes the delta rows to `path` and fsyncs it; its length and BLAKE3.
fn write_delta_file(
    path: &Path,
    rows: &[(HashBytes, crate::store::WalkEntry)],
    bodies: &HashMap<HashBytes, Box<[u8]>>,
) -> Result<(u64, [u8; 32]), StateError> {
    let file = File::create(path).map_err(|e| io_error(path, "create", &e))?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let mut hasher = blake3::Hasher::new();
    let mut len = 0u64;
    for (hash, entry) in rows {
        let mut head = [0u8; 44];
        head[..32].copy_from_slice(hash.as_slice());
        head[32..40].copy_from_slice(&entry.delta.to_le_bytes());
        let body = match entry.is_new {
            true => bodies.get(hash).map(|b| &b[..]).ok_or_else(|| {
                StateError::Inconsistent(format!(
                    "the import walk kept no body of the new cell {hash}"
                ))
            })?,
            false => &[][..],
        };
        let body_len = match entry.is_new {
            true => body.len() as u32,
            false => STORED,
        };
        head[40..44].copy_from_slice(&body_len.to_le_bytes());
        for part in [&head[..], body] {
            hasher.update(part);
            out.write_all(part)
                .map_err(|e| io_error(path, "write", &e))?;
            len += part.len() as u64;
        }
    }
    let file = out
        .into_inner()
        .map_err(|e| io_error(path, "write", e.error()))?;
    file.sync_all().map_err(|e| io_error(path, "fsync", &e))?;
    if let Some(dir) = path.parent() {
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| io_error(dir, "fsync", &e))?;
    }
    Ok((len, *hasher.finalize().as_bytes()))
}

/// Checks that the delta file is the one the journal names (length and BLAKE3).
fn check_delta_file(path: &Path, journal: &Journal) -> Result<(), StateError> {
    let mut file = File::open(path).map_err(|e| {
        StateError::Inconsistent(format!(
            "the open state import's delta file {} cannot be read: {e}",
            path.display()
        ))
    })?;
    let mut hasher = blake3::Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut len = 0u64;
    loop {
        let n = file
            .read(&mut buf)
            .map_err(|e| io_error(path, "read", &e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        len += n as u64;
    }
    if len != journal.file_len || hasher.finalize().as_bytes() != &journal.file_blake3 {
        return Err(StateError::Inconsistent(format!(
            "the open state import's delta file {} is not the one its journal names ({len} bytes, {} \
             expected, or another BLAKE3)",
            path.display(),
            journal.file_len
        )));
    }
    Ok(())
}

struct DeltaRow {
    hash: HashBytes,
    delta: u64,
    /// `None` for a stored cell.
    body_len: Option<u32>,
    encoded_len: u64,
}

fn read_row(reader: &mut impl Read, body: &mut Vec<u8>) -> std::io::Result<DeltaRow> {
    let mut head = [0u8; 44];
    reader.read_exact(&mut head)?;
    let hash = HashBytes(head[..32].try_into().expect("32 bytes"));
    let delta = u64::from_le_bytes(head[32..40].try_into().expect("8 bytes"));
    let body_len = u32::from_le_bytes(head[40..44].try_into().expect("4 bytes"));
    if delta == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("cell {hash} has a delta of 0"),
        ));
    }
    if body_len == STORED {
        body.clear();
        return Ok(DeltaRow {
            hash,
            delta,
            body_len: None,
            encoded_len: 44,
        });
    }
    if body_len > crate::cell_row::MAX_BODY_LEN as u32 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("cell {hash} has a body of {body_len} bytes"),
        ));
    }
    body.resize(body_len as usize, 0);
    reader.read_exact(body)?;
    Ok(DeltaRow {
        hash,
        delta,
        body_len: Some(body_len),
        encoded_len: 44 + body_len as u64,
    })
}

fn io_error(path: &Path, what: &str, e: &std::io::Error) -> StateError {
    StateError::Inconsistent(format!("cannot {what} {}: {e}", path.display()))
}

fn delta_error(path: &Path, offset: u64, e: &std::io::Error) -> StateError {
    StateError::Inconsistent(format!(
        "the state import's delta file {} is damaged at byte {offset}: {e}",
        path.display()
    ))
}

/// The journal row of an open import.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Journal {
    file_len: u64,
    file_blake3: [u8; 32],
    /// Rows in the delta file.
    rows: u64,
    /// Rows applied, and the offset of the next one.
    cursor_rows: u64,
    cursor_offset: u64,
    checkpoint: Option<BlockId>,
    /// The imported states: block and root.
    roots: Vec<(BlockId, HashBytes)>,
}

impl Journal {
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(128 + self.roots.len() * (BLOCK_ID_LEN + 32));
        out.push(JOURNAL_VERSION);
        out.extend_from_slice(&self.file_len.to_le_bytes());
        out.extend_from_slice(&self.file_blake3);
        out.extend_from_slice(&self.rows.to_le_bytes());
        out.extend_from_slice(&self.cursor_rows.to_le_bytes());
        out.extend_from_slice(&self.cursor_offset.to_le_bytes());
        match &self.checkpoint {
            Some(id) => {
                out.push(1);
                out.extend_from_slice(&encode_block_id(id));
            }
            None => out.push(0),
        }
        out.extend_from_slice(&(self.roots.len() as u32).to_le_bytes());
        for (id, root) in &self.roots {
            out.extend_from_slice(&encode_block_id(id));
            out.extend_from_slice(root.as_slice());
        }
        out
    }

    fn decode(bytes: &[u8]) -> Result<Self, String> {
        let mut input = bytes;
        let mut take = |n: usize| -> Result<&[u8], String> {
            if input.len() < n {
                return Err(format!("{} bytes, too short", bytes.len()));
            }
            let (head, rest) = input.split_at(n);
            input = rest;
            Ok(head)
        };
        let u64_at = |b: &[u8]| u64::from_le_bytes(b.try_into().expect("8 bytes"));
        let version = take(1)?[0];
        if version != JOURNAL_VERSION {
            return Err(format!(
                "layout version {version}, this build reads {JOURNAL_VERSION}"
            ));
        }
        let file_len = u64_at(take(8)?);
        let file_blake3: [u8; 32] = take(32)?.try_into().expect("32 bytes");
        let rows = u64_at(take(8)?);
        let cursor_rows = u64_at(take(8)?);
        let cursor_offset = u64_at(take(8)?);
        let checkpoint = match take(1)?[0] {
            0 => None,
            1 => Some(decode_block_id(take(BLOCK_ID_LEN)?).map_err(|e| e.to_string())?),
            other => return Err(format!("checkpoint tag {other}")),
        };
        let count = u32::from_le_bytes(take(4)?.try_into().expect("4 bytes"));
        let mut roots = Vec::new();
        for _ in 0..count {
            let id = decode_block_id(take(BLOCK_ID_LEN)?).map_err(|e| e.to_string())?;
            let root = HashBytes(take(32)?.try_into().expect("32 bytes"));
            roots.push((id, root));
        }
        if !input.is_empty() {
            return Err(format!("{} bytes left over", input.len()));
        }
        if cursor_rows > rows || cursor_offset > file_len {
            return Err(format!(
                "cursor {cursor_rows} rows / {cursor_offset} bytes past the file's {rows} rows / {file_len} bytes"
            ));
        }
        Ok(Self {
            file_len,
            file_blake3,
            rows,
            cursor_rows,
            cursor_offset,
            checkpoint,
            roots,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journal_round_trips_and_rejects_damage() {
        let id = BlockId {
            shard: tycho_types::models::ShardIdent::MASTERCHAIN,
            seqno: 7,
            root_hash: HashBytes([1; 32]),
            file_hash: HashBytes([2; 32]),
        };
        let journal = Journal {
            file_len: 1000,
            file_blake3: [3; 32],
            rows: 10,
            cursor_rows: 4,
            cursor_offset: 400,
            checkpoint: Some(id),
            roots: vec![(id, HashBytes([4; 32]))],
        };
        let bytes = journal.encode();
        assert_eq!(Journal::decode(&bytes).unwrap(), journal);
        assert!(Journal::decode(&bytes[..bytes.len() - 1]).is_err());
        let mut bad = bytes.clone();
        bad[0] = 9;
        assert!(Journal::decode(&bad).unwrap_err().contains("version"));
        let mut past = journal.clone();
        past.cursor_rows = 11;
        assert!(Journal::decode(&past.encode())
            .unwrap_err()
            .contains("past"));
    }
}
