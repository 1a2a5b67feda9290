//! `regolith bench queue`: the internal-queue cases of queue.md §12 on fresh temp databases.

use std::path::Path;

use anyhow::{bail, Context, Result};
use regolith_formats::queue_state::QueueState;
use regolith_formats::BlockId;

use super::queue_cases::{self as bench, BenchCase, BenchParams, ImportInput};

/// `bench queue`: the cases of queue.md §12 on fresh temp databases, printed as a table or JSON.
pub(super) fn queue(json: bool, quick: bool, cases: &[String], import_file: &Path) -> Result<()> {
    let selected: Vec<BenchCase> = if cases.is_empty() {
        BenchCase::ALL.to_vec()
    } else {
        let mut out = Vec::new();
        for name in cases {
            match BenchCase::ALL.iter().find(|c| c.name() == name.trim()) {
                Some(c) => out.push(*c),
                None => bail!(
                    "unknown case `{name}`; cases: {}",
                    BenchCase::ALL.map(BenchCase::name).join(", ")
                ),
            }
        }
        out
    };
    let import_input = if selected.contains(&BenchCase::Import) {
        Some(import_input(import_file)?)
    } else {
        None
    };
    let mut params = BenchParams {
        import_input,
        ..BenchParams::default()
    };
    if quick {
        params = params.quick();
    }
    if cfg!(debug_assertions) && !json {
        eprintln!("note: this is a debug build; figures are only meaningful with --release");
    }
    let rows = bench::run(&selected, &params)?;
    if json {
        println!("{}", bench::format_json(&rows));
    } else {
        print!("{}", bench::format_table(&rows));
    }
    Ok(())
}

/// The import case's input: the state's own block, newest diff hash and diff count are read from the file.
fn import_input(path: &Path) -> Result<ImportInput> {
    let data = std::fs::read(path)
        .with_context(|| format!("cannot read the import-case queue state {}", path.display()))?;
    let state = QueueState::parse(&data)
        .with_context(|| format!("{} is not a queue state", path.display()))?;
    let header = &state.header;
    let diff_hash = *header
        .diff_hashes()
        .first()
        .context("a queue state without diffs")?;
    let block_id = BlockId {
        shard: header.shard,
        seqno: header.seqno,
        root_hash: Default::default(),
        file_hash: Default::default(),
    };
    let tail_len = header.diffs().len() as u32;
    Ok(ImportInput {
        block_id,
        diff_hash,
        tail_len,
        data,
    })
}
