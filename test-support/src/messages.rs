//! Messages for the tests that send them.

use tycho_types::cell::{CellBuilder, HashBytes};

/// A valid external message BOC: ext_in_msg_info, std dst, no init, an inline body of `tag`.
pub fn external_message(tag: u32) -> Vec<u8> {
    let mut b = CellBuilder::new();
    b.store_small_uint(0b10, 2).unwrap(); // ext_in_msg_info
    b.store_small_uint(0b00, 2).unwrap(); // src: addr_none
    b.store_small_uint(0b10, 2).unwrap(); // dst: addr_std
    b.store_bit_zero().unwrap(); // no anycast
    b.store_u8(0).unwrap();
    b.store_u256(&HashBytes([0x5a; 32])).unwrap();
    b.store_small_uint(0, 4).unwrap(); // import_fee
    b.store_bit_zero().unwrap(); // no init
    b.store_bit_zero().unwrap(); // inline body
    b.store_u32(tag).unwrap();
    tycho_types::boc::Boc::encode(b.build().unwrap())
}
