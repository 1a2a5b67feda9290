//! Hashes and ids written as hex in fixtures and in what the binary prints.

use tycho_types::prelude::HashBytes;

/// 32 bytes from 64 hex digits; panics on anything else.
pub fn bytes32_from_hex(hex: &str) -> [u8; 32] {
    assert_eq!(hex.len(), 64, "not 32 bytes of hex: {hex:?}");
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16)
            .unwrap_or_else(|e| panic!("not hex: {hex:?}: {e}"));
    }
    out
}

/// A hash from 64 hex digits; panics on anything else.
pub fn hash_from_hex(hex: &str) -> HashBytes {
    HashBytes(bytes32_from_hex(hex))
}
