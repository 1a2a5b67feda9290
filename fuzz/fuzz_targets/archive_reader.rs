//! The archive reader (formats::archive::ArchiveReader) on a plain decompressed stream, or (first byte odd) on
//! a zstd stream it decodes itself. The plain format is canonical: the entries read back, written again with
//! the ArchiveWriter, are byte for byte the input up to the first error (the whole input when it reads).
#![no_main]

use std::io::Read;

use libfuzzer_sys::fuzz_target;
use regolith_formats::archive::{ArchiveReader, ArchiveWriter, ARCHIVE_PREFIX};

/// Decompressed bytes read from a zstd input at most: a tiny frame can expand to gigabytes, which is a
/// valid (if absurd) archive, not a decoder bug.
const MAX_DECOMPRESSED: u64 = 16 << 20;

fuzz_target!(|input: &[u8]| {
    let Some((&mode, data)) = input.split_first() else {
        return;
    };
    if mode & 1 == 1 {
        let Ok(decoder) = zstd::stream::read::Decoder::new(data) else {
            return;
        };
        let mut reader = ArchiveReader::new(decoder.take(MAX_DECOMPRESSED));
        let mut last_offset = 0;
        while let Ok(Some(entry)) = reader.next_entry() {
            assert!(entry.offset >= last_offset);
            last_offset = entry.offset;
        }
        assert!(
            reader.next_entry().unwrap().is_none(),
            "a failed reader stays failed"
        );
        return;
    }

    let mut reader = ArchiveReader::new(data);
    let mut writer = ArchiveWriter::new(Vec::new()).unwrap();
    let end = loop {
        match reader.next_entry() {
            Ok(Some(entry)) => {
                assert_eq!(
                    entry.offset,
                    writer.written(),
                    "entry offsets follow the stream"
                );
                writer
                    .write_entry(&entry.block_id, entry.ty, &entry.data)
                    .unwrap();
            }
            Ok(None) => break data.len() as u64,
            Err(e) => {
                if e.offset == 0 {
                    assert!(data.len() < 4 || data[..4] != ARCHIVE_PREFIX, "{e}");
                    return;
                }
                assert!(
                    e.offset as usize <= data.len(),
                    "error offset past the input: {e}"
                );
                break e.offset;
            }
        }
    };
    let written = writer.finish();
    assert_eq!(&written[..], &data[..end as usize], "write(read(x)) != x");
    assert!(
        reader.next_entry().unwrap().is_none(),
        "after the end, nothing more"
    );
});
