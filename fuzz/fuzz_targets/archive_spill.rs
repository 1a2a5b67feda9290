//! The archive source of the apply pipeline: a decompressed archive written in random splits into a
//! `SpillWriter` (framed and indexed as it goes), then read back through the index. The index holds exactly
//! the entries the archive reader reads before its first error, each read back byte for byte from the spill
//! file, and an entry cut short is never indexed.
#![no_main]

use std::io::Write;

use libfuzzer_sys::fuzz_target;
use regolith_formats::archive::{ArchiveLimits, ArchiveReader};
use regolith_fuzz::Splitter;
use regolith_node::apply::SpillWriter;

fuzz_target!(|input: &[u8]| {
    if input.len() < 8 {
        return;
    }
    let (seed, data) = input.split_at(8);
    let mut splitter = Splitter::new(seed);
    let max_piece = [1usize, 4, 92, 4096][splitter.next_u64() as usize % 4];
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("archive.spill");
    let limits = ArchiveLimits {
        max_entry_len: 1 << 16,
        max_entries: 1000,
    };
    let mut writer = SpillWriter::create(&path, limits).unwrap();
    for piece in splitter.pieces(data, max_piece) {
        if writer.write_all(piece).is_err() {
            break;
        }
    }
    let spilled = writer.finish("fuzz".into()).unwrap();
    let mut expected = Vec::new();
    for entry in ArchiveReader::new(data) {
        let Ok(entry) = entry else { break };
        if entry.data.len() > 1 << 16 || expected.len() >= 1000 {
            break;
        }
        expected.push(entry);
    }
    let index = spilled.index();
    // A second entry of one (block, type) ends the index where the reader keeps going.
    assert!(index.entries().len() <= expected.len());
    for (got, want) in index.entries().iter().zip(&expected) {
        assert_eq!(got.block_id, want.block_id);
        assert_eq!(got.ty, want.ty);
        assert_eq!(got.header_offset, want.offset);
        assert_eq!(spilled.read_entry(got).unwrap(), want.data);
    }
});
