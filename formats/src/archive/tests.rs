use std::io::Read;

use super::*;

fn fixture(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/fixtures")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("fixture {}: {e}", path.display()))
}

fn decompressed_archive_1() -> Vec<u8> {
    let mut out = Vec::new();
    zstd::stream::read::Decoder::new(&fixture("archive_1.bin")[..])
        .unwrap()
        .read_to_end(&mut out)
        .unwrap();
    out
}

#[test]
fn reads_archive_1_and_rewrites_identical_bytes() {
    let raw = decompressed_archive_1();
    assert_eq!(raw.len(), 698_296);
    assert_eq!(&raw[..4], &[0x65, 0x8F, 0x14, 0x29]);

    let entries: Vec<_> = ArchiveReader::new_compressed(&fixture("archive_1.bin")[..])
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(entries.len(), 321);
    for (i, e) in entries.iter().enumerate() {
        let expected = ArchiveEntryType::ALL[i / 107];
        assert_eq!(e.ty, expected, "entry {i}");
        assert_eq!(
            e.block_id,
            entries[i % 107].block_id,
            "same id order per type"
        );
    }
    let mc = entries[..107]
        .iter()
        .filter(|e| e.block_id.is_masterchain())
        .count();
    assert_eq!(mc, 100);

    let mut writer = ArchiveWriter::new(Vec::new()).unwrap();
    for e in &entries {
        writer.write_entry(&e.block_id, e.ty, &e.data).unwrap();
    }
    assert_eq!(writer.written(), raw.len() as u64);
    assert!(
        writer.finish() == raw,
        "writer output must equal the reference bytes"
    );
}

#[test]
fn truncation_is_reported_with_offset() {
    let raw = decompressed_archive_1();
    // Cut inside the data of the third entry.
    let entries: Vec<_> = ArchiveReader::new(&raw[..])
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let third = &entries[2];
    let cut = third.offset as usize + ENTRY_HEADER_LEN + 10;
    let mut reader = ArchiveReader::new(&raw[..cut]);
    assert!(reader.next_entry().unwrap().is_some());
    assert!(reader.next_entry().unwrap().is_some());
    let err = reader.next_entry().unwrap_err();
    assert_eq!(err.offset, third.offset);
    assert_eq!(err.block_id, Some(third.block_id));
    assert!(matches!(
        err.kind,
        ArchiveErrorKind::TruncatedData { read: 10, .. }
    ));
    assert!(err.to_string().contains(&third.offset.to_string()));

    // Cut inside a header.
    let cut = third.offset as usize + 50;
    let err = ArchiveReader::new(&raw[..cut]).nth(2).unwrap().unwrap_err();
    assert!(matches!(err.kind, ArchiveErrorKind::TruncatedHeader(50)));

    // Empty stream and a bad prefix.
    assert!(ArchiveReader::new(&[][..]).next_entry().is_err());
    assert!(ArchiveReader::new(&[1, 2, 3, 4][..]).next_entry().is_err());
    // Prefix only: a valid empty archive.
    assert!(ArchiveReader::new(&ARCHIVE_PREFIX[..])
        .next_entry()
        .unwrap()
        .is_none());
}

#[test]
fn corrupt_headers_are_rejected() {
    let raw = decompressed_archive_1();
    let second = ArchiveReader::new(&raw[..]).nth(1).unwrap().unwrap().offset as usize;
    for (field_offset, what) in [(0usize, "magic"), (84, "type"), (8, "prefix")] {
        let mut bad = raw.clone();
        bad[second + field_offset] ^= 0x01;
        if field_offset == 8 {
            // Clear the whole prefix so it has no tag bit.
            bad[second + 8..second + 16].fill(0);
        }
        let err = ArchiveReader::new(&bad[..]).nth(1).unwrap().unwrap_err();
        assert_eq!(err.offset as usize, second, "{what}");
    }
}

#[test]
fn corrupt_compressed_stream_is_an_error_not_a_panic() {
    let mut bad = fixture("archive_1.bin");
    let mid = bad.len() / 2;
    bad[mid] ^= 0xFF;
    let result: Result<Vec<_>, _> = ArchiveReader::new_compressed(&bad[..]).unwrap().collect();
    assert!(result.is_err());
}
