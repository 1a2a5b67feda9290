//! One module per `regolith` command: its arguments (clap) and what it runs and prints. The work itself is
//! regolith-node's (the runtime) or the libraries'; a command parses, calls and reports.

pub mod bench;
pub mod chain;
pub mod devnet;
pub mod import;
pub mod import_queue_state;
pub mod init;
pub mod inspect;
pub mod ledger;
pub mod p2p;
pub mod run;
