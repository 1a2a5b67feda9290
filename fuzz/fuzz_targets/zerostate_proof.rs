//! The zerostate proof check (rpc.md §3.3) on any BOC, against the fixture zerostate's root hash: it never
//! panics, and a proof it accepts has the zerostate's root as its level-0 hash and lists shards; against
//! another root nothing passes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use regolith_formats::zerostate::check_zerostate_proof;
use tycho_types::cell::HashBytes;

fuzz_target!(|data: &[u8]| {
    let expected = regolith_fuzz::fixture_zerostate().id.root_hash;
    if let Ok(checked) = check_zerostate_proof(data, &expected) {
        let root = tycho_types::boc::Boc::decode(data).expect("it decoded once");
        assert_eq!(root.hash(0), &expected);
        assert!(!checked.extra.shards.as_dict().is_empty());
    }
    assert!(check_zerostate_proof(data, &HashBytes([0x42; 32])).is_err());
});
