//! Helpers shared by the integration tests of several regolith crates: the fixture files, hashes written in
//! hex, free loopback ports, plain HTTP requests, and waiting for a condition with a deadline. Helpers that
//! only one crate's tests use stay in that crate's `tests/common`.
//!
//! The crate depends on no regolith crate, so that any of them can take it as a dev-dependency. Loopback
//! network helpers (tycho-network) are behind the `net` feature.

pub mod fixtures;
pub mod hex;
pub mod http;
pub mod messages;
#[cfg(feature = "net")]
pub mod net;
pub mod ports;
pub mod wait;

pub use fixtures::{
    archive_1_arg, archive_1_bytes, archive_1_decompressed, archive_1_path, fixture_bytes,
    fixture_path, fixtures, zerostate_path,
};
pub use hex::{bytes32_from_hex, hash_from_hex};
pub use http::{http_get, http_request};
pub use messages::external_message;
pub use ports::{free_tcp_port, free_udp_port};
pub use wait::{wait_for, wait_for_async, wait_until, wait_until_async};
