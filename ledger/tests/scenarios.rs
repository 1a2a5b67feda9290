//! Acceptance scenarios 1-7, 10 and 11 of ledger.md §6 (8 is in `concurrency.rs`, 9 in the node's
//! `ledger_cli.rs`). Each test fails when the rule it is named after is broken.

mod common;

use common::{context, delivery, digest, open, open_unsynced};
use regolith_ledger::{
    Decision, Delivery, DeliveryEvent, Digest, Ledger, LedgerError, OutcomeKind, Stage,
    TransportContext,
};

/// Scenario 1: the first delivery of (C17, 1, D1) is applied and becomes current.
#[test]
fn s1_first_delivery_applies() {
    let (_dir, ledger) = open();
    let first = delivery("msg-1", "C17", 1, 1);
    let outcome = ledger.apply(&first).unwrap();
    assert_eq!(outcome.kind(), OutcomeKind::Applied);
    assert_eq!(outcome.stage(), Stage::EditionOrder);
    assert_eq!(outcome.delivery_key(), Some(first.key()));
    assert!(matches!(
        outcome.decision(),
        Decision::Applied {
            edition: 1,
            previous_edition: None,
            ..
        }
    ));

    let current = ledger
        .current("C17")
        .unwrap()
        .expect("C17 has a current edition");
    assert_eq!((current.edition, current.digest), (1, Digest(digest(1))));
    assert_eq!(current.delivery_key, first.key());
    let history = ledger.history("C17").unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(
        (history[0].edition, history[0].outcome),
        (1, OutcomeKind::Applied)
    );
    assert!(ledger.current("C18").unwrap().is_none());
}

/// Scenario 2: the same delivery again is a duplicate that changes nothing, byte for byte, also after a
/// restart, and carries the original outcome.
#[test]
fn s2_same_delivery_again_is_duplicate() {
    let dir = tempfile::tempdir().unwrap();
    let first = delivery("msg-1", "C17", 1, 1);
    let before = {
        let ledger = Ledger::open(dir.path()).unwrap();
        ledger.apply(&first).unwrap();
        ledger.raw_rows().unwrap()
    };
    let ledger = Ledger::open(dir.path()).unwrap();
    for _ in 0..2 {
        let outcome = ledger.apply(&first).unwrap();
        assert_eq!(outcome.kind(), OutcomeKind::Duplicate);
        assert_eq!(outcome.stage(), Stage::DeliveryKey);
        let Decision::Duplicate { original } = outcome.decision() else {
            panic!("{outcome:?}")
        };
        assert_eq!(original.outcome, OutcomeKind::Applied);
        assert_eq!(original.stage, Stage::EditionOrder);
        assert_eq!((original.course.as_str(), original.edition), ("C17", 1));
        assert_eq!(original.digest, Digest(digest(1)));
    }
    assert_eq!(
        ledger.raw_rows().unwrap(),
        before,
        "a duplicate must not write anything"
    );
    // The same transport message with other content is still the same delivery: the digest never stands
    // in for the delivery key.
    let altered = delivery("msg-1", "C17", 7, 9);
    assert_eq!(
        ledger.apply(&altered).unwrap().kind(),
        OutcomeKind::Duplicate
    );
    assert_eq!(ledger.raw_rows().unwrap(), before);
    assert_eq!(ledger.stats().unwrap().session.duplicate, 3);
}

/// Scenario 3: another delivery of the current announcement is `AlreadyCurrent`; current is unchanged and
/// the delivery is recorded.
#[test]
fn s3_another_delivery_of_current_is_already_current() {
    let (_dir, ledger) = open();
    let first = delivery("msg-1", "C17", 1, 1);
    ledger.apply(&first).unwrap();
    let current = ledger.current("C17").unwrap();

    let second = delivery("msg-2", "C17", 1, 1);
    let outcome = ledger.apply(&second).unwrap();
    assert_eq!(outcome.kind(), OutcomeKind::AlreadyCurrent);
    assert_eq!(outcome.stage(), Stage::DigestCompare);
    assert_eq!(
        ledger.current("C17").unwrap(),
        current,
        "current record is unchanged"
    );
    assert_eq!(
        ledger.history("C17").unwrap().len(),
        1,
        "the same announcement is not history again"
    );

    let replay = ledger.apply(&second).unwrap();
    let Decision::Duplicate { original } = replay.decision() else {
        panic!("{replay:?}")
    };
    assert_eq!(
        original.outcome,
        OutcomeKind::AlreadyCurrent,
        "the delivery was recorded with its outcome"
    );
    assert_eq!(ledger.stats().unwrap().recorded.already_current, 1);
}

/// Scenario 4: edition 2 applies; a late, genuine edition 1 arriving afterwards is stale, is kept in history
/// and never becomes current.
#[test]
fn s4_late_older_edition_is_stale() {
    let (_dir, ledger) = open();
    assert_eq!(
        ledger
            .apply(&delivery("msg-2", "C17", 2, 2))
            .unwrap()
            .kind(),
        OutcomeKind::Applied
    );
    let late = delivery("msg-1", "C17", 1, 1);
    let outcome = ledger.apply(&late).unwrap();
    assert_eq!(outcome.kind(), OutcomeKind::Stale);
    assert_eq!(outcome.stage(), Stage::EditionOrder);
    assert!(matches!(
        outcome.decision(),
        Decision::Stale {
            edition: 1,
            current_edition: 2,
            ..
        }
    ));

    let current = ledger.current("C17").unwrap().unwrap();
    assert_eq!((current.edition, current.digest), (2, Digest(digest(2))));
    let history = ledger.history("C17").unwrap();
    let rows: Vec<_> = history
        .iter()
        .map(|h| (h.edition, h.outcome, h.delivery_key))
        .collect();
    assert_eq!(
        rows,
        vec![
            (1, OutcomeKind::Stale, late.key()),
            (
                2,
                OutcomeKind::Applied,
                delivery("msg-2", "C17", 2, 2).key()
            )
        ]
    );
    assert_eq!(ledger.apply(&late).unwrap().kind(), OutcomeKind::Duplicate);
}

/// Scenario 5: edition 2 again with another digest is a stored, listed conflict; current is unchanged, and
/// the conflict stays until resolved, across a restart and a newer edition.
#[test]
fn s5_same_edition_other_digest_is_stored_conflict() {
    let dir = tempfile::tempdir().unwrap();
    let contested = delivery("msg-3", "C17", 2, 3);
    {
        let ledger = Ledger::open(dir.path()).unwrap();
        ledger.apply(&delivery("msg-1", "C17", 1, 1)).unwrap();
        ledger.apply(&delivery("msg-2", "C17", 2, 2)).unwrap();
        let current = ledger.current("C17").unwrap();

        let outcome = ledger.apply(&contested).unwrap();
        assert_eq!(outcome.kind(), OutcomeKind::Conflict);
        assert_eq!(outcome.stage(), Stage::DigestCompare);
        assert!(matches!(
            outcome.decision(),
            Decision::Conflict { edition: 2, current_digest, delivered_digest, .. }
                if *current_digest == Digest(digest(2)) && *delivered_digest == Digest(digest(3))
        ));
        assert_eq!(
            ledger.current("C17").unwrap(),
            current,
            "a conflict changes nothing about the course"
        );
        assert_eq!(
            ledger.history("C17").unwrap().len(),
            2,
            "a conflict is not history"
        );
    }
    let ledger = Ledger::open(dir.path()).unwrap();
    let conflicts = ledger.conflicts().unwrap();
    assert_eq!(conflicts.len(), 1);
    let conflict = &conflicts[0];
    assert_eq!((conflict.course.as_str(), conflict.edition), ("C17", 2));
    assert_eq!(conflict.current_digest, Digest(digest(2)));
    assert_eq!(conflict.delivered_digest, Digest(digest(3)));
    assert_eq!(conflict.delivery_key, contested.key());
    assert!(conflict.recorded_at_ms > 0);

    // A corrected manifest needs a new edition; the stored conflict does not go away by itself.
    assert_eq!(
        ledger
            .apply(&delivery("msg-4", "C17", 3, 3))
            .unwrap()
            .kind(),
        OutcomeKind::Applied
    );
    assert_eq!(ledger.conflicts().unwrap(), conflicts);
    let replay = ledger.apply(&contested).unwrap();
    assert!(
        matches!(replay.decision(), Decision::Duplicate { original } if original.outcome == OutcomeKind::Conflict)
    );
}

/// Scenario 6: editions are numbers: after 2, edition 10 is newer (and 9 is then stale).
#[test]
fn s6_editions_compare_numerically() {
    let (_dir, ledger) = open();
    ledger.apply(&delivery("msg-2", "C17", 2, 2)).unwrap();
    let outcome = ledger.apply(&delivery("msg-10", "C17", 10, 10)).unwrap();
    assert!(matches!(
        outcome.decision(),
        Decision::Applied {
            edition: 10,
            previous_edition: Some(2),
            ..
        }
    ));
    assert_eq!(ledger.current("C17").unwrap().unwrap().edition, 10);
    assert_eq!(
        ledger
            .apply(&delivery("msg-9", "C17", 9, 9))
            .unwrap()
            .kind(),
        OutcomeKind::Stale
    );

    // The other way round as well.
    ledger.apply(&delivery("msg-10b", "C18", 10, 10)).unwrap();
    assert_eq!(
        ledger
            .apply(&delivery("msg-2b", "C18", 2, 2))
            .unwrap()
            .kind(),
        OutcomeKind::Stale
    );
    assert_eq!(ledger.current("C18").unwrap().unwrap().edition, 10);
    let editions: Vec<u64> = ledger
        .history("C17")
        .unwrap()
        .iter()
        .map(|h| h.edition)
        .collect();
    assert_eq!(editions, vec![2, 9, 10], "history is ordered numerically");
}

/// Scenario 7: delivery keys have field boundaries, and a message id is scoped by its context.
#[test]
fn s7_delivery_keys_are_unambiguous_and_scoped() {
    let (_dir, ledger) = open();
    let with_transport = |transport: &str, message_id: &str| {
        Delivery::new(
            TransportContext::new("eth", "0xp", "mirror", transport),
            message_id,
            "C17",
            1,
            digest(1),
        )
    };
    let ab_c = with_transport("ab", "c");
    let a_bc = with_transport("a", "bc");
    assert_ne!(ab_c.key(), a_bc.key());
    assert_eq!(ledger.apply(&ab_c).unwrap().kind(), OutcomeKind::Applied);
    assert_eq!(
        ledger.apply(&a_bc).unwrap().kind(),
        OutcomeKind::AlreadyCurrent,
        "(\"a\",\"bc\") is another delivery than (\"ab\",\"c\")"
    );

    // The same message id in two contexts: two deliveries.
    let ccip = Delivery::new(context(), "msg-1", "C18", 1, digest(1));
    let mut other_context = context();
    other_context.sending_instance = "0xother".into();
    let other = Delivery::new(other_context, "msg-1", "C18", 1, digest(1));
    assert_eq!(ledger.apply(&ccip).unwrap().kind(), OutcomeKind::Applied);
    assert_eq!(
        ledger.apply(&other).unwrap().kind(),
        OutcomeKind::AlreadyCurrent
    );
    assert_eq!(ledger.stats().unwrap().deliveries, 4);
}

/// Scenario 10: a floor of 500 prunes the marks at or below it in the same step; a replay of delivery 400
/// is then `BelowFloor` and delivery 501 is processed. Floors are per context, never lowered, and leave
/// history and unsequenced deliveries alone.
#[test]
fn s10_floor_prunes_and_rejects_replays_below_it() {
    let (dir, ledger) = open_unsynced();
    let sequenced = |sequence: u64, edition: u64| {
        delivery(
            &format!("msg-{sequence}"),
            "C17",
            edition,
            (sequence % 200) as u8,
        )
        .with_sequence(sequence)
    };
    for sequence in (400..=520).filter(|s| *s != 501) {
        assert_eq!(
            ledger.apply(&sequenced(sequence, sequence)).unwrap().kind(),
            OutcomeKind::Applied
        );
    }
    let unsequenced = delivery("no-sequence", "C17", 1, 1);
    assert_eq!(
        ledger.apply(&unsequenced).unwrap().kind(),
        OutcomeKind::Stale
    );
    let history_before = ledger.history("C17").unwrap();
    assert_eq!(ledger.stats().unwrap().deliveries, 121);

    let change = ledger.raise_floor(&context(), 500).unwrap();
    assert_eq!(
        (change.previous_floor, change.floor, change.pruned),
        (None, 500, 101)
    );
    let stats = ledger.stats().unwrap();
    assert_eq!(
        (
            stats.deliveries,
            stats.sequenced_deliveries,
            stats.pruned_total
        ),
        (20, 19, 101)
    );

    let replay = ledger.apply(&sequenced(400, 400)).unwrap();
    assert_eq!(replay.kind(), OutcomeKind::BelowFloor);
    assert_eq!(replay.stage(), Stage::Floor);
    assert!(matches!(
        replay.decision(),
        Decision::BelowFloor {
            sequence: 400,
            floor: 500
        }
    ));
    // A never-seen delivery at or below the floor cannot be told from a replay either.
    let fresh = delivery("never-seen", "C17", 9_000, 1).with_sequence(450);
    assert_eq!(
        ledger.apply(&fresh).unwrap().kind(),
        OutcomeKind::BelowFloor
    );

    let next = ledger.apply(&sequenced(501, 9_000)).unwrap();
    assert_eq!(
        next.kind(),
        OutcomeKind::Applied,
        "delivery 501 is above the floor and new"
    );
    assert_eq!(
        ledger.apply(&sequenced(501, 9_000)).unwrap().kind(),
        OutcomeKind::Duplicate
    );
    assert_eq!(
        ledger.apply(&sequenced(510, 510)).unwrap().kind(),
        OutcomeKind::Duplicate,
        "kept above the floor"
    );
    assert_eq!(
        ledger.apply(&unsequenced).unwrap().kind(),
        OutcomeKind::Duplicate,
        "never pruned"
    );
    assert_eq!(
        ledger.history("C17").unwrap().len(),
        history_before.len() + 1,
        "history is not pruned"
    );

    // The floor is per context.
    let mut other_context = context();
    other_context.transport = "other-bridge".into();
    let other = Delivery::new(other_context, "msg-400", "C18", 1, digest(1)).with_sequence(400);
    assert_eq!(ledger.apply(&other).unwrap().kind(), OutcomeKind::Applied);

    // Never lowered; survives a restart.
    let lower = ledger.raise_floor(&context(), 450).unwrap();
    assert_eq!(
        (lower.previous_floor, lower.floor, lower.pruned),
        (Some(500), 500, 0)
    );
    drop(ledger);
    let ledger = Ledger::open(dir.path().join("ledger")).unwrap();
    assert_eq!(
        ledger.apply(&sequenced(450, 450)).unwrap().kind(),
        OutcomeKind::BelowFloor
    );
    let floors = ledger.floors().unwrap();
    assert_eq!(floors.len(), 1);
    assert_eq!(
        (floors[0].floor, floors[0].pruned_total, &floors[0].context),
        (500, 101, &context())
    );

    let raised = ledger.raise_floor(&context(), 505).unwrap();
    assert_eq!(
        (raised.previous_floor, raised.floor, raised.pruned),
        (Some(500), 505, 5)
    );
    assert!(matches!(
        ledger.raise_floor(&TransportContext::new("", "a", "b", "c"), 1),
        Err(LedgerError::InvalidArgument {
            field: "context",
            ..
        })
    ));
}

/// Scenario 11: malformed input is rejected with its stage named and records nothing, so the corrected
/// retry of the same message applies.
#[test]
fn s11_malformed_input_records_nothing() {
    let (_dir, ledger) = open();
    let empty_state = ledger.raw_rows().unwrap();
    let good = delivery("msg-1", "C17", 1, 1);
    let cases: Vec<(Delivery, &str)> = vec![
        (
            Delivery {
                message_id: String::new(),
                ..good.clone()
            },
            "message_id is empty",
        ),
        (
            Delivery {
                course: String::new(),
                ..good.clone()
            },
            "course is empty",
        ),
        (
            Delivery {
                context: TransportContext {
                    target_instance: String::new(),
                    ..context()
                },
                ..good.clone()
            },
            "context.target_instance is empty",
        ),
        (
            Delivery {
                digest: vec![1; 31],
                ..good.clone()
            },
            "digest must be 32 bytes (SHA-256), got 31",
        ),
        (
            Delivery {
                digest: vec![1; 64],
                ..good.clone()
            },
            "got 64",
        ),
        (
            Delivery {
                schema_version: 2,
                ..good.clone()
            },
            "unknown schema version 2",
        ),
    ];
    for (malformed, expected) in cases {
        let outcome = ledger.apply(&malformed).unwrap();
        assert_eq!(outcome.kind(), OutcomeKind::Rejected, "{malformed:?}");
        assert_eq!(outcome.stage(), Stage::Validate);
        let Decision::Rejected { reason } = outcome.decision() else {
            panic!("{outcome:?}")
        };
        assert!(
            reason.contains(expected),
            "{reason:?} should say {expected:?}"
        );
        assert_eq!(
            ledger.raw_rows().unwrap(),
            empty_state,
            "a rejection must record nothing"
        );
    }

    // The stream form: undecodable lines are rejected at `decode`, bad values at `validate`.
    let event = DeliveryEvent::from_delivery(&good);
    let json = serde_json::to_string(&event).unwrap();
    for (line, stage) in [
        (b"not json".to_vec(), Stage::Decode),
        (
            json.replace("\"edition\":1", "\"edition\":\"1\"")
                .into_bytes(),
            Stage::Decode,
        ),
        (
            json.replace(&event.digest, "zz").into_bytes(),
            Stage::Decode,
        ),
        (
            json.replace(&event.digest, "abcd").into_bytes(),
            Stage::Validate,
        ),
    ] {
        let outcome = ledger.apply_json_line(&line).unwrap();
        assert_eq!(
            (outcome.kind(), outcome.stage()),
            (OutcomeKind::Rejected, stage),
            "{outcome}"
        );
        assert_eq!(ledger.raw_rows().unwrap(), empty_state);
    }
    assert_eq!(ledger.stats().unwrap().session.rejected, 10);

    // The corrected retry of the very same message applies.
    let retry = ledger
        .apply_json_line(serde_json::to_string(&event).unwrap().as_bytes())
        .unwrap();
    assert_eq!(retry.kind(), OutcomeKind::Applied);
    assert_eq!(retry.delivery_key(), Some(good.key()));
    assert_eq!(ledger.current("C17").unwrap().unwrap().edition, 1);

    // Operator calls name the bad argument instead.
    assert!(matches!(
        ledger.current(""),
        Err(LedgerError::InvalidArgument {
            field: "course",
            ..
        })
    ));
}

/// Every outcome that is recorded has its effect recorded in the same step, visible in the export.
#[test]
fn export_matches_outcomes() {
    let (_dir, ledger) = open_unsynced();
    let applied = delivery("a", "C17", 2, 2);
    let current = delivery("b", "C17", 2, 2);
    let conflict = delivery("c", "C17", 2, 3);
    let stale = delivery("d", "C17", 1, 1);
    for d in [&applied, &current, &conflict, &stale] {
        ledger.apply(d).unwrap();
    }
    let export = ledger.export().unwrap();
    let recorded = |key| {
        export
            .deliveries
            .iter()
            .find(|d| d.delivery_key == key)
            .map(|d| d.recorded.outcome)
    };
    assert_eq!(recorded(applied.key()), Some(OutcomeKind::Applied));
    assert_eq!(recorded(current.key()), Some(OutcomeKind::AlreadyCurrent));
    assert_eq!(recorded(conflict.key()), Some(OutcomeKind::Conflict));
    assert_eq!(recorded(stale.key()), Some(OutcomeKind::Stale));
    assert_eq!(export.courses.len(), 1);
    assert_eq!(export.history.len(), 2);
    assert_eq!(export.conflicts.len(), 1);
    let stats = ledger.stats().unwrap();
    assert_eq!(
        (
            stats.courses,
            stats.deliveries,
            stats.history_rows,
            stats.conflicts
        ),
        (1, 4, 2, 1)
    );
}
