//! `regolith bench ...`: benchmarks that print figures (never timing assertions in tests).

mod client;
mod queue;
mod rpc;

pub use client::{client, ClientBenchArgs};
pub use queue::queue;
pub use rpc::{rpc, RpcBenchArgs};
