//! `CheckedBlock::check` (the one check of a block's data, proof and queue diff before the apply path takes
//! it) on any three parts: the input is split by its first two u16s. The id is the one the data claims (its
//! BLAKE3 as file hash, its root's hash) so the parse gets past the hash checks; a block that checks is this
//! block's: its id, its diff's hash and its prev ids stay what they were checked as.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use regolith_formats::{BlockId, CheckedBlock, ShardIdent};

fuzz_target!(|input: &[u8]| {
    if input.len() < 4 {
        return;
    }
    let a = usize::from(u16::from_le_bytes([input[0], input[1]]));
    let b = usize::from(u16::from_le_bytes([input[2], input[3]]));
    let rest = &input[4..];
    let a = a.min(rest.len());
    let (data, rest) = rest.split_at(a);
    let b = b.min(rest.len());
    let (proof, diff) = rest.split_at(b);
    let root_hash = tycho_types::boc::Boc::decode(data)
        .map(|c| *c.repr_hash())
        .unwrap_or_default();
    for shard in [ShardIdent::MASTERCHAIN, ShardIdent::BASECHAIN] {
        let id = BlockId {
            shard,
            seqno: 1,
            root_hash,
            file_hash: regolith_formats::block::file_hash(data),
        };
        if let Ok(checked) = CheckedBlock::check(
            &id,
            Bytes::copy_from_slice(data),
            Bytes::copy_from_slice(proof),
            Bytes::copy_from_slice(diff),
        ) {
            assert_eq!(checked.id(), &id);
            assert_eq!(
                checked.queue_diff_hash(),
                &regolith_formats::queue_diff::queue_diff_hash(diff)
            );
        }
    }
});
