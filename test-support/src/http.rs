//! Plain HTTP/1.1 over a TCP connection to 127.0.0.1: enough for a metrics endpoint or a local test server.

use std::io::{Read, Write};
use std::net::TcpStream;

/// Sends `request` as it is to 127.0.0.1:`port` and reads the answer (status line, headers and body) until
/// the server closes the connection; `None` when connecting, sending or reading fails.
pub fn http_request(port: u16, request: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.write_all(request.as_bytes()).ok()?;
    let mut out = String::new();
    // A reset in the middle of the answer leaves part of it, which is no answer.
    stream.read_to_string(&mut out).ok()?;
    Some(out)
}

/// `GET path` on 127.0.0.1:`port` with `Connection: close`: the whole answer, `None` as [`http_request`].
pub fn http_get(port: u16, path: &str) -> Option<String> {
    http_request(
        port,
        &format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"),
    )
}
