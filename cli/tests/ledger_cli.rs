//! End-to-end tests of `regolith ledger ...`: every subcommand with `--json`, `apply-batch` with malformed
//! lines, and ledger.md §6 scenario 9 (SIGKILL during a batch replay, then a replay again, gives the same
//! state as one clean replay).

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{ok, regolith};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use regolith_ledger::{Export, Ledger, OutcomeKind};
use serde_json::{json, Value};

const CONTEXT: [&str; 4] = ["eth-mainnet", "0xpublisher", "mirror-17", "ccip"];

fn ok_json(data: &Path, args: &[&str]) -> Value {
    let out = ok(data, args);
    serde_json::from_str(&out)
        .unwrap_or_else(|e| panic!("regolith {args:?} printed no JSON ({e}): {out}"))
}

fn digest_hex(n: u64) -> String {
    format!("{:064x}", 0xd000_0000u64 + n)
}

fn apply_args<'a>(
    message_id: &'a str,
    course: &'a str,
    edition: &'a str,
    digest: &'a str,
) -> Vec<&'a str> {
    let mut args = vec!["ledger", "apply", "--json", "--context"];
    args.extend(CONTEXT);
    args.extend([
        "--message-id",
        message_id,
        "--course",
        course,
        "--edition",
        edition,
        "--digest",
        digest,
    ]);
    args
}

#[test]
fn subcommands_with_json_on_an_uninitialised_data_dir() {
    let temp = tempfile::tempdir().unwrap();
    let data = temp.path().join("not-initialised");
    let d2 = digest_hex(2);

    let mut first = apply_args("m-1", "C17", "2", &d2);
    first.extend(["--sequence", "1"]);
    let applied = ok_json(&data, &first);
    assert_eq!(
        (applied["outcome"].as_str(), applied["stage"].as_str()),
        (Some("applied"), Some("edition_order"))
    );
    assert_eq!(applied["edition"], 2);
    assert!(data.join("ledger").is_dir());
    assert!(!data.join("node.json").exists());

    let duplicate = ok_json(&data, &first);
    assert_eq!(
        (duplicate["outcome"].as_str(), duplicate["stage"].as_str()),
        (Some("duplicate"), Some("delivery_key"))
    );
    assert_eq!(duplicate["original"]["outcome"], "applied");
    assert_eq!(duplicate["delivery_key"], applied["delivery_key"]);

    for (args, stage, says) in [
        (
            apply_args("m-2", "C17", "2", "zz"),
            "decode",
            "digest is not hex",
        ),
        (
            apply_args("m-2", "C17", "two", &d2),
            "decode",
            "edition \"two\" is not an unsigned 64-bit integer",
        ),
        (
            apply_args("m-2", "C17", "2", "abcd"),
            "validate",
            "digest must be 32 bytes (SHA-256), got 2",
        ),
        (
            apply_args("", "C17", "2", &d2),
            "validate",
            "message_id is empty",
        ),
    ] {
        let rejected = ok_json(&data, &args);
        assert_eq!(rejected["outcome"], "rejected", "{rejected}");
        assert_eq!(rejected["stage"], stage, "{rejected}");
        assert!(
            rejected["reason"].as_str().unwrap().contains(says),
            "{rejected}"
        );
    }

    let conflict = ok_json(&data, &apply_args("m-2", "C17", "2", &digest_hex(3)));
    assert_eq!(
        (conflict["outcome"].as_str(), conflict["stage"].as_str()),
        (Some("conflict"), Some("digest_compare"))
    );
    let conflicts = ok_json(&data, &["ledger", "conflicts", "--json"]);
    assert_eq!(conflicts.as_array().unwrap().len(), 1);
    assert_eq!(conflicts[0]["delivered_digest"], digest_hex(3));
    assert!(ok(&data, &["ledger", "conflicts"]).contains("C17 edition 2: current digest"));

    let course = ok_json(&data, &["ledger", "show", "C17", "--json"]);
    assert_eq!(course["current"]["edition"], 2);
    assert_eq!(course["current"]["digest"], d2);
    assert_eq!(course["history"].as_array().unwrap().len(), 1);
    let all = ok_json(&data, &["ledger", "show", "--json"]);
    assert_eq!(all["courses"].as_array().unwrap().len(), 1);
    assert_eq!(all["stats"]["deliveries"], 2);

    let mut raise = vec![
        "ledger",
        "raise-floor",
        "--json",
        "--watermark",
        "1",
        "--context",
    ];
    raise.extend(CONTEXT);
    let change = ok_json(&data, &raise);
    assert_eq!(
        (change["floor"].as_u64(), change["pruned"].as_u64()),
        (Some(1), Some(1))
    );
    let below = ok_json(&data, &first);
    assert_eq!(
        (below["outcome"].as_str(), below["stage"].as_str()),
        (Some("below_floor"), Some("floor"))
    );

    let text = ok(
        &data,
        &apply_args("m-3", "C17", "3", &digest_hex(4))[..]
            .iter()
            .copied()
            .filter(|a| *a != "--json")
            .collect::<Vec<_>>(),
    );
    assert!(
        text.starts_with("applied (stage edition_order): course \"C17\" edition 3"),
        "{text}"
    );
}

#[test]
fn apply_batch_counts_outcomes_and_reports_malformed_lines() {
    let temp = tempfile::tempdir().unwrap();
    let data = temp.path().join("data");
    let event = |message_id: &str, edition: u64, digest: String| {
        json!({"context": {"source_network": CONTEXT[0], "sending_instance": CONTEXT[1], "target_instance": CONTEXT[2],
            "transport": CONTEXT[3]}, "message_id": message_id, "course": "C17", "edition": edition, "digest": digest})
        .to_string()
    };
    let lines = [
        event("m-1", 2, digest_hex(2)),
        String::new(),
        "{ this is not json".to_string(),
        event("m-1", 2, digest_hex(2)),
        event("m-2", 2, "abcd".to_string()),
        event("m-3", 1, digest_hex(1)),
        event("m-4", 2, digest_hex(2)),
    ];
    let file = temp.path().join("events.jsonl");
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let summary = ok_json(
        &data,
        &["ledger", "apply-batch", file.to_str().unwrap(), "--json"],
    );
    assert_eq!(summary["deliveries"], 6);
    assert_eq!(
        summary["outcomes"],
        json!({"applied": 1, "already_current": 1, "conflict": 0, "stale": 1, "duplicate": 1, "below_floor": 0,
            "rejected": 2})
    );
    let rejected = summary["rejected_lines"].as_array().unwrap();
    assert_eq!(
        (rejected[0]["line"].as_u64(), rejected[0]["stage"].as_str()),
        (Some(3), Some("decode"))
    );
    assert_eq!(
        (rejected[1]["line"].as_u64(), rejected[1]["stage"].as_str()),
        (Some(5), Some("validate"))
    );

    let text = ok(&data, &["ledger", "apply-batch", file.to_str().unwrap()]);
    assert!(text.contains("line 3: rejected (stage decode)"), "{text}");
    assert!(
        text.contains(
            "6 deliveries: applied 0, already_current 0, conflict 0, stale 0, duplicate 4"
        ),
        "{text}"
    );

    let out = regolith(
        &data,
        &["ledger", "apply-batch", "/nonexistent/events.jsonl"],
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/events.jsonl"));
}

/// An event stream of `count` lines over one context: new announcements in random order (so applied,
/// stale, already-current and conflicting ones), verbatim repeats of earlier lines and malformed lines.
fn event_stream(count: usize) -> String {
    let mut rng = StdRng::seed_from_u64(9);
    let mut lines: Vec<String> = Vec::with_capacity(count);
    for index in 0..count {
        let line = if index % 97 == 13 {
            match index % 3 {
                0 => "{\"context\": 17".to_string(),
                1 => "\u{1}garbage".to_string(),
                _ => json!({"context": {"source_network": CONTEXT[0], "sending_instance": CONTEXT[1],
                    "target_instance": CONTEXT[2], "transport": CONTEXT[3]}, "message_id": format!("m-{index}"),
                    "course": "C1", "edition": 1, "digest": "abcd"})
                .to_string(),
            }
        } else if index > 10 && rng.gen_bool(0.15) {
            lines[rng.gen_range(0..lines.len())].clone()
        } else {
            let course = rng.gen_range(0..30u64);
            let edition = rng.gen_range(1..=40u64);
            let variant = u64::from(rng.gen_bool(0.1));
            json!({"context": {"source_network": CONTEXT[0], "sending_instance": CONTEXT[1],
                "target_instance": CONTEXT[2], "transport": CONTEXT[3]}, "message_id": format!("m-{index}"),
                "sequence": index + 1, "course": format!("C{course}"), "edition": edition,
                "digest": digest_hex(course * 1000 + edition * 2 + variant)})
            .to_string()
        };
        lines.push(line);
    }
    lines.join("\n") + "\n"
}

/// The export without wall-clock times, which legitimately differ between two replays.
fn timeless(export: &Export) -> Value {
    fn strip(value: &mut Value) {
        match value {
            Value::Object(map) => {
                map.retain(|key, _| !key.ends_with("_at_ms"));
                map.values_mut().for_each(strip);
            }
            Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut value = serde_json::to_value(export).unwrap();
    strip(&mut value);
    value
}

/// Every recorded decision has all of its effect and nothing else does: what a torn decision would break.
fn assert_consistent(export: &Export) {
    for processed in &export.deliveries {
        let key = processed.delivery_key;
        let recorded = &processed.recorded;
        let in_history = export.history.iter().find(|h| h.delivery_key == key);
        let in_conflicts = export.conflicts.iter().find(|c| c.delivery_key == key);
        match recorded.outcome {
            OutcomeKind::Applied | OutcomeKind::Stale => {
                let entry = in_history.unwrap_or_else(|| panic!("{recorded:?} has no history row"));
                assert_eq!(
                    (entry.outcome, entry.edition, entry.digest),
                    (recorded.outcome, recorded.edition, recorded.digest)
                );
                assert!(in_conflicts.is_none());
            }
            OutcomeKind::Conflict => {
                assert!(in_conflicts.is_some(), "{recorded:?} has no conflict row");
                assert!(in_history.is_none());
            }
            _ => assert!(
                in_history.is_none() && in_conflicts.is_none(),
                "{recorded:?} has rows"
            ),
        }
    }
    let marked = |key| export.deliveries.iter().any(|d| d.delivery_key == key);
    assert!(
        export.history.iter().all(|h| marked(h.delivery_key)),
        "history row without its delivery"
    );
    assert!(
        export.conflicts.iter().all(|c| marked(c.delivery_key)),
        "conflict row without its delivery"
    );
    for current in &export.courses {
        let best = export
            .history
            .iter()
            .filter(|h| h.course == current.course && h.outcome == OutcomeKind::Applied)
            .max_by_key(|h| h.edition)
            .expect("a current record has an applied history row");
        assert_eq!(
            (best.edition, best.digest, best.delivery_key),
            (current.edition, current.digest, current.delivery_key)
        );
    }
}

fn export_of(data: &Path) -> Export {
    Ledger::open(data.join("ledger")).unwrap().export().unwrap()
}

/// Scenario 9: SIGKILL during `apply-batch` at least 20 times, replay to the end, and the state is the
/// state of one clean replay; after every kill the state holds whole decisions only.
#[test]
fn s9_sigkill_during_batch_replay_then_replay_matches_clean_replay() {
    let temp = tempfile::tempdir().unwrap();
    let file = temp.path().join("events.jsonl");
    std::fs::write(&file, event_stream(3000)).unwrap();
    let file = file.to_str().unwrap();

    let clean = temp.path().join("clean");
    let started = Instant::now();
    let summary = ok_json(&clean, &["ledger", "apply-batch", file, "--json"]);
    let clean_run = started.elapsed();
    assert_eq!(summary["deliveries"], 3000);
    assert!(
        summary["outcomes"]["rejected"].as_u64().unwrap() >= 30,
        "{summary}"
    );
    for kind in [
        "applied",
        "already_current",
        "conflict",
        "stale",
        "duplicate",
    ] {
        assert!(
            summary["outcomes"][kind].as_u64().unwrap() > 0,
            "the stream has no {kind}: {summary}"
        );
    }
    let clean_export = export_of(&clean);
    assert_consistent(&clean_export);
    let total = clean_export.deliveries.len();

    // How long the binary takes to start and open the ledger: kills aim just past it.
    let started = Instant::now();
    ok(&clean, &["ledger", "show", "--json"]);
    let startup = started.elapsed();
    let step = (clean_run / 40).max(Duration::from_millis(5));

    let killed = temp.path().join("killed");
    let mut rng = StdRng::seed_from_u64(5);
    let mut delay = startup;
    let (mut kills, mut kills_mid_replay, mut recorded) = (0, 0, 0usize);
    // Attempts are bounded generously: on a loaded machine the start-up time varies, and many kills land
    // before or after the replay; the loop stops at the 20th kill inside it.
    for _ in 0..1500 {
        if kills_mid_replay >= 20 {
            break;
        }
        let mut child = Command::new(env!("CARGO_BIN_EXE_regolith"))
            .arg("--data")
            .arg(&killed)
            .args(["ledger", "apply-batch", file, "--json"])
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(delay + step.mul_f64(rng.gen_range(0.0..1.0)));
        if child.try_wait().unwrap().is_some() {
            // Finished before the kill: aim earlier next time.
            delay /= 2;
            continue;
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        kills += 1;

        let export = export_of(&killed);
        assert_consistent(&export);
        let now = export.deliveries.len();
        assert!(now >= recorded, "decisions were lost: {now} < {recorded}");
        if now > recorded && now < total {
            kills_mid_replay += 1;
            // Keep each run's share of new work small so that many kills fit into the replay.
            delay = delay.saturating_sub(step / 4).max(startup / 2);
        } else if now == recorded {
            // Killed before it got to new work: aim later.
            delay += step / 2;
        }
        recorded = now;
    }
    assert!(
        kills >= 20 && kills_mid_replay >= 20,
        "{kills} kills, {kills_mid_replay} during the replay"
    );
    assert!(
        recorded < total,
        "the replay must not have completed under the kills"
    );

    let resumed = ok_json(&killed, &["ledger", "apply-batch", file, "--json"]);
    assert_eq!(resumed["deliveries"], 3000);
    let resumed_export = export_of(&killed);
    assert_consistent(&resumed_export);
    assert_eq!(
        timeless(&resumed_export),
        timeless(&clean_export),
        "killed + replayed differs from one clean replay"
    );
    // A replay on top changes nothing either.
    let again = ok_json(&clean, &["ledger", "apply-batch", file, "--json"]);
    assert_eq!(
        again["outcomes"]["duplicate"].as_u64().unwrap()
            + again["outcomes"]["rejected"].as_u64().unwrap(),
        3000
    );
    assert_eq!(timeless(&export_of(&clean)), timeless(&clean_export));
}
