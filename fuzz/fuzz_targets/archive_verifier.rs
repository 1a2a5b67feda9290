//! The streaming archive verifier (rpc.md §7.6) fed the input in random splits (split points come from the
//! first 8 bytes), checked against the archive reader on the same bytes: both accept exactly the same
//! streams, count the same entries and report an error at the same offset and block.
#![no_main]

use libfuzzer_sys::fuzz_target;
use regolith_formats::archive::{ArchiveReader, ArchiveVerifier};
use regolith_fuzz::Splitter;

fuzz_target!(|input: &[u8]| {
    if input.len() < 8 {
        return;
    }
    let (seed, data) = input.split_at(8);
    let mut splitter = Splitter::new(seed);
    let max_piece = [1usize, 3, 4, 91, 93, 4096][splitter.next_u64() as usize % 6];

    let mut verifier = ArchiveVerifier::new();
    let mut verified = Ok(());
    for piece in splitter.pieces(data, max_piece) {
        verified = verifier.write(piece);
        if verified.is_err() {
            break;
        }
    }
    let verified = match verified {
        Ok(()) => verifier.finish(),
        Err(e) => Err(e),
    };

    let mut reader = ArchiveReader::new(data);
    let mut entries = 0u64;
    let read = loop {
        match reader.next_entry() {
            Ok(Some(_)) => entries += 1,
            Ok(None) => break Ok(entries),
            Err(e) => break Err(e),
        }
    };

    match (verified, read) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "entry counts differ"),
        (Err(a), Err(b)) => {
            assert_eq!(a.offset, b.offset, "error offsets differ: {a} / {b}");
            assert_eq!(a.block_id, b.block_id, "error blocks differ: {a} / {b}");
        }
        (a, b) => panic!("verifier {a:?}, reader {b:?}"),
    }
});
