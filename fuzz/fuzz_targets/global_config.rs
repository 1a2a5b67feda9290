//! `global.json` (node/src/config.rs), a Tycho file: parsed as the node does (unknown fields logged), then
//! every bootstrap peer as a signed peer info. JSON is not canonical, so the round trip is on values: the
//! config serialises to JSON that parses to a config that serialises the same (floats to 1e-12, see
//! `same_json`: the bootstrap peers are kept as raw JSON values).
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use regolith_fuzz::same_json;
use regolith_node::config::GlobalConfig;
use regolith_node::files::{parse_json, UnknownFields};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = Path::new("global.json");
    let Ok(config) = parse_json::<GlobalConfig>(text, path, UnknownFields::Log) else {
        return;
    };
    let peers = config.parse_bootstrap_peers();
    if let Ok(peers) = &peers {
        assert_eq!(peers.len(), config.bootstrap_peers.len());
    }
    let _ = config.zerostate.as_block_id();

    let first = serde_json::to_string(&config).expect("a parsed config serialises");
    let again: GlobalConfig = parse_json(&first, path, UnknownFields::Reject)
        .unwrap_or_else(|e| panic!("a serialised config does not parse: {e:#}\n{first}"));
    let second = serde_json::to_string(&again).unwrap();
    assert!(same_json(&first, &second), "{first}\n{second}");
    assert_eq!(again.parse_bootstrap_peers().is_ok(), peers.is_ok());
});
