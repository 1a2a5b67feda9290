//! TL `block.queueDiff` (formats::queue_diff). The format is canonical (fixed-size fields, no trailing bytes
//! accepted, strictly ordered lists), so a diff that parses re-encodes to exactly the input, and its hash is
//! the BLAKE3 of the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use regolith_formats::queue_diff::{queue_diff_hash, QueueDiff};
use regolith_formats::BlockId;

fuzz_target!(|data: &[u8]| {
    let Ok(diff) = QueueDiff::parse(data) else {
        return;
    };
    assert_eq!(diff.to_bytes(), data, "encode(decode(x)) != x");
    assert_eq!(diff.compute_hash(), queue_diff_hash(data));
    let block = BlockId {
        shard: diff.shard,
        seqno: diff.seqno,
        root_hash: diff.prev_hash,
        file_hash: diff.prev_hash,
    };
    assert_eq!(QueueDiff::parse_for_block(data, &block).as_ref(), Ok(&diff));
    let other = BlockId {
        seqno: diff.seqno.wrapping_add(1),
        ..block
    };
    assert!(QueueDiff::parse_for_block(data, &other).is_err());
});
