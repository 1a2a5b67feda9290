//! Ledger event lines (ledger.md, `regolith ledger apply-batch`): `DeliveryEvent::parse`, the delivery it
//! describes, and `Ledger::apply_json_line` on a ledger in a temp dir opened once per process. JSON is not
//! canonical, so the round trip is on values: an event serialises to a line that parses to the same event,
//! and event → delivery → event is the identity up to hex case of the digest. Applying the same line twice
//! never applies it twice (ledger.md §2 rule 1).
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use regolith_ledger::{DeliveryEvent, Ledger, LedgerOptions, OutcomeKind};

fn ledger() -> &'static Ledger {
    static LEDGER: OnceLock<(tempfile::TempDir, Ledger)> = OnceLock::new();
    &LEDGER
        .get_or_init(|| {
            let dir = tempfile::tempdir().expect("temp dir");
            let ledger = Ledger::open_with(
                dir.path().join("ledger"),
                LedgerOptions { sync_writes: false },
            )
            .expect("ledger db");
            (dir, ledger)
        })
        .1
}

fuzz_target!(|line: &[u8]| {
    let ledger = ledger();
    let parsed = DeliveryEvent::parse(line);
    if let Ok(event) = &parsed {
        let printed = serde_json::to_string(event).expect("an event serialises");
        assert_eq!(
            DeliveryEvent::parse(printed.as_bytes()).as_ref(),
            Ok(event),
            "{printed}"
        );
        if let Ok(delivery) = event.clone().into_delivery() {
            let back = DeliveryEvent::from_delivery(&delivery);
            assert_eq!(back.digest, event.digest.to_ascii_lowercase());
            assert_eq!(
                DeliveryEvent {
                    digest: event.digest.clone(),
                    ..back
                },
                *event
            );
        }
    }
    let first = ledger.apply_json_line(line).expect("the ledger db works");
    if parsed.is_err() {
        assert_eq!(first.kind(), OutcomeKind::Rejected);
    }
    let second = ledger.apply_json_line(line).expect("the ledger db works");
    match first.kind() {
        OutcomeKind::Rejected => assert_eq!(second.kind(), OutcomeKind::Rejected),
        _ => assert_eq!(
            second.kind(),
            OutcomeKind::Duplicate,
            "{first} then {second}"
        ),
    }
});
