//! Progress of long operations: a bar on a terminal, periodic log lines otherwise.

use std::io::IsTerminal;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

const LOG_INTERVAL: Duration = Duration::from_secs(5);

struct State {
    bar: Option<ProgressBar>,
    name: String,
    total: u64,
    done: u64,
    bytes: u64,
    started: Instant,
    last_log: Instant,
}

/// Progress reporter for block imports (blocks and MB/s).
pub struct Progress {
    terminal: bool,
    state: Mutex<Option<State>>,
}

impl Progress {
    /// A bar when stderr is a terminal (and `quiet` is off), log lines otherwise.
    pub fn new(quiet: bool) -> Self {
        Self {
            terminal: !quiet && std::io::stderr().is_terminal(),
            state: Mutex::new(None),
        }
    }

    /// Starts a new operation of `total` blocks.
    pub fn start(&self, path: &Path, total: u64) {
        let name = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        let bar = self.terminal.then(|| {
            let bar = ProgressBar::new(total);
            bar.set_style(
                ProgressStyle::with_template(
                    "{prefix} [{bar:40}] {pos}/{len} blocks {msg} ({elapsed})",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            bar.set_prefix(name.clone());
            bar
        });
        let now = Instant::now();
        *self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(State {
            bar,
            name,
            total,
            done: 0,
            bytes: 0,
            started: now,
            last_log: now,
        });
    }

    /// Records `blocks` more blocks and `bytes` more bytes.
    pub fn advance(&self, blocks: u64, bytes: u64) {
        let mut guard = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(s) = guard.as_mut() else { return };
        s.done += blocks;
        s.bytes += bytes;
        let rate = s.bytes as f64 / 1e6 / s.started.elapsed().as_secs_f64().max(1e-9);
        match &s.bar {
            Some(bar) => {
                bar.set_position(s.done);
                bar.set_message(format!("{rate:.1} MB/s"));
            }
            None if s.last_log.elapsed() >= LOG_INTERVAL => {
                s.last_log = Instant::now();
                tracing::info!(archive = %s.name, done = s.done, total = s.total, mb_per_s = rate, "importing");
            }
            None => {}
        }
    }

    /// Ends the current operation.
    pub fn finish(&self) {
        if let Some(s) = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
        {
            if let Some(bar) = s.bar {
                bar.finish();
            }
        }
    }
}

/// Download progress in bytes: a bar on a terminal; otherwise a log line with the rate and the ETA every 5 s
/// and at the end.
pub struct ByteProgress {
    bar: Option<ProgressBar>,
    label: String,
    total: u64,
    started: Instant,
    last_log: parking_lot::Mutex<Instant>,
}

impl ByteProgress {
    /// A download of `total` bytes named `label`.
    pub fn new(label: &str, total: u64) -> std::sync::Arc<Self> {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(total);
            bar.set_style(
                ProgressStyle::with_template(
                    "{prefix} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} ({eta})",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            bar.set_prefix(label.to_owned());
            bar
        });
        let now = Instant::now();
        std::sync::Arc::new(Self {
            bar,
            label: label.to_owned(),
            total,
            started: now,
            last_log: parking_lot::Mutex::new(now),
        })
    }

    /// `done` bytes of the total are in.
    pub fn set(&self, done: u64) {
        if let Some(bar) = &self.bar {
            bar.set_position(done);
            if done >= self.total {
                bar.finish_and_clear();
            }
            return;
        }
        let mut last = self.last_log.lock();
        if last.elapsed() >= Duration::from_secs(5) || done >= self.total {
            *last = Instant::now();
            let rate = done as f64 / self.started.elapsed().as_secs_f64().max(1e-6);
            let eta_s = if rate > 0.0 {
                self.total.saturating_sub(done) as f64 / rate
            } else {
                f64::INFINITY
            };
            tracing::info!(
                what = %self.label,
                done,
                total = self.total,
                mib_per_s = rate / 1048576.0,
                eta_s,
                "downloading"
            );
        }
    }
}
