//! Block ids in wire form and in text form.
//!
//! - Wire: the first 80 bytes through the bare TL `blockchain.blockId` codec of the RPC (§2.1) and through
//!   formats' value form. Both encodings are fixed-size and canonical: encode(decode(x)) == x. What the RPC
//!   accepts (a stricter shard check) formats accepts too, as the same id. The 48-byte block key of the same
//!   bytes round-trips as well.
//! - Text: the whole input as UTF-8 through `parse_block_id`, the CLI's `BlockRef`/`FullBlockId` and the
//!   persistent-state object names of rpc.md §4.3.2. Text parsing is not canonical (hex case, surrounding
//!   whitespace, a `+` sign), so the check is parse(print(parse(x))) == parse(x).
#![no_main]

use libfuzzer_sys::fuzz_target;
use regolith_formats::block_id::{decode_block_id, encode_block_id, parse_block_id, BlockKey};
use regolith_formats::persistent_state::{
    block_key_text, manifest_object_name, parse_state_object_name, state_object_name, StateObject,
};
use regolith_cli::block_ref::{BlockRef, FullBlockId};
use regolith_rpc::proto::codec;

fuzz_target!(|data: &[u8]| {
    if let Some(wire) = data.get(..80) {
        let mut packet = wire;
        let rpc = codec::block_id::read(&mut packet);
        let formats = decode_block_id(wire);
        if let Ok(id) = &formats {
            assert_eq!(&encode_block_id(id)[..], wire, "encode(decode(x)) != x");
        }
        if let Ok(id) = &rpc {
            assert!(packet.is_empty());
            let mut out = Vec::new();
            codec::block_id::write(id, &mut out);
            assert_eq!(out, wire, "TL encode(decode(x)) != x");
            assert_eq!(
                formats.as_ref().ok(),
                Some(id),
                "the RPC accepts what formats refuses"
            );
        }
        if let Ok(key) = BlockKey::from_slice(&data[..48]) {
            assert_eq!(key.as_bytes(), &data[..48]);
            if let Ok(id) = key.to_block_id(Default::default()) {
                assert_eq!(BlockKey::of(&id), key);
            }
            if let Some(next) = key.successor() {
                assert!(next > key);
            }
        }
    }

    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(id) = parse_block_id(text) {
        let printed = id.to_string();
        assert_eq!(parse_block_id(&printed).as_ref(), Ok(&id), "{printed}");
        assert_eq!(parse_block_id(&block_key_text(&id)).as_ref(), Ok(&id));
        assert_eq!(printed.parse::<FullBlockId>(), Ok(FullBlockId(id)));
    }
    if let Ok(block_ref) = text.parse::<BlockRef>() {
        match block_ref {
            BlockRef::McSeqno(_) => {}
            BlockRef::Full(_) | BlockRef::Short { .. } => {
                let printed = block_ref.to_string();
                assert_eq!(printed.parse::<BlockRef>(), Ok(block_ref), "{printed}");
            }
        }
    }
    if let Some(object) = parse_state_object_name(text) {
        let printed = match object {
            StateObject::State(block, kind, part) => {
                state_object_name(&block, kind, part).expect("a parsed object has a name")
            }
            StateObject::Manifest(block) => manifest_object_name(&block),
        };
        assert_eq!(parse_state_object_name(&printed), Some(object), "{printed}");
    }
});
