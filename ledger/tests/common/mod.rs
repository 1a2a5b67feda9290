//! Helpers shared by the ledger's integration tests.
#![allow(dead_code)]

use regolith_ledger::{Delivery, Ledger, LedgerOptions, TransportContext};
use tempfile::TempDir;

/// The context most tests deliver through.
pub(crate) fn context() -> TransportContext {
    TransportContext::new("eth-mainnet", "0xpublisher", "mirror-17", "ccip")
}

/// A recognisable 32-byte digest.
pub(crate) fn digest(n: u8) -> [u8; 32] {
    let mut out = [n; 32];
    out[0] = 0xd0;
    out
}

/// A delivery of (course, edition, digest) through [`context`].
pub(crate) fn delivery(message_id: &str, course: &str, edition: u64, digest_byte: u8) -> Delivery {
    Delivery::new(context(), message_id, course, edition, digest(digest_byte))
}

/// A ledger in a fresh temp dir, synced like production.
pub(crate) fn open() -> (TempDir, Ledger) {
    let dir = tempfile::tempdir().unwrap();
    let ledger = Ledger::open(dir.path().join("ledger")).unwrap();
    (dir, ledger)
}

/// A ledger in a fresh temp dir without WAL fsync (bulk tests; a process crash still loses nothing).
pub(crate) fn open_unsynced() -> (TempDir, Ledger) {
    let dir = tempfile::tempdir().unwrap();
    let ledger = Ledger::open_with(
        dir.path().join("ledger"),
        LedgerOptions { sync_writes: false },
    )
    .unwrap();
    (dir, ledger)
}
