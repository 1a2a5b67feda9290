//! regolith-ledger (ledger.md): the idempotent receiver journal for cross-chain course announcements
//! ("course C has edition E whose manifest has SHA-256 D"), in its own RocksDB under `<data>/ledger`.
//!
//! - [`Ledger::apply`] applies every delivery **at most once**, never lets an older edition replace a newer
//!   one, stores conflicts instead of hiding them, and names the [`Stage`] that decided every [`Outcome`].
//!   Each decision is one optimistic RocksDB transaction, retried from the start on a commit conflict.
//! - Three identities are kept apart: the [`DeliveryKey`] (transport context + message id), the announcement
//!   (course, edition) and the content [`Digest`].
//! - [`Ledger::raise_floor`] is the only way processed marks are pruned: below a floor proven closed for a
//!   transport context, after which replays of that range are `BelowFloor`.
//!
//! ```no_run
//! use regolith_ledger::{Delivery, Ledger, OutcomeKind, TransportContext};
//!
//! let ledger = Ledger::open("data/ledger")?;
//! let context = TransportContext::new("eth", "0xpublisher", "mirror-17", "ccip");
//! let delivery = Delivery::new(context, "msg-1", "C17", 1, [0u8; 32]).with_sequence(1);
//! let outcome = ledger.apply(&delivery)?;
//! assert_eq!(outcome.kind(), OutcomeKind::Applied);
//! println!("{outcome}"); // applied (stage edition_order): ...
//! # Ok::<(), regolith_ledger::LedgerError>(())
//! ```

mod db;
mod decision;
mod delivery;
mod delivery_key;
mod error;
mod event;
mod floor;
mod hash_bytes;
mod ledger;
mod outcome;
mod records;
mod stats;
mod tables;

pub use db::DB_VERSION;
pub use delivery::{Delivery, Digest, MAX_ID_LEN, SCHEMA_VERSION};
pub use delivery_key::{ContextId, DeliveryKey, TransportContext};
pub use error::{LedgerError, Result};
pub use event::DeliveryEvent;
pub use floor::{FloorChange, FloorRecord};
pub use ledger::{Ledger, LedgerOptions};
pub use outcome::{Decision, Outcome, OutcomeKind, RecordedOutcome, Stage};
pub use records::{ConflictRecord, CurrentRecord, Export, HistoryEntry, ProcessedDelivery};
pub use regolith_kv::KvError;
#[cfg(feature = "test-utils")]
pub use regolith_kv::RawRow;
pub use stats::{RecordedCounts, SessionStats, Stats};
