//! TL responses: every decoder the blockchain RPC client applies to an answer (rpc.md §7), all on the same
//! bytes: `overlay.response` of keyBlockIds, BlockFull, KeyBlockProof, ZerostateProof, ArchiveInfo,
//! PersistentStateInfo and data, then the split-metadata check of §7.8 on a decoded foundWithParts.
//! Round trips: see `response_round_trip` (TL `bytes` is not canonical).
#![no_main]

use libfuzzer_sys::fuzz_target;
use regolith_formats::persistent_state::{validate_split_parts, StateKind};
use regolith_formats::{BlockId, HashBytes, ShardIdent};
use regolith_fuzz::response_round_trip;
use regolith_rpc::proto::{self, OverlayResponse};

fuzz_target!(|answer: &[u8]| {
    response_round_trip::<proto::KeyBlockIds>(answer);
    response_round_trip::<proto::KeyBlockProof>(answer);
    response_round_trip::<proto::ZerostateProof>(answer);
    response_round_trip::<proto::ArchiveInfo>(answer);
    response_round_trip::<proto::Data>(answer);
    response_round_trip::<proto::BlockFull>(answer);
    if let Some(OverlayResponse::Ok(proto::PersistentStateInfo::FoundWithParts {
        split_depth,
        parts,
        ..
    })) = response_round_trip::<proto::PersistentStateInfo>(answer)
    {
        let prefixes: Vec<u64> = parts.iter().map(|p| p.prefix).collect();
        let Ok(depth) = u8::try_from(split_depth) else {
            return;
        };
        for prefix in [
            0x8000_0000_0000_0000u64,
            0x4000_0000_0000_0000,
            0xe000_0000_0000_0000,
        ] {
            let block = BlockId {
                shard: ShardIdent::new(0, prefix).expect("a valid shard"),
                seqno: 1,
                root_hash: HashBytes::ZERO,
                file_hash: HashBytes::ZERO,
            };
            if validate_split_parts(&block, StateKind::Shard, depth, &prefixes).is_ok() {
                assert!((1..=6).contains(&depth) && prefixes.len() <= 1 << depth);
            }
            assert!(validate_split_parts(&block, StateKind::Queue, depth, &prefixes).is_err());
        }
        let mc = BlockId {
            shard: ShardIdent::MASTERCHAIN,
            seqno: 1,
            root_hash: HashBytes::ZERO,
            file_hash: HashBytes::ZERO,
        };
        assert!(validate_split_parts(&mc, StateKind::Shard, depth, &prefixes).is_err());
    }
});
