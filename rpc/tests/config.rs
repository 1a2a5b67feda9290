//! rpc.md §10 item 17: config sections parse with every field set, defaults equal §9, required fields and
//! unknown credential fields are rejected, a zero overlay jitter is rejected.

use std::time::Duration;

use regolith_rpc::config::{
    self, BlockchainRpcClientConfig, BlockchainRpcServiceConfig, S3ClientConfig,
};

#[test]
fn item17_defaults_equal_the_spec() {
    let service: BlockchainRpcServiceConfig = serde_json::from_str("{}").unwrap();
    assert_eq!(service.max_key_blocks_list_len, 8);
    assert!(service.serve_persistent_states);
    assert!(service.rate_limits.is_none());
    assert!(service.s3_proxy.is_none());

    let limits: regolith_rpc::RateLimitsConfig = serde_json::from_str("{}").unwrap();
    assert_eq!(limits.limiter.rejects_before_cooldown, 5);
    assert_eq!(limits.limiter.cooldown, Duration::from_secs(30));
    assert_eq!(limits.limiter.prune_interval, Duration::from_secs(30));
    assert_eq!(limits.limiter.state_ttl, Duration::from_secs(300));
    assert!(limits.whitelist.is_empty());
    let t = &limits.traffic;
    assert_eq!(
        (
            t.light_queries.rate_per_sec.get(),
            t.light_queries.burst.get()
        ),
        (20, 20)
    );
    assert_eq!(
        (
            t.heavy_queries.rate_per_sec.get(),
            t.heavy_queries.burst.get()
        ),
        (10, 10)
    );
    assert_eq!(
        (t.broadcasts.rate_per_sec.get(), t.broadcasts.burst.get()),
        (20, 20)
    );

    let client: BlockchainRpcClientConfig = serde_json::from_str("{}").unwrap();
    assert_eq!(client.min_broadcast_timeout, Duration::from_millis(100));
    assert_eq!(client.too_new_archive_threshold, 4);
    assert_eq!(client.download_retries, 10);
    assert_eq!(client.max_block_download_peers, 3);
    let h = &client.request_history_size;
    assert_eq!(
        [
            h.get_block_full,
            h.get_next_block_full,
            h.get_key_block_proof,
            h.get_zerostate_proof,
            h.get_persistent_state_info,
            h.get_archive_info
        ],
        [Some(20), Some(20), Some(20), Some(40), Some(40), Some(20)]
    );

    let s3: S3ClientConfig =
        serde_json::from_str(r#"{"region":"r","endpoint":"http://e","bucket":"b"}"#).unwrap();
    assert_eq!(s3.chunk_size.as_u64(), 1 << 20);
    assert_eq!(s3.download_retries, 10);
    assert_eq!(s3.archive_key_prefix, "");
    assert_eq!(s3.state_key_prefix, "");
    assert!(s3.credentials.is_none());

    let overlay = tycho_network::OverlayConfig::default();
    assert_eq!(
        overlay.public_overlay_peer_store_period,
        Duration::from_secs(180)
    );
    assert_eq!(
        overlay.public_overlay_peer_collect_period,
        Duration::from_secs(10)
    );
    assert_eq!(overlay.query_timeout, Duration::from_millis(100));
    config::validate_overlay(&overlay).unwrap();
}

#[test]
fn item17_every_field_parses() {
    let service: BlockchainRpcServiceConfig = serde_json::from_str(
        r#"{
            "max_key_blocks_list_len": 16,
            "serve_persistent_states": false,
            "rate_limits": {
                "limiter": {"rejects_before_cooldown": 3, "cooldown": "2s", "prune_interval": "1m", "state_ttl": "1h"},
                "whitelist": ["127.0.0.2", "::1"],
                "traffic": {
                    "light_queries": {"rate_per_sec": 1, "burst": 2},
                    "heavy_queries": {"rate_per_sec": 3, "burst": 4},
                    "broadcasts": {"rate_per_sec": 5, "burst": 6}
                }
            },
            "s3_proxy": {"rate_limit": 100, "bandwidth_limit": "100 MiB"}
        }"#,
    )
    .unwrap();
    assert_eq!(service.max_key_blocks_list_len, 16);
    assert!(!service.serve_persistent_states);
    let limits = service.rate_limits.as_ref().unwrap();
    assert_eq!(limits.limiter.cooldown, Duration::from_secs(2));
    assert_eq!(limits.limiter.state_ttl, Duration::from_secs(3600));
    assert_eq!(limits.whitelist.len(), 2);
    assert_eq!(limits.traffic.broadcasts.burst.get(), 6);
    let proxy = service.s3_proxy.as_ref().unwrap();
    assert_eq!(proxy.rate_limit, 100);
    assert_eq!(proxy.bandwidth_limit.as_u64(), 100 << 20);
    config::validate(&service, None).unwrap();

    let s3: S3ClientConfig = serde_json::from_str(
        r#"{"region":"us-east-1","endpoint":"http://127.0.0.1:9000","bucket":"b","archive_key_prefix":"a/",
            "state_key_prefix":"s/","credentials":{"access_key":"k","secret_key":"s","token":"t"},
            "chunk_size":"2 MiB","download_retries":3}"#,
    )
    .unwrap();
    assert_eq!(s3.chunk_size.as_u64(), 2 << 20);
    assert_eq!(s3.credentials.as_ref().unwrap().token.as_deref(), Some("t"));

    let client: BlockchainRpcClientConfig = serde_json::from_str(
        r#"{"min_broadcast_timeout":"700ms","too_new_archive_threshold":2,"download_retries":5,
            "max_block_download_peers":4,"request_history_size":{"get_block_full":null,"get_archive_info":7}}"#,
    )
    .unwrap();
    assert_eq!(client.min_broadcast_timeout, Duration::from_millis(700));
    assert_eq!(client.request_history_size.get_block_full, None);
    assert_eq!(client.request_history_size.get_archive_info, Some(7));
    assert_eq!(client.request_history_size.get_zerostate_proof, Some(40));
}

#[test]
fn item17_null_and_empty_whitelist_and_rejections() {
    let null: BlockchainRpcServiceConfig =
        serde_json::from_str(r#"{"rate_limits": null}"#).unwrap();
    assert!(null.rate_limits.is_none());
    let empty: BlockchainRpcServiceConfig =
        serde_json::from_str(r#"{"rate_limits": {"whitelist": []}}"#).unwrap();
    let limits = empty.rate_limits.unwrap();
    assert!(limits.whitelist.is_empty());
    assert_eq!(
        limits.traffic.light_queries.rate_per_sec.get(),
        20,
        "limits apply"
    );

    // s3_proxy needs both fields, rate ≥ 1
    assert!(serde_json::from_str::<BlockchainRpcServiceConfig>(
        r#"{"s3_proxy": {"rate_limit": 1}}"#
    )
    .is_err());
    let zero: BlockchainRpcServiceConfig =
        serde_json::from_str(r#"{"s3_proxy": {"rate_limit": 0, "bandwidth_limit": 0}}"#).unwrap();
    assert!(config::validate(&zero, None).is_err());
    // traffic values must be non-zero
    assert!(serde_json::from_str::<BlockchainRpcServiceConfig>(
        r#"{"rate_limits": {"traffic": {"light_queries": {"rate_per_sec": 0, "burst": 1}}}}"#
    )
    .is_err());
    // credentials reject unknown fields; s3_client needs region, endpoint, bucket
    assert!(serde_json::from_str::<S3ClientConfig>(
        r#"{"region":"r","endpoint":"e","bucket":"b","credentials":{"access_key":"k","secret_key":"s","extra":1}}"#
    )
    .is_err());
    assert!(serde_json::from_str::<S3ClientConfig>(r#"{"region":"r","endpoint":"e"}"#).is_err());
    let tiny: S3ClientConfig =
        serde_json::from_str(r#"{"region":"r","endpoint":"e","bucket":"b","chunk_size":"512 B"}"#)
            .unwrap();
    assert!(config::validate(&BlockchainRpcServiceConfig::default(), Some(&tiny)).is_err());

    // a zero overlay jitter is rejected
    let overlay: tycho_network::OverlayConfig =
        serde_json::from_str(r#"{"public_overlay_peer_exchange_max_jitter": "0s"}"#).unwrap();
    assert!(config::validate_overlay(&overlay).is_err());
}

#[test]
fn item17_public_overlay_client_defaults_and_a_full_sample() {
    use regolith_rpc::config::PublicOverlayClientConfig;
    let c: PublicOverlayClientConfig = serde_json::from_str("{}").unwrap();
    let n = &c.neighbors;
    assert_eq!(n.update_interval, Duration::from_secs(120));
    assert_eq!(n.ping_interval, Duration::from_secs(30));
    assert_eq!(n.apply_score_interval, Duration::from_secs(10));
    assert_eq!(n.update_metrics_interval, Duration::from_secs(5));
    assert_eq!((n.keep, n.max_ping_tasks), (5, 5));
    assert_eq!(n.default_roundtrip, Duration::from_millis(300));
    assert_eq!(n.send_timeout, Duration::from_millis(500));
    assert_eq!(n.query_timeout, Duration::from_secs(1));
    assert!(n.enable_metrics);
    let v = &c.validators;
    assert_eq!(v.ping_interval, Duration::from_secs(60));
    assert_eq!(v.ping_timeout, Duration::from_secs(1));
    assert_eq!((v.keep, v.max_ping_tasks), (5, 5));
    assert_eq!(v.send_timeout, Duration::from_millis(500));

    let sample = r#"{
        "neighbors": {"update_interval": "1m", "ping_interval": "10s", "apply_score_interval": "2s",
            "update_metrics_interval": "1s", "keep": 7, "max_ping_tasks": 3, "default_roundtrip": "100ms",
            "send_timeout": "250ms", "query_timeout": "3s", "enable_metrics": false},
        "validators": {"ping_interval": "30s", "ping_timeout": "2s", "keep": 4, "max_ping_tasks": 2,
            "send_timeout": "1s"}
    }"#;
    let c: PublicOverlayClientConfig = serde_json::from_str(sample).unwrap();
    assert_eq!(c.neighbors.update_interval, Duration::from_secs(60));
    assert_eq!(c.neighbors.keep, 7);
    assert_eq!(c.neighbors.query_timeout, Duration::from_secs(3));
    assert!(!c.neighbors.enable_metrics);
    assert_eq!(c.validators.keep, 4);
    assert_eq!(c.validators.send_timeout, Duration::from_secs(1));
    // a round trip keeps every value
    let back: PublicOverlayClientConfig =
        serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
    assert_eq!(back, c);

    let client: BlockchainRpcClientConfig = serde_json::from_str(
        r#"{"min_broadcast_timeout": "50ms", "too_new_archive_threshold": 2, "download_retries": 3,
            "max_block_download_peers": 5, "request_history_size": {"get_block_full": null}}"#,
    )
    .unwrap();
    assert_eq!(client.min_broadcast_timeout, Duration::from_millis(50));
    assert_eq!(client.request_history_size.get_block_full, None);
    assert_eq!(client.request_history_size.get_archive_info, Some(20));
}
