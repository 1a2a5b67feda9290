//! rpc.md §10 item 9: the ingress policy of §6 through tycho-network's public overlay, client on 127.0.0.x,
//! server on another loopback address.

mod common;

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use common::net::*;
use common::*;
use futures_util::future::join_all;
use regolith_rpc::config::{RateLimitsConfig, TrafficConfig};
use regolith_rpc::proto::{self, broadcast_body, rpc};
use regolith_rpc::{BlockchainRpcService, BroadcastListener};
use tycho_network::InboundRequestMeta;
use tycho_util::rate_limit::{RateLimitConfig, TrafficLimit};

#[derive(Default)]
struct Counter(parking_lot::Mutex<usize>);

#[async_trait]
impl BroadcastListener for Counter {
    async fn handle_message(&self, _: Arc<InboundRequestMeta>, _: Bytes) {
        *self.0.lock() += 1;
    }
}

/// The tests measure token buckets in wall time: they run one at a time so that a loaded machine spreads
/// a burst as little as possible.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn limit(rate: u32, burst: u32) -> TrafficLimit {
    TrafficLimit::new(
        NonZeroU32::new(rate).unwrap(),
        NonZeroU32::new(burst).unwrap(),
    )
}

fn spec_limits(whitelist: Vec<std::net::IpAddr>) -> RateLimitsConfig {
    RateLimitsConfig {
        limiter: RateLimitConfig {
            rejects_before_cooldown: 5,
            cooldown: Duration::from_secs(2),
            prune_interval: Duration::from_secs(30),
            state_ttl: Duration::from_secs(300),
        },
        whitelist,
        traffic: TrafficConfig {
            light_queries: limit(20, 20),
            heavy_queries: limit(10, 10),
            broadcasts: limit(20, 20),
        },
    }
}

fn rpc_service(counter: Arc<Counter>) -> BlockchainRpcService {
    BlockchainRpcService::builder()
        .with_storage(Arc::new(StubStorage::default()))
        .with_provider(Arc::new(StubProvider::new(1 << 20)))
        .with_broadcast_listener(counter)
        .build()
}

fn ping() -> Bytes {
    Bytes::from(tl_proto::serialize(proto::Ping))
}

fn heavy() -> Bytes {
    Bytes::from(tl_proto::serialize(rpc::GetZerostateProof))
}

async fn answered(client: &regolith_rpc::RawOverlayClient, body: Bytes, n: usize) -> usize {
    join_all((0..n).map(|_| try_query(client, body.clone())))
        .await
        .into_iter()
        .filter(Option::is_some)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item9_light_burst_then_shared_cooldown() {
    let _serial = SERIAL.lock().await;
    let srv = server(3, rpc_service(Arc::default()), Some(spec_limits(vec![])));
    let c = client(2, &srv);
    // warm the connection with nothing charged: unknown constructors are dropped for free
    assert!(try_query(&c, Bytes::from_static(&[1, 2, 3, 4]))
        .await
        .is_none());
    let n = answered(&c, ping(), 30).await;
    assert!((20..=21).contains(&n), "{n} of 30 pings answered");
    // the cooldown started by the rejected pings also blocks heavy queries
    assert!(
        try_query(&c, heavy()).await.is_none(),
        "heavy query during the cooldown"
    );
    tokio::time::sleep(Duration::from_millis(2200)).await;
    assert!(
        try_query(&c, heavy()).await.is_some(),
        "answered after the cooldown"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item9_heavy_and_broadcast_buckets() {
    let _serial = SERIAL.lock().await;
    let counter = Arc::new(Counter::default());
    let srv = server(5, rpc_service(counter.clone()), Some(spec_limits(vec![])));
    let heavy_client = client(4, &srv);
    assert!(try_query(&heavy_client, Bytes::from_static(&[1, 2, 3, 4]))
        .await
        .is_none());
    let n = answered(&heavy_client, heavy(), 15).await;
    assert!((10..=11).contains(&n), "{n} of 15 heavy queries answered");

    let sender = client(6, &srv);
    assert!(try_query(&sender, Bytes::from_static(&[1, 2, 3, 4]))
        .await
        .is_none());
    let body = broadcast_body(&fixture_externals().remove(0));
    join_all((0..25).map(|_| sender.send(body.clone()))).await;
    // Wait for the 20 the bucket lets through, however slowly they arrive; a little longer for any that
    // should not have passed (a slow machine can only make this pass, never fail).
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while *counter.0.lock() < 20 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let delivered = *counter.0.lock();
    assert!(
        (20..=21).contains(&delivered),
        "{delivered} of 25 broadcasts delivered"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item9_unknown_constructors_consume_nothing() {
    let _serial = SERIAL.lock().await;
    let srv = server(8, rpc_service(Arc::default()), Some(spec_limits(vec![])));
    let c = client(7, &srv);
    let unknown =
        join_all((0..30).map(|i| try_query(&c, Bytes::from(vec![0xff, 0xff, 0xff, i as u8]))))
            .await;
    assert!(
        unknown.iter().all(Option::is_none),
        "unknown constructors are never answered"
    );
    assert_eq!(
        answered(&c, ping(), 20).await,
        20,
        "unknown requests took no tokens and caused no cooldown"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item9_whitelist_and_null() {
    let _serial = SERIAL.lock().await;
    // whitelisted client IP: nothing dropped
    let srv = server(
        10,
        rpc_service(Arc::default()),
        Some(spec_limits(vec!["127.0.0.9".parse().unwrap()])),
    );
    let c = client(9, &srv);
    assert_eq!(answered(&c, ping(), 40).await, 40);
    // another IP at the same server is limited (whitelist is per IP)
    let other = client(11, &srv);
    assert!(try_query(&other, Bytes::from_static(&[1, 2, 3, 4]))
        .await
        .is_none());
    let n = answered(&other, ping(), 30).await;
    assert!((20..=21).contains(&n), "{n}");
    // rate_limits: null → no limiter
    let open = server(12, rpc_service(Arc::default()), None);
    let c = client(13, &open);
    assert_eq!(answered(&c, ping(), 40).await, 40);
    assert_eq!(answered(&c, heavy(), 30).await, 30);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item9_state_is_pruned_after_ttl() {
    let _serial = SERIAL.lock().await;
    let mut config = spec_limits(vec![]);
    config.limiter = RateLimitConfig {
        rejects_before_cooldown: 100,
        cooldown: Duration::from_secs(30),
        prune_interval: Duration::from_secs(1),
        state_ttl: Duration::from_secs(1),
    };
    config.traffic.light_queries = limit(1, 5);
    let srv = server(15, rpc_service(Arc::default()), Some(config));
    let c = client(14, &srv);
    assert!(try_query(&c, Bytes::from_static(&[1, 2, 3, 4]))
        .await
        .is_none());
    let n = answered(&c, ping(), 7).await;
    assert!((5..=6).contains(&n), "{n}");
    // idle for longer than state_ttl: the state is discarded and the full burst is back (GCRA alone would
    // have refilled about one token)
    tokio::time::sleep(Duration::from_millis(1300)).await;
    assert_eq!(answered(&c, ping(), 5).await, 5);
}
