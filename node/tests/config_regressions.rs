//! Inputs that crashed the `node_config` fuzz target, kept as regressions (`tests/regressions/`).

use std::path::Path;

use regolith_node::config::NodeConfig;
use regolith_node::files::{parse_json, UnknownFields};

fn regression(name: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/regressions")
            .join(name),
    )
    .unwrap()
}

fn write_and_read(config: &NodeConfig) -> NodeConfig {
    let text = serde_json::to_string(config).unwrap();
    parse_json(&text, Path::new("node.json"), UnknownFields::Reject).unwrap()
}

/// Found by `node_config`: byte sizes were written rounded (`bytesize`'s Display), so 8 MiB became "8.4 MB"
/// (8 400 000 B) and the S3 chunk of 1 MiB became "1048.6 KB" on every write of node.json.
#[test]
fn byte_sizes_survive_a_write_and_a_read() {
    let path = Path::new("node.json");
    let text = regression("node_config_byte_sizes.json");
    let config: NodeConfig = parse_json(&text, path, UnknownFields::Reject).unwrap();
    let once = write_and_read(&config);
    let twice = write_and_read(&once);
    assert_eq!(
        serde_json::to_string(&once).unwrap(),
        serde_json::to_string(&twice).unwrap()
    );
    let s3 = once.s3_client.as_ref().unwrap();
    assert_eq!(s3.chunk_size, config.s3_client.as_ref().unwrap().chunk_size);
    assert_eq!(
        once.blockchain_rpc_service
            .s3_proxy
            .as_ref()
            .unwrap()
            .bandwidth_limit,
        config
            .blockchain_rpc_service
            .s3_proxy
            .as_ref()
            .unwrap()
            .bandwidth_limit
    );

    // What `init` writes reads back with the defaults intact.
    let mut fresh = NodeConfig::new([7; 32], Path::new("data"));
    fresh.s3_client = s3.clone().into();
    fresh.s3_client.as_mut().unwrap().chunk_size = bytesize::ByteSize::mib(1);
    let back = write_and_read(&fresh);
    assert_eq!(back.network.max_frame_size, bytesize::ByteSize::mib(8));
    assert_eq!(
        back.dht.max_storage_capacity,
        fresh.dht.max_storage_capacity
    );
    assert_eq!(
        back.s3_client.unwrap().chunk_size,
        bytesize::ByteSize::mib(1)
    );
    let json = serde_json::to_string(&fresh).unwrap();
    assert!(json.contains(r#""max_frame_size":"8 MiB""#), "{json}");

    // Every size of the RPC sections too: the defaults and odd values come back to the byte.
    let mut sizes = NodeConfig::new([7; 32], Path::new("data"));
    let client = &mut sizes.blockchain_rpc_client;
    client.max_block_size = bytesize::ByteSize(64 * 1024 * 1024 + 1);
    client.min_download_rate = bytesize::ByteSize(1_500_000_000);
    let back = write_and_read(&sizes);
    let service = &back.blockchain_rpc_service;
    assert_eq!(service.block_full_cache_size, bytesize::ByteSize::mib(32));
    let got = &back.blockchain_rpc_client;
    let want = &sizes.blockchain_rpc_client;
    assert_eq!(got.max_block_size, want.max_block_size);
    assert_eq!(got.max_archive_size, want.max_archive_size);
    assert_eq!(
        got.max_archive_decompressed_size,
        want.max_archive_decompressed_size
    );
    assert_eq!(
        got.max_persistent_state_size,
        want.max_persistent_state_size
    );
    assert_eq!(got.max_queue_state_size, want.max_queue_state_size);
    assert_eq!(got.min_download_rate, want.min_download_rate);
    let json = serde_json::to_string(&sizes).unwrap();
    for exact in [
        r#""block_full_cache_size":"32 MiB""#,
        r#""max_block_size":"67108865 B""#,
        r#""max_archive_size":"4 GiB""#,
        r#""min_download_rate":"1500 MB""#,
    ] {
        assert!(json.contains(exact), "{exact} not in {json}");
    }
}
