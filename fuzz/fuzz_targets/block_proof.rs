//! Block proof verification against the fixture zerostate's config: any proof BOC, for an mc block id and a
//! shard block id taken from the first 8 bytes, through `ParsedProof::parse` and `ProofChecker::verify`. It
//! never panics; a proof that verifies as signed has a signed weight above 2/3 of the total.
#![no_main]

use libfuzzer_sys::fuzz_target;
use regolith_formats::block_proof::NoKeyBlocks;
use regolith_formats::{BlockId, ParsedProof, ProofChecker, Proven, ShardIdent, ZerostateConfig};

fuzz_target!(|input: &[u8]| {
    if input.len() < 8 {
        return;
    }
    let (head, proof) = input.split_at(8);
    let seqno = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
    static CHECKER: std::sync::OnceLock<ProofChecker> = std::sync::OnceLock::new();
    let checker = CHECKER.get_or_init(|| {
        let raw = std::fs::read(regolith_fuzz::fixtures_dir().join("zerostate.boc")).unwrap();
        ProofChecker::new(ZerostateConfig::from_boc(&raw).unwrap())
    });
    // The id the proof claims to be for, if it parses far enough; else one from the head bytes.
    let claimed = tycho_types::boc::Boc::decode(proof)
        .ok()
        .and_then(|c| c.parse::<tycho_types::models::BlockProof>().ok())
        .map(|p| p.proof_for);
    let shard = if head[4] & 1 == 0 {
        ShardIdent::MASTERCHAIN
    } else {
        ShardIdent::BASECHAIN
    };
    let id = claimed.unwrap_or(BlockId {
        shard,
        seqno,
        root_hash: Default::default(),
        file_hash: Default::default(),
    });
    let Ok(parsed) = ParsedProof::parse(&id, proof) else {
        return;
    };
    if let Ok(Proven::Signed(by)) = checker.verify(&parsed, &NoKeyBlocks) {
        assert!(by.signed_weight * 3 > by.total_weight * 2);
    }
});
