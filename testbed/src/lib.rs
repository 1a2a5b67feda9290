//! Instruments that regolith's tests and `regolith bench` share, kept out of the node's runtime:
//! - [`fixture`]: a data directory holding a chain (the fixture chain or a generated one), nodes serving it
//!   in-process, and a fresh node synced from them;
//! - [`process`]: a `regolith run` child process (its data dir, metrics, peak RSS, clean stop);
//! - [`forger`] and [`hostile_sync`]: a serving peer that lies in chosen ways, and a victim syncing from it
//!   (the tests and `regolith bench sync --hostile` run it);
//! - [`relay`]: a UDP relay that drops and delays datagrams, standing in for netem.

pub mod fixture;
pub mod forger;
pub mod hostile_sync;
pub mod process;
pub mod relay;
