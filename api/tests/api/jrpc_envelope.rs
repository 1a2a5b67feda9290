//! The JSON-RPC envelope and its errors (api.md §2, §10.4, §10.7), over HTTP/1.1 and h2c.

use serde_json::{json, Value};

use crate::chain_backend::ChainBackend;
use crate::client::{error_of, post_json, BOTH};
use crate::start;

/// Posts `body` and returns (id, code, message) of the error answer.
async fn envelope_error(addr: std::net::SocketAddr, body: &str) -> Vec<(Value, i64, String)> {
    let mut out = Vec::new();
    for wire in BOTH {
        let answer = post_json(addr, wire, body).await;
        assert_eq!(answer["jsonrpc"], "2.0");
        let (code, message) = error_of(&answer);
        out.push((answer["id"].clone(), code, message));
    }
    assert_eq!(out[0], out[1], "HTTP/1.1 and h2c differ on {body}");
    out
}

#[tokio::test]
async fn envelope_errors_have_the_codes_of_section_2() {
    let server = start(ChainBackend::full()).await;
    let addr = server.local_addr();
    let cases: &[(&str, Value, i64, Option<&str>)] = &[
        // Not JSON, or cut short: -32700, null id.
        ("{", Value::Null, -32700, None),
        ("", Value::Null, -32700, None),
        ("not json", Value::Null, -32700, None),
        // A batch (array): -32600, null id.
        (
            r#"[{"jsonrpc":"2.0","id":1,"method":"getStatus","params":null}]"#,
            Value::Null,
            -32600,
            None,
        ),
        // Wrong shape: non-integer id, missing fields.
        (
            r#"{"jsonrpc":"2.0","id":"1","method":"getStatus","params":null}"#,
            Value::Null,
            -32600,
            None,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1.5,"method":"getStatus","params":null}"#,
            Value::Null,
            -32600,
            None,
        ),
        (
            r#"{"jsonrpc":"2.0","method":"getStatus","params":null}"#,
            Value::Null,
            -32600,
            Some("missing field `id`"),
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"getStatus"}"#,
            Value::Null,
            -32600,
            Some("missing field `params`"),
        ),
        (
            r#"{"id":1,"method":"getStatus","params":null}"#,
            Value::Null,
            -32600,
            Some("missing field `jsonrpc`"),
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":5,"params":null}"#,
            Value::Null,
            -32600,
            None,
        ),
        // Wrong version: -32600 with the id and the message's typo.
        (
            r#"{"jsonrpc":"1.0","id":7,"method":"getStatus","params":null}"#,
            json!(7),
            -32600,
            Some("invalid jronrpc version"),
        ),
        // Unknown method, case-sensitive: -32601 with the id.
        (
            r#"{"jsonrpc":"2.0","id":8,"method":"getFoo","params":{}}"#,
            json!(8),
            -32601,
            Some("unknown method"),
        ),
        (
            r#"{"jsonrpc":"2.0","id":9,"method":"GetStatus","params":{}}"#,
            json!(9),
            -32601,
            Some("unknown method"),
        ),
        (
            r#"{"jsonrpc":"2.0","id":-4,"method":"subSubscribe","params":{}}"#,
            json!(-4),
            -32002,
            Some("method not supported"),
        ),
        // Parameterless methods take null or an object (and, as serde reads an empty struct, `[]`).
        (
            r#"{"jsonrpc":"2.0","id":10,"method":"getStatus","params":[1]}"#,
            json!(10),
            -32602,
            None,
        ),
        (
            r#"{"jsonrpc":"2.0","id":11,"method":"getStatus","params":5}"#,
            json!(11),
            -32602,
            None,
        ),
    ];
    for (body, id, code, message) in cases {
        for (got_id, got_code, got_message) in envelope_error(addr, body).await {
            assert_eq!((&got_id, got_code), (id, *code), "{body}: {got_message}");
            if let Some(message) = message {
                assert!(
                    got_message.starts_with(message),
                    "{body}: {got_message} is not {message}"
                );
            }
        }
    }
    server.shutdown().await;
}

#[tokio::test]
async fn parameterless_methods_take_null_or_an_object_and_ids_come_back() {
    let server = start(ChainBackend::full()).await;
    for wire in BOTH {
        for (id, params) in [
            ("1", "null"),
            ("-9223372036854775808", "{}"),
            ("42", r#"{"x":1}"#),
        ] {
            let body =
                format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"getStatus","params":{params}}}"#);
            let answer = post_json(server.local_addr(), wire, &body).await;
            assert_eq!(
                answer,
                serde_json::from_str::<Value>(&format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"result":{{"ready":true}}}}"#
                ))
                .unwrap()
            );
        }
    }
    server.shutdown().await;
}
