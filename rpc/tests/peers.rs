//! The overlay client's peer book on real overlays on loopback (issue #18, points 5 and 6): the bootstrap
//! peers and the neighbours used last are candidates whatever the overlay's entries hold, and the recent
//! ones are found again after a restart from the book's file.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::net::{fast_node, fast_settings};
use common::*;
use regolith_rpc::client::{PeerBook, PublicOverlayClient};
use regolith_rpc::config::PublicOverlayClientConfig;
use regolith_rpc::network::{BlockchainNetwork, Silent};
use regolith_test_support::net::random_overlay_id;
use regolith_test_support::wait_until_async;

fn client_config() -> PublicOverlayClientConfig {
    PublicOverlayClientConfig {
        neighbors: regolith_rpc::config::NeighborsConfig {
            apply_score_interval: Duration::from_secs(1),
            ping_interval: Duration::from_secs(3600),
            query_timeout: Duration::from_secs(15),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// A node that knows nobody: no DHT bootstrap peer, so its overlay never lists an entry. Whatever it
/// reaches, it reaches through the book alone.
fn isolated_node(ip_last: u8, overlay_id: [u8; 32]) -> BlockchainNetwork {
    BlockchainNetwork::start(fast_settings(ip_last, overlay_id), Silent).unwrap()
}

async fn neighbour_answers(client: &PublicOverlayClient, server: &BlockchainNetwork) {
    tokio::time::timeout(Duration::from_secs(60), client.wait_for_peers(1))
        .await
        .expect("a neighbour at once, from the book");
    let neighbour = client
        .neighbours()
        .find(&server.peer_id())
        .expect("the server is the neighbour");
    wait_until_async(
        "the server answers",
        Duration::from_secs(120),
        Duration::from_millis(200),
        async || client.ping(&neighbour).await.is_ok(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bootstrap_and_recent_peers_are_neighbours_whatever_the_overlay_lists() {
    let overlay_id = random_overlay_id();
    let server = fast_node(
        10,
        overlay_id,
        service(
            Arc::new(StubStorage::default()),
            Arc::new(StubProvider::new(1 << 16)),
        ),
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("peers.json");
    let config = client_config();

    // First start: the server is only a bootstrap peer of the book.
    {
        let node = isolated_node(11, overlay_id);
        let book = PeerBook::open(&path, &config.neighbors)
            .unwrap()
            .with_bootstrap_peers([server.signed_peer_info(Duration::from_secs(3600))]);
        let client = PublicOverlayClient::with_peer_book(
            node.network.clone(),
            node.overlay.clone(),
            config.clone(),
            Arc::new(book),
        );
        neighbour_answers(&client, &server).await;
        assert!(
            node.overlay.read_entries().is_empty(),
            "the overlay itself lists nobody"
        );
        // The apply tick remembers the neighbour that answered, in the file.
        wait_until_async(
            "remembered",
            Duration::from_secs(60),
            Duration::from_millis(100),
            async || {
                client
                    .peer_book()
                    .recent()
                    .iter()
                    .any(|i| i.id == server.peer_id())
            },
        )
        .await;
        node.network.shutdown().await;
    }
    assert!(std::fs::read_to_string(&path)
        .unwrap()
        .contains(&server.peer_id().to_string()));

    // A restart with another key and no bootstrap peer at all: the recent neighbour from the file.
    let node = isolated_node(12, overlay_id);
    let book = PeerBook::open(&path, &config.neighbors).unwrap();
    let client = PublicOverlayClient::with_peer_book(
        node.network.clone(),
        node.overlay.clone(),
        config.clone(),
        Arc::new(book),
    );
    neighbour_answers(&client, &server).await;

    // A banned peer is not a candidate, pinned or not.
    let node = isolated_node(13, overlay_id);
    let book = PeerBook::open(&path, &config.neighbors).unwrap();
    book.ban(&server.peer_id(), regolith_rpc::network::now_sec());
    let client = PublicOverlayClient::with_peer_book(
        node.network.clone(),
        node.overlay.clone(),
        config,
        Arc::new(book),
    );
    // The initial draw is made when the client is built.
    assert!(
        client.neighbours().is_empty(),
        "the banned server stays out"
    );
}
