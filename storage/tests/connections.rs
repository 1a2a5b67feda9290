//! storage.md §12 scenarios 14–16: connections and waiting for Next1.

mod common;

use std::time::Duration;

use common::*;
use regolith_formats::ShardIdent;
use regolith_storage::tables::{BlockConnections, ConnectionKey};
use regolith_storage::{Direction, StorageError};

#[test]
fn s14_prev1_written_once() {
    let mut t = TempStorage::new();
    let id = mc_id(123);
    let (h, _) = t
        .s()
        .handles()
        .create_or_load_handle(&id, meta(123))
        .unwrap();
    let c = t.s().connections();
    c.store_connection(&h, Direction::Prev1, &mc_id(122))
        .unwrap();
    assert_eq!(
        c.load_connection(&id, Direction::Prev1).unwrap(),
        Some(mc_id(122))
    );
    c.store_connection(&h, Direction::Prev1, &mc_id(999))
        .unwrap();
    assert_eq!(
        c.load_connection(&id, Direction::Prev1).unwrap(),
        Some(mc_id(122))
    );
    drop(h);
    let s = t.reopen();
    assert!(s.handles().load_handle(&id).unwrap().unwrap().has_prev1());

    // The stored value is the 80-byte LE id.
    let (h2, _) = s
        .handles()
        .create_or_load_handle(&mc_id(124), meta(124))
        .unwrap();
    s.connections()
        .store_connection(&h2, Direction::Prev1, &id)
        .unwrap();
    let raw = s
        .db()
        .get_raw_value::<BlockConnections>(&ConnectionKey(
            regolith_formats::BlockKey::of(&mc_id(124)),
            Direction::Prev1,
        ))
        .unwrap()
        .unwrap()
        .clone();
    assert_eq!(raw.len(), 80);
    assert_eq!(
        &raw[..16],
        &[0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0, 0, 0, 0, 0x80, 0x7B, 0, 0, 0]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s15_wait_for_next1() {
    let t = TempStorage::new();
    let s = t.s().clone();
    let prev = shard_id(1);
    let next = shard_id(2);
    let (h, _) = s.handles().create_or_load_handle(&prev, meta(1)).unwrap();

    // Started before the store.
    let waiter = {
        let s = s.clone();
        tokio::spawn(async move { s.connections().wait_for_next1(&prev, None).await })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    s.connections()
        .store_connection(&h, Direction::Next1, &next)
        .unwrap();
    assert_eq!(waiter.await.unwrap().unwrap(), next);
    // After the store: at once.
    assert_eq!(
        s.connections()
            .wait_for_next1(&prev, Some(Duration::from_millis(1)))
            .await
            .unwrap(),
        next
    );
    // No store: timeout.
    let other = shard_id(3);
    assert!(matches!(
        s.connections()
            .wait_for_next1(&other, Some(Duration::from_millis(50)))
            .await,
        Err(StorageError::Timeout)
    ));
    assert_eq!(
        s.connections().next1_waiter_keys(),
        0,
        "a timed-out waiter unregisters"
    );

    // W1 dropped, W2 registered on the same key, store → W2 resolves.
    let (h3, _) = s.handles().create_or_load_handle(&other, meta(1)).unwrap();
    let w1 = {
        let s = s.clone();
        tokio::spawn(async move { s.connections().wait_for_next1(&other, None).await })
    };
    tokio::time::sleep(Duration::from_millis(10)).await;
    let w2 = {
        let s = s.clone();
        tokio::spawn(async move { s.connections().wait_for_next1(&other, None).await })
    };
    tokio::time::sleep(Duration::from_millis(10)).await;
    w1.abort();
    let _ = w1.await;
    s.connections()
        .store_connection(&h3, Direction::Next1, &shard_id(4))
        .unwrap();
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(5), w2)
            .await
            .unwrap()
            .unwrap()
            .unwrap(),
        shard_id(4)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn s16_no_lost_wakeups() {
    let t = TempStorage::new();
    let s = t.s().clone();
    for round in 0..10_000u32 {
        let prev = synthetic_id(ShardIdent::BASECHAIN, round, 7);
        let next = synthetic_id(ShardIdent::BASECHAIN, round + 1, 7);
        let (h, _) = s.handles().create_or_load_handle(&prev, meta(1)).unwrap();
        let waiter = {
            let s = s.clone();
            tokio::spawn(async move {
                s.connections()
                    .wait_for_next1(&prev, Some(Duration::from_secs(5)))
                    .await
            })
        };
        let writer = {
            let s = s.clone();
            tokio::spawn(async move {
                s.connections()
                    .store_connection(&h, Direction::Next1, &next)
            })
        };
        writer.await.unwrap().unwrap();
        let got = waiter.await.unwrap();
        assert_eq!(got.unwrap(), next, "round {round}");
    }
}
