//! `regolith bench ...`: benchmarks that print figures (never timing assertions in tests).

mod queue;
mod rpc;

pub use queue::queue;
pub use rpc::{rpc, RpcBenchArgs};
