//! The HTTP transport of api.md §1: routes, dispatch by content type, limits, timeout, rate limit, h2c.

use std::num::NonZeroU32;
use std::time::Duration;

use bytes::Bytes;
use hyper::http::{Method, StatusCode};
use regolith_api::{ApiConfig, RateLimit};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::chain_backend::ChainBackend;
use crate::client::{self, send, Wire, BOTH};
use crate::{config, start};

const STATUS: &str = r#"{"jsonrpc":"2.0","id":3,"method":"getStatus","params":null}"#;

#[tokio::test]
async fn get_root_is_the_unix_time_in_milliseconds() {
    let server = start(ChainBackend::full()).await;
    for wire in BOTH {
        let before = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis();
        let reply = send(
            server.local_addr(),
            wire,
            Method::GET,
            "/",
            None,
            Bytes::new(),
        )
        .await;
        assert_eq!(reply.status, StatusCode::OK);
        let millis: u128 = std::str::from_utf8(&reply.body).unwrap().parse().unwrap();
        assert!(millis >= before, "{millis} < {before}");
    }
    server.shutdown().await;
}

#[tokio::test]
async fn the_three_paths_answer_json_rpc_alike_over_http1_and_h2c() {
    let server = start(ChainBackend::full()).await;
    for wire in BOTH {
        for path in ["/", "/rpc", "/proto"] {
            let reply = send(
                server.local_addr(),
                wire,
                Method::POST,
                path,
                Some("application/json; charset=utf-8"),
                Bytes::from_static(STATUS.as_bytes()),
            )
            .await;
            assert_eq!(reply.status, StatusCode::OK);
            assert_eq!(
                std::str::from_utf8(&reply.body).unwrap(),
                r#"{"jsonrpc":"2.0","id":3,"result":{"ready":true}}"#
            );
        }
    }
    server.shutdown().await;
}

#[tokio::test]
async fn another_content_type_or_none_is_415_with_an_empty_body() {
    let server = start(ChainBackend::full()).await;
    for wire in BOTH {
        for content_type in [Some("text/plain"), Some("application/xml"), None] {
            let reply = send(
                server.local_addr(),
                wire,
                Method::POST,
                "/rpc",
                content_type,
                Bytes::from_static(STATUS.as_bytes()),
            )
            .await;
            assert_eq!(reply.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
            assert!(reply.body.is_empty());
        }
    }
    server.shutdown().await;
}

#[tokio::test]
async fn a_body_over_256_kib_with_its_length_declared_is_413() {
    let server = start(ChainBackend::full()).await;
    let mut body = STATUS.as_bytes().to_vec();
    body.resize(256 * 1024 + 1, b' ');
    for wire in BOTH {
        let reply = send(
            server.local_addr(),
            wire,
            Method::POST,
            "/",
            Some("application/json"),
            Bytes::from(body.clone()),
        )
        .await;
        assert_eq!(reply.status, StatusCode::PAYLOAD_TOO_LARGE);
    }
    // Exactly 256 KiB is read (trailing whitespace is valid JSON).
    let mut body = STATUS.as_bytes().to_vec();
    body.resize(256 * 1024, b' ');
    let answer = client::post_json(
        server.local_addr(),
        Wire::H2c,
        std::str::from_utf8(&body).unwrap(),
    )
    .await;
    assert_eq!(answer["result"]["ready"], true);
    server.shutdown().await;
}

#[tokio::test]
async fn a_chunked_body_over_the_limit_is_unreadable_and_gets_32700() {
    let server = start(ChainBackend::full()).await;
    let mut stream = tokio::net::TcpStream::connect(server.local_addr())
        .await
        .unwrap();
    let chunk = vec![b' '; 300 * 1024];
    let head = "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
                Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
    stream.write_all(head.as_bytes()).await.unwrap();
    stream
        .write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
        .await
        .unwrap();
    // The server may answer and close before the whole chunk is in: write errors are fine.
    let _ = stream.write_all(&chunk).await;
    let _ = stream.write_all(b"\r\n0\r\n\r\n").await;
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw).await;
    let text = String::from_utf8_lossy(&raw);
    assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
    let body = text.split("\r\n\r\n").nth(1).unwrap();
    // The body may itself be chunked: take the JSON object in it.
    let json = &body[body.find('{').unwrap()..=body.rfind('}').unwrap()];
    let answer: serde_json::Value = serde_json::from_str(json).unwrap();
    assert_eq!(answer["id"], serde_json::Value::Null);
    assert_eq!(client::error_of(&answer).0, -32700);
    server.shutdown().await;
}

#[tokio::test]
async fn a_request_past_the_timeout_is_408() {
    let config = ApiConfig {
        request_timeout: Duration::from_millis(200),
        ..config()
    };
    let server = regolith_api::serve(config, ChainBackend::stalled(), axum::Router::new())
        .await
        .unwrap();
    for wire in BOTH {
        let reply = send(
            server.local_addr(),
            wire,
            Method::POST,
            "/",
            Some("application/json"),
            Bytes::from_static(STATUS.as_bytes()),
        )
        .await;
        assert_eq!(reply.status, StatusCode::REQUEST_TIMEOUT);
    }
    server.shutdown().await;
}

#[tokio::test]
async fn past_the_per_ip_rate_limit_requests_get_429_with_retry_after() {
    let config = ApiConfig {
        rate_limit: Some(RateLimit {
            requests_per_second: NonZeroU32::new(1).unwrap(),
            burst: NonZeroU32::new(2).unwrap(),
        }),
        ..config()
    };
    let server = regolith_api::serve(config, ChainBackend::full(), axum::Router::new())
        .await
        .unwrap();
    let mut statuses = Vec::new();
    let mut retry_after = None;
    for i in 0..10 {
        let wire = if i % 2 == 0 { Wire::Http1 } else { Wire::H2c };
        let reply = send(
            server.local_addr(),
            wire,
            Method::POST,
            "/",
            Some("application/json"),
            Bytes::from_static(STATUS.as_bytes()),
        )
        .await;
        if reply.status == StatusCode::TOO_MANY_REQUESTS {
            retry_after = reply.headers.get("retry-after").cloned();
        }
        statuses.push(reply.status);
    }
    // The burst passes, and ten requests in a row go past one per second.
    assert_eq!(statuses[..2], [StatusCode::OK, StatusCode::OK]);
    assert!(
        statuses.contains(&StatusCode::TOO_MANY_REQUESTS),
        "{statuses:?}"
    );
    let seconds: u64 = retry_after.unwrap().to_str().unwrap().parse().unwrap();
    assert!(seconds >= 1);
    server.shutdown().await;
}

#[tokio::test]
async fn extra_routes_are_served_beside_the_api_and_shutdown_stops_the_server() {
    let extra = axum::Router::new().route(
        "/v1/messages",
        axum::routing::post(|body: Bytes| async move { format!("got {} bytes", body.len()) }),
    );
    let server = regolith_api::serve(config(), ChainBackend::full(), extra)
        .await
        .unwrap();
    let addr = server.local_addr();
    for wire in BOTH {
        let reply = send(
            addr,
            wire,
            Method::POST,
            "/v1/messages",
            None,
            Bytes::from_static(b"abc"),
        )
        .await;
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(&reply.body[..], b"got 3 bytes");
    }
    server.shutdown().await;
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}
