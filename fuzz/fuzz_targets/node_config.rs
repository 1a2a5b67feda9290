//! `node.json` (node/src/config.rs): the parser the node uses (unknown fields at any depth rejected), then
//! the checks serde cannot make (`NodeConfig::validate`), the key and the announced address. JSON is not a
//! canonical encoding (whitespace, key order, number forms, defaults), so the round trip is on values: a
//! config that parses serialises to JSON that parses again, with nothing unknown, to a config that
//! serialises to the same JSON (floats to 1e-12, see `same_json`).
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use regolith_fuzz::same_json;
use regolith_node::config::NodeConfig;
use regolith_node::files::{parse_json, UnknownFields};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = Path::new("node.json");
    let Ok(config) = parse_json::<NodeConfig>(text, path, UnknownFields::Reject) else {
        return;
    };
    let _ = config.validate();
    let _ = config.secret_key();
    let _ = config.announced_address();

    let first = serde_json::to_string(&config).expect("a parsed config serialises");
    let again: NodeConfig = parse_json(&first, path, UnknownFields::Reject)
        .unwrap_or_else(|e| panic!("a serialised config does not parse: {e:#}\n{first}"));
    let second = serde_json::to_string(&again).unwrap();
    assert!(
        same_json(&first, &second),
        "decode(encode(decode(x))) != decode(x)\n{first}\n{second}"
    );
    assert_eq!(config.validate().is_ok(), again.validate().is_ok());
});
