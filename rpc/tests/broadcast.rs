//! rpc.md §10 item 15: valid external messages reach the network listener byte-identical; every corrupted
//! variant is dropped before it.

use std::net::SocketAddr;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use parking_lot::Mutex;
use regolith_rpc::proto::broadcast_body;
use regolith_rpc::{BlockchainRpcService, BroadcastListener};
use tycho_network::{Direction, InboundRequestMeta, PeerId};
use tycho_types::boc::ser::BocHeader;
use tycho_types::cell::{Cell, CellBuilder, CellFamily, HashBytes, Store};
use tycho_types::models::{ExtOutMsgInfo, IntMsgInfo, MsgInfo};
use tycho_types::prelude::Boc;

mod common;

use common::fixture_externals;

#[derive(Default)]
struct Collector(Mutex<Vec<(PeerId, Bytes)>>);

#[async_trait]
impl BroadcastListener for Collector {
    async fn handle_message(&self, meta: Arc<InboundRequestMeta>, message: Bytes) {
        self.0.lock().push((meta.peer_id, message));
    }
}

fn setup() -> (BlockchainRpcService, Arc<Collector>) {
    let collector = Arc::new(Collector::default());
    let svc = BlockchainRpcService::builder()
        .with_storage(Arc::new(common::StubStorage::default()))
        .with_provider(Arc::new(common::StubProvider::new(1 << 20)))
        .with_broadcast_listener(collector.clone())
        .build();
    (svc, collector)
}

fn meta() -> Arc<InboundRequestMeta> {
    Arc::new(InboundRequestMeta {
        peer_id: PeerId([7; 32]),
        origin: Direction::Inbound,
        remote_address: SocketAddr::from(([127, 0, 0, 2], 1000)),
    })
}

/// Sends a raw overlay message body; returns whether the listener got exactly `expected`.
async fn deliver(svc: &BlockchainRpcService, collector: &Collector, body: Bytes) -> Option<Bytes> {
    collector.0.lock().clear();
    svc.handle_message(meta(), body).await;
    let got = collector.0.lock().clone();
    assert!(got.len() <= 1);
    got.into_iter().next().map(|(peer, msg)| {
        assert_eq!(peer, PeerId([7; 32]));
        msg
    })
}

fn boc(cell: &Cell) -> Vec<u8> {
    Boc::encode(cell)
}

/// Destination kinds for the built message.
enum Dst {
    Std,
    Anycast,
    Var,
}

fn store_dst(b: &mut CellBuilder, dst: Dst) {
    match dst {
        Dst::Std => {
            b.store_small_uint(0b10, 2).unwrap();
            b.store_bit_zero().unwrap();
            b.store_u8(0).unwrap();
            b.store_u256(&HashBytes([0x5a; 32])).unwrap();
        }
        Dst::Anycast => {
            b.store_small_uint(0b10, 2).unwrap();
            b.store_bit_one().unwrap();
            b.store_small_uint(1, 5).unwrap(); // depth 1
            b.store_bit_one().unwrap(); // rewrite_pfx
            b.store_u8(0).unwrap();
            b.store_u256(&HashBytes([0x5a; 32])).unwrap();
        }
        Dst::Var => {
            b.store_small_uint(0b11, 2).unwrap();
            b.store_bit_zero().unwrap();
            b.store_u8(0b1000_0000).unwrap(); // addr_len:(## 9) = 256
            b.store_bit_zero().unwrap();
            b.store_u32(0).unwrap();
            b.store_u256(&HashBytes([0x5a; 32])).unwrap();
        }
    }
}

/// ext_in_msg_info$10 src:addr_none dst import_fee:0, then init and body as given.
fn ext_message(
    dst: Dst,
    init: impl FnOnce(&mut CellBuilder),
    body: impl FnOnce(&mut CellBuilder),
) -> Cell {
    let mut b = CellBuilder::new();
    b.store_small_uint(0b10, 2).unwrap();
    b.store_small_uint(0b00, 2).unwrap();
    store_dst(&mut b, dst);
    b.store_small_uint(0, 4).unwrap();
    init(&mut b);
    body(&mut b);
    b.build().unwrap()
}

fn no_init(b: &mut CellBuilder) {
    b.store_bit_zero().unwrap();
}

fn inline_body(b: &mut CellBuilder) {
    b.store_bit_zero().unwrap();
    b.store_u32(0xdeadbeef).unwrap();
}

fn leaf(i: u32) -> Cell {
    let mut b = CellBuilder::new();
    b.store_u32(i).unwrap();
    b.build().unwrap()
}

fn ref_body(child: Cell) -> impl FnOnce(&mut CellBuilder) {
    move |b: &mut CellBuilder| {
        b.store_bit_one().unwrap();
        b.store_reference(child).unwrap();
    }
}

/// A 4-ary tree of distinct cells with `bits` data bits each, `count` leaves.
fn wide_tree(count: u32, bits: u16) -> Cell {
    let mut level: Vec<Cell> = (0..count)
        .map(|i| {
            let mut b = CellBuilder::new();
            b.store_u32(i).unwrap();
            b.store_zeros(bits.saturating_sub(32)).unwrap();
            b.build().unwrap()
        })
        .collect();
    let mut tag = count;
    while level.len() > 1 {
        level = level
            .chunks(4)
            .map(|group| {
                let mut b = CellBuilder::new();
                tag += 1;
                b.store_u32(tag).unwrap();
                for c in group {
                    b.store_reference(c.clone()).unwrap();
                }
                b.build().unwrap()
            })
            .collect();
    }
    level.pop().unwrap()
}

#[tokio::test]
async fn item15_fixture_externals_reach_the_listener() {
    let (svc, collector) = setup();
    for message in fixture_externals() {
        let got = deliver(&svc, &collector, broadcast_body(&message)).await;
        assert_eq!(got.as_deref(), Some(message.as_slice()));
    }
}

#[tokio::test]
async fn item15_built_valid_messages_pass() {
    let (svc, collector) = setup();
    // the baselines of the corrupted variants below are valid
    let inline = boc(&ext_message(Dst::Std, no_init, inline_body));
    assert!(deliver(&svc, &collector, broadcast_body(&inline))
        .await
        .is_some());
    let by_ref = boc(&ext_message(Dst::Std, no_init, ref_body(leaf(1))));
    assert!(deliver(&svc, &collector, broadcast_body(&by_ref))
        .await
        .is_some());
    let init_ref = boc(&ext_message(
        Dst::Std,
        |b| {
            b.store_bit_one().unwrap();
            b.store_bit_one().unwrap();
            let mut s = CellBuilder::new();
            s.store_zeros(5).unwrap();
            b.store_reference(s.build().unwrap()).unwrap();
        },
        inline_body,
    ));
    assert!(deliver(&svc, &collector, broadcast_body(&init_ref))
        .await
        .is_some());
    // a big (> 4096 B, validated on the blocking pool) but legal message
    let big = boc(&ext_message(
        Dst::Std,
        no_init,
        ref_body(wide_tree(300, 1023)),
    ));
    assert!(big.len() > 4096 && big.len() <= 65_535, "{}", big.len());
    assert!(deliver(&svc, &collector, broadcast_body(&big))
        .await
        .is_some());
    // 512 deep is still fine
    let mut chain = leaf(0);
    for i in 1..512 {
        let mut b = CellBuilder::new();
        b.store_u32(i).unwrap();
        b.store_reference(chain).unwrap();
        chain = b.build().unwrap();
    }
    let deep_ok = ext_message(Dst::Std, no_init, ref_body(chain));
    assert_eq!(deep_ok.repr_depth(), 512);
    assert!(deliver(&svc, &collector, broadcast_body(&boc(&deep_ok)))
        .await
        .is_some());
}

#[tokio::test]
async fn item15_corrupted_variants_are_dropped() {
    let (svc, collector) = setup();
    let valid = fixture_externals().remove(0);
    let mut variants: Vec<(&str, &str, Bytes)> = Vec::new();

    variants.push((
        "truncated BOC",
        "unexpected EOF",
        broadcast_body(&valid[..valid.len() - 1]),
    ));

    let a = Boc::decode(&valid).unwrap();
    let b = leaf(9);
    let mut header = BocHeader::<ahash_state::State>::with_root(&*a);
    header.add_root(&*b);
    let mut two = Vec::new();
    header.encode(&mut two);
    variants.push(("two roots", "too many root cells", broadcast_body(&two)));

    let huge = boc(&ext_message(
        Dst::Std,
        no_init,
        ref_body(wide_tree(600, 1023)),
    ));
    assert!(huge.len() > 65_535, "{}", huge.len());
    variants.push(("BOC over 65535 bytes", "BOC of ", broadcast_body(&huge)));

    let with_info = |info: MsgInfo| {
        let mut bld = CellBuilder::new();
        info.store_into(&mut bld, Cell::empty_context()).unwrap();
        no_init(&mut bld);
        inline_body(&mut bld);
        bld.build().unwrap()
    };
    let internal = with_info(MsgInfo::Int(IntMsgInfo::default()));
    variants.push((
        "internal header",
        "not an ext_in_msg_info",
        broadcast_body(&boc(&internal)),
    ));
    let ext_out = with_info(MsgInfo::ExtOut(ExtOutMsgInfo::default()));
    variants.push((
        "ext-out header",
        "not an ext_in_msg_info",
        broadcast_body(&boc(&ext_out)),
    ));
    variants.push((
        "anycast dst",
        "anycast destination",
        broadcast_body(&boc(&ext_message(Dst::Anycast, no_init, inline_body))),
    ));
    variants.push((
        "addr_var dst",
        "addr_var destination",
        broadcast_body(&boc(&ext_message(Dst::Var, no_init, inline_body))),
    ));

    let pruned = {
        let mut bld = CellBuilder::new();
        bld.set_exotic(true);
        bld.store_u8(1).unwrap(); // pruned branch
        bld.store_u8(1).unwrap(); // level mask
        bld.store_u256(&HashBytes([3; 32])).unwrap();
        bld.store_u16(0).unwrap();
        bld.build().unwrap()
    };
    variants.push(("exotic root", "exotic root", broadcast_body(&boc(&pruned))));

    let mut chain = leaf(0);
    for i in 1..520 {
        let mut bld = CellBuilder::new();
        bld.store_u32(i).unwrap();
        bld.store_reference(chain).unwrap();
        chain = bld.build().unwrap();
    }
    variants.push((
        "depth over 512",
        "depth 520",
        broadcast_body(&boc(&ext_message(Dst::Std, no_init, ref_body(chain)))),
    ));

    let many = {
        let mut level: Vec<Cell> = (0..8200u32)
            .map(|i| {
                let mut bld = CellBuilder::new();
                bld.store_u16(i as u16).unwrap();
                bld.build().unwrap()
            })
            .collect();
        while level.len() > 1 {
            level = level
                .chunks(4)
                .map(|g| {
                    let mut bld = CellBuilder::new();
                    for c in g {
                        bld.store_reference(c.clone()).unwrap();
                    }
                    bld.build().unwrap()
                })
                .collect();
        }
        boc(&ext_message(
            Dst::Std,
            no_init,
            ref_body(level.pop().unwrap()),
        ))
    };
    assert!(many.len() <= 65_535, "{}", many.len());
    variants.push((
        "more than 8192 cells",
        "cells declared",
        broadcast_body(&many),
    ));

    let ref_with_bits = ext_message(Dst::Std, no_init, |bld| {
        bld.store_bit_one().unwrap();
        bld.store_reference(leaf(1)).unwrap();
        bld.store_u8(0xff).unwrap();
    });
    variants.push((
        "body ref flag with data bits",
        "body reference flag",
        broadcast_body(&boc(&ref_with_bits)),
    ));

    let init_trailing = ext_message(
        Dst::Std,
        |bld| {
            bld.store_bit_one().unwrap();
            bld.store_bit_one().unwrap();
            let mut s = CellBuilder::new();
            s.store_zeros(5).unwrap();
            s.store_bit_one().unwrap();
            bld.store_reference(s.build().unwrap()).unwrap();
        },
        inline_body,
    );
    variants.push((
        "StateInit ref with trailing data",
        "state init reference with trailing data",
        broadcast_body(&boc(&init_trailing)),
    ));

    let good = broadcast_body(&valid);
    let mut wrong_first = good.to_vec();
    wrong_first[0] ^= 1;
    variants.push((
        "wrong first prefix",
        "wrong first prefix",
        Bytes::from(wrong_first),
    ));
    let mut wrong_second = good.to_vec();
    wrong_second[4] ^= 1;
    variants.push((
        "wrong second prefix",
        "wrong second prefix",
        Bytes::from(wrong_second),
    ));
    let mut past_padding = good.to_vec();
    past_padding.push(0);
    variants.push((
        "one byte past the padding",
        "length and padding",
        Bytes::from(past_padding),
    ));
    variants.push(("body under 8 bytes", "under 8 bytes", good.slice(..7)));

    // control: the unmodified message passes
    assert!(deliver(&svc, &collector, good.clone()).await.is_some());
    for (name, expected, body) in variants {
        let reason = regolith_rpc::broadcast::unwrap_broadcast(&body)
            .and_then(regolith_rpc::broadcast::validate_external_message)
            .expect_err(name)
            .to_string();
        assert!(
            reason.contains(expected),
            "{name}: dropped for another reason: {reason}"
        );
        assert!(
            deliver(&svc, &collector, body).await.is_none(),
            "{name} must be dropped"
        );
    }
}

mod ahash_state {
    /// A deterministic hasher state for the BOC encoder.
    pub(crate) type State =
        std::hash::BuildHasherDefault<std::collections::hash_map::DefaultHasher>;
}
