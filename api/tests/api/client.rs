//! A raw HTTP client over hyper's connection API: one connection per request, HTTP/1.1 or HTTP/2 with prior
//! knowledge (h2c), as nekoton's clients speak them (api.md §1).

use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::http::{HeaderMap, Method, Request, StatusCode, Version};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::Value;
use tokio::net::TcpStream;

/// The two ways in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wire {
    Http1,
    H2c,
}

pub(crate) const BOTH: [Wire; 2] = [Wire::Http1, Wire::H2c];

/// A response, read whole.
pub(crate) struct Reply {
    pub(crate) status: StatusCode,
    pub(crate) version: Version,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
}

impl Reply {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", String::from_utf8_lossy(&self.body)))
    }
}

pub(crate) async fn send(
    addr: SocketAddr,
    wire: Wire,
    method: Method,
    path: &str,
    content_type: Option<&str>,
    body: Bytes,
) -> Reply {
    let stream = TcpStream::connect(addr).await.unwrap();
    let io = TokioIo::new(stream);
    let uri = match wire {
        Wire::Http1 => path.to_string(),
        Wire::H2c => format!("http://{addr}{path}"),
    };
    let mut request = Request::builder().method(method).uri(uri);
    if wire == Wire::Http1 {
        request = request.header("host", addr.to_string());
    }
    if let Some(content_type) = content_type {
        request = request.header("content-type", content_type);
    }
    let request = request.body(Full::new(body)).unwrap();
    let response = match wire {
        Wire::Http1 => {
            let (mut sender, connection) = hyper::client::conn::http1::handshake(io).await.unwrap();
            tokio::spawn(connection);
            sender.send_request(request).await.unwrap()
        }
        Wire::H2c => {
            let (mut sender, connection) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
                    .await
                    .unwrap();
            tokio::spawn(connection);
            sender.send_request(request).await.unwrap()
        }
    };
    let status = response.status();
    let version = response.version();
    let headers = response.headers().clone();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    Reply {
        status,
        version,
        headers,
        body,
    }
}

/// POSTs a JSON body to `/`; checks the transport rules of every JSON answer (api.md §2: HTTP 200,
/// application/json) and returns the parsed answer.
pub(crate) async fn post_json(addr: SocketAddr, wire: Wire, body: &str) -> Value {
    let reply = send(
        addr,
        wire,
        Method::POST,
        "/",
        Some("application/json"),
        Bytes::copy_from_slice(body.as_bytes()),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{body}");
    assert_eq!(reply.headers["content-type"], "application/json");
    let expected_version = match wire {
        Wire::Http1 => Version::HTTP_11,
        Wire::H2c => Version::HTTP_2,
    };
    assert_eq!(reply.version, expected_version);
    reply.json()
}

/// Calls `method` with `params` as nekoton does (`"id":1`) and returns the whole answer.
pub(crate) async fn call(addr: SocketAddr, wire: Wire, method: &str, params: Value) -> Value {
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    post_json(addr, wire, &body.to_string()).await
}

/// The `result` of a successful call.
pub(crate) async fn result(addr: SocketAddr, wire: Wire, method: &str, params: Value) -> Value {
    let answer = call(addr, wire, method, params).await;
    assert!(answer.get("error").is_none(), "{method}: {answer}");
    assert_eq!(answer["id"], 1);
    assert_eq!(answer["jsonrpc"], "2.0");
    answer["result"].clone()
}

/// The `(code, message)` of a failed call, checking the error shape of api.md §2 (no `data`).
pub(crate) fn error_of(answer: &Value) -> (i64, String) {
    let error = answer["error"]
        .as_object()
        .unwrap_or_else(|| panic!("not an error: {answer}"));
    assert_eq!(error.len(), 2, "{answer}");
    assert!(answer.get("result").is_none());
    (
        error["code"].as_i64().unwrap(),
        error["message"].as_str().unwrap().to_string(),
    )
}

pub(crate) async fn call_error(
    addr: SocketAddr,
    wire: Wire,
    method: &str,
    params: Value,
) -> (i64, String) {
    let answer = call(addr, wire, method, params).await;
    assert_eq!(answer["id"], 1, "{answer}");
    error_of(&answer)
}
