//! The external-message validity check of broadcasts (rpc.md §5.3–5.4): the input as a raw BOC through
//! `validate_external_message`, and as a broadcast body through the framing check `unwrap_broadcast`. The
//! framing is not canonical (the 4-byte length form is accepted for short messages), so the check is
//! unwrap(wrap(unwrap(x))) == unwrap(x); wrapping any BOC and unwrapping it is the identity. A message that
//! validates decodes to a cell tree that encodes and decodes to the same root.
#![no_main]

use libfuzzer_sys::fuzz_target;
use regolith_rpc::broadcast::{unwrap_broadcast, validate_external_message};
use regolith_rpc::proto::broadcast_body;
use tycho_types::boc::Boc;

fuzz_target!(|data: &[u8]| {
    if validate_external_message(data).is_ok() {
        let root = Boc::decode(data).expect("a valid message decodes");
        let again = Boc::decode(Boc::encode(&root)).expect("a re-encoded message decodes");
        assert_eq!(again.repr_hash(), root.repr_hash());
        assert!(validate_external_message(&Boc::encode(&root)).is_ok());
    }
    if data.len() < (1 << 24) {
        let body = broadcast_body(data);
        assert_eq!(unwrap_broadcast(&body), Ok(data), "unwrap(wrap(x)) != x");
    }
    if let Ok(boc) = unwrap_broadcast(data) {
        let body = broadcast_body(boc);
        assert_eq!(
            unwrap_broadcast(&body),
            Ok(boc),
            "unwrap(wrap(unwrap(x))) != unwrap(x)"
        );
        // The BOC inside a broadcast goes through the same check.
        let _ = validate_external_message(boc);
    }
});
