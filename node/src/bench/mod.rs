//! `regolith bench ...`: benchmarks that print figures (never timing assertions in tests).

mod child;
mod client;
pub mod forger;
mod handles;
mod hostile;
pub mod hostile_sync;
mod queue;
mod queue_cases;
mod rpc;
mod sync;

pub use client::{client, ClientBenchArgs};
pub use handles::{handles, HANDLES_DEFAULT_COUNT};
pub use hostile::{hostile_body, HostileKind, HostileSettings, PhaseReport};
pub use queue::queue;
pub use rpc::{rpc, RpcBenchArgs};
pub use sync::{sync, SyncBenchArgs};
