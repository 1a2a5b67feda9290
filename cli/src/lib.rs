//! The `regolith` command line: one module per command ([`commands`]), the argument types they share
//! ([`block_ref`]). The runtime they drive is regolith-node's; the instruments of `regolith bench` are
//! regolith-testbed's. The binary (`main.rs`) parses the command line and dispatches.

pub mod block_ref;
pub mod commands;
