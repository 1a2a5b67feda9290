//! `regolith ledger ...`: the receiver journal of regolith-ledger (ledger.md §5) from the command line. The
//! journal lives in `<data>/ledger` and needs nothing else of the data directory (no `regolith init`).

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use regolith_ledger::{
    Decision, Delivery, Ledger, Outcome, OutcomeKind, Stage, TransportContext, SCHEMA_VERSION,
};
use serde::Serialize;
use serde_json::json;

/// `regolith ledger` arguments.
#[derive(Args)]
pub struct LedgerArgs {
    /// Print JSON.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: LedgerCommand,
}

#[derive(Subcommand)]
enum LedgerCommand {
    /// Apply one delivery of an announcement and print the outcome and the stage that decided it.
    Apply(ApplyArgs),
    /// Replay a JSON-lines event stream (one delivery per line) and print a summary of outcomes.
    ApplyBatch {
        /// The event stream; blank lines are skipped, malformed lines are counted as rejected.
        file: PathBuf,
    },
    /// Show the current edition of every course (with floors and counts), or of one course with its history.
    Show {
        /// Only this course, with its history.
        course: Option<String>,
    },
    /// List the stored conflicts.
    Conflicts,
    /// Raise the floor of a transport context to a watermark proven closed, pruning the deliveries below it.
    RaiseFloor {
        /// The transport context.
        #[arg(
            long,
            num_args = 4,
            required = true,
            value_names = ["SOURCE_NETWORK", "SENDING_INSTANCE", "TARGET_INSTANCE", "TRANSPORT"]
        )]
        context: Vec<String>,
        /// Every sequence at or below this is closed.
        #[arg(long)]
        watermark: u64,
    },
}

/// One delivery given on the command line. Numbers and the digest are taken as text so that a bad value is
/// a `Rejected` outcome of the `decode` stage, like a bad line of `apply-batch`.
#[derive(Args)]
struct ApplyArgs {
    /// The transport context.
    #[arg(
        long,
        num_args = 4,
        required = true,
        value_names = ["SOURCE_NETWORK", "SENDING_INSTANCE", "TARGET_INSTANCE", "TRANSPORT"]
    )]
    context: Vec<String>,
    /// The transport's message id.
    #[arg(long)]
    message_id: String,
    /// The transport's sequence number of the message in its context.
    #[arg(long)]
    sequence: Option<String>,
    /// The course id.
    #[arg(long)]
    course: String,
    /// The edition (unsigned 64-bit integer).
    #[arg(long)]
    edition: String,
    /// SHA-256 of the manifest, 64 hex digits.
    #[arg(long)]
    digest: String,
    /// Announcement schema version.
    #[arg(long, default_value_t = SCHEMA_VERSION)]
    schema: u32,
}

/// Runs a ledger subcommand against `<data>/ledger`.
pub fn run(data: &Path, args: LedgerArgs) -> Result<()> {
    let dir = data.join("ledger");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let ledger =
        Ledger::open(&dir).with_context(|| format!("opening the ledger in {}", dir.display()))?;
    let json = args.json;
    match args.command {
        LedgerCommand::Apply(apply) => {
            let outcome = match apply.into_delivery() {
                Ok(delivery) => ledger.apply(&delivery)?,
                Err(reason) => Outcome::rejected(Stage::Decode, None, reason),
            };
            if json {
                print_json(&outcome)?;
            } else {
                println!("{outcome}");
            }
        }
        LedgerCommand::ApplyBatch { file } => {
            let summary = apply_batch(&ledger, &file)?;
            if json {
                print_json(&summary)?;
            } else {
                for rejected in &summary.rejected_lines {
                    println!(
                        "line {}: rejected (stage {}): {}",
                        rejected.line, rejected.stage, rejected.reason
                    );
                }
                println!(
                    "{}: {} deliveries: {}",
                    summary.file,
                    summary.deliveries,
                    summary.outcomes.describe()
                );
            }
        }
        LedgerCommand::Show {
            course: Some(course),
        } => {
            let current = ledger.current(&course)?;
            let history = ledger.history(&course)?;
            if json {
                print_json(&json!({ "course": course, "current": current, "history": history }))?;
            } else {
                match &current {
                    Some(c) => println!(
                        "{course}: edition {} digest {} (delivery {})",
                        c.edition, c.digest, c.delivery_key
                    ),
                    None => println!("{course}: no current edition"),
                }
                for entry in &history {
                    println!(
                        "  edition {} {} digest {} (delivery {})",
                        entry.edition, entry.outcome, entry.digest, entry.delivery_key
                    );
                }
            }
        }
        LedgerCommand::Show { course: None } => {
            let courses = ledger.courses()?;
            let floors = ledger.floors()?;
            let stats = ledger.stats()?;
            if json {
                print_json(&json!({ "courses": courses, "floors": floors, "stats": stats }))?;
            } else {
                if courses.is_empty() {
                    println!("no courses");
                }
                for c in &courses {
                    println!("{}: edition {} digest {}", c.course, c.edition, c.digest);
                }
                for floor in &floors {
                    println!(
                        "floor {} for context {} ({} deliveries pruned)",
                        floor.floor, floor.context, floor.pruned_total
                    );
                }
                println!(
                    "{} courses, {} deliveries recorded, {} history rows, {} conflicts",
                    stats.courses, stats.deliveries, stats.history_rows, stats.conflicts
                );
            }
        }
        LedgerCommand::Conflicts => {
            let conflicts = ledger.conflicts()?;
            if json {
                print_json(&conflicts)?;
            } else {
                if conflicts.is_empty() {
                    println!("no conflicts");
                }
                for c in &conflicts {
                    println!(
                        "{} edition {}: current digest {}, delivery {} announced {}",
                        c.course, c.edition, c.current_digest, c.delivery_key, c.delivered_digest
                    );
                }
            }
        }
        LedgerCommand::RaiseFloor { context, watermark } => {
            let context = transport_context(context)?;
            let change = ledger.raise_floor(&context, watermark)?;
            if json {
                print_json(&change)?;
            } else {
                let previous = change
                    .previous_floor
                    .map_or_else(|| "none".to_string(), |floor| floor.to_string());
                println!(
                    "floor of context {}: {} (was {}); pruned {} deliveries",
                    change.context, change.floor, previous, change.pruned
                );
            }
        }
    }
    Ok(())
}

impl ApplyArgs {
    fn into_delivery(self) -> Result<Delivery, String> {
        let context = transport_context(self.context).map_err(|e| e.to_string())?;
        let edition = parse_u64("edition", &self.edition)?;
        let sequence = self
            .sequence
            .as_deref()
            .map(|text| parse_u64("sequence", text))
            .transpose()?;
        let digest = hex::decode(&self.digest).map_err(|e| format!("digest is not hex: {e}"))?;
        Ok(Delivery {
            schema_version: self.schema,
            context,
            message_id: self.message_id,
            sequence,
            course: self.course,
            edition,
            digest,
        })
    }
}

fn parse_u64(field: &str, text: &str) -> Result<u64, String> {
    text.parse()
        .map_err(|e| format!("{field} {text:?} is not an unsigned 64-bit integer: {e}"))
}

fn transport_context(fields: Vec<String>) -> Result<TransportContext> {
    match <[String; 4]>::try_from(fields) {
        Ok([source_network, sending_instance, target_instance, transport]) => {
            Ok(TransportContext {
                source_network,
                sending_instance,
                target_instance,
                transport,
            })
        }
        Err(fields) => anyhow::bail!("--context takes 4 values, got {}", fields.len()),
    }
}

/// What `apply-batch` prints.
#[derive(Serialize)]
struct BatchSummary {
    file: String,
    /// Non-blank lines replayed.
    deliveries: u64,
    /// Outcomes per kind, every kind listed.
    outcomes: OutcomeCounts,
    /// The lines that were rejected, with why.
    rejected_lines: Vec<RejectedLine>,
}

/// A count per outcome kind.
#[derive(Serialize, Default)]
struct OutcomeCounts {
    applied: u64,
    already_current: u64,
    conflict: u64,
    stale: u64,
    duplicate: u64,
    below_floor: u64,
    rejected: u64,
}

impl OutcomeCounts {
    fn add(&mut self, kind: OutcomeKind) {
        let count = match kind {
            OutcomeKind::Applied => &mut self.applied,
            OutcomeKind::AlreadyCurrent => &mut self.already_current,
            OutcomeKind::Conflict => &mut self.conflict,
            OutcomeKind::Stale => &mut self.stale,
            OutcomeKind::Duplicate => &mut self.duplicate,
            OutcomeKind::BelowFloor => &mut self.below_floor,
            OutcomeKind::Rejected => &mut self.rejected,
        };
        *count += 1;
    }

    fn describe(&self) -> String {
        format!(
            "applied {}, already_current {}, conflict {}, stale {}, duplicate {}, below_floor {}, rejected {}",
            self.applied,
            self.already_current,
            self.conflict,
            self.stale,
            self.duplicate,
            self.below_floor,
            self.rejected
        )
    }
}

#[derive(Serialize)]
struct RejectedLine {
    line: u64,
    stage: Stage,
    reason: String,
}

fn apply_batch(ledger: &Ledger, file: &Path) -> Result<BatchSummary> {
    let reader =
        BufReader::new(File::open(file).with_context(|| format!("opening {}", file.display()))?);
    let mut summary = BatchSummary {
        file: file.display().to_string(),
        deliveries: 0,
        outcomes: OutcomeCounts::default(),
        rejected_lines: Vec::new(),
    };
    for (index, line) in reader.split(b'\n').enumerate() {
        let line_number = index as u64 + 1;
        let line =
            line.with_context(|| format!("reading line {line_number} of {}", file.display()))?;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let outcome = ledger
            .apply_json_line(&line)
            .with_context(|| format!("applying line {line_number} of {}", file.display()))?;
        summary.deliveries += 1;
        summary.outcomes.add(outcome.kind());
        if let Decision::Rejected { reason } = outcome.decision() {
            summary.rejected_lines.push(RejectedLine {
                line: line_number,
                stage: outcome.stage(),
                reason: reason.clone(),
            });
        }
    }
    Ok(summary)
}

fn print_json(value: &impl Serialize) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}
