//! Free loopback ports, for processes that must be told a port before they bind it.

use std::net::{TcpListener, UdpSocket};

/// A TCP port on 127.0.0.1 that was free a moment ago (another process may take it before the caller).
pub fn free_tcp_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A UDP port on 127.0.0.1 that was free a moment ago (another process may take it before the caller).
pub fn free_udp_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
