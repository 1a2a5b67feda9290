//! One neighbour of the overlay client: its score, failure history and RTT (rpc.md §8.2), and its selection
//! score (§8.3).

use std::time::Duration;

use std::sync::Arc;

use parking_lot::Mutex;
use tycho_network::PeerId;

use super::peer_book::PeerBook;

/// Score range top.
pub const MAX_SCORE: u8 = 128;
/// Initial score.
pub const INITIAL_SCORE: u8 = 64;
/// A neighbour with at least this score is reliable.
pub const RELIABLE_SCORE: u8 = 16;
/// Score change of an accepted or rejected answer.
const STEP: u8 = 8;
/// RTT samples averaged.
const RTT_SAMPLES: usize = 4;

/// How an answer is scored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// +8, a success in the failure history.
    Accept,
    /// −8, a failure.
    Reject,
    /// No score change, no history shift; RTT and total are recorded.
    Ignore,
}

/// A punishment (§8.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Punishment {
    /// −4 (unused by the client).
    Dumb,
    /// −8.
    Slow,
    /// −128.
    Malicious,
}

impl Punishment {
    fn amount(self) -> u8 {
        match self {
            Self::Dumb => 4,
            Self::Slow => 8,
            Self::Malicious => 128,
        }
    }
}

#[derive(Debug, Clone)]
struct Stats {
    score: u8,
    total: u64,
    failed: u64,
    /// Bit 0 = the latest outcome; 1 = failure.
    failure_history: u8,
    /// Tracked outcomes shifted into the history (saturating at 8).
    history_len: u8,
    rtt: [u16; RTT_SAMPLES],
    rtt_len: usize,
    rtt_next: usize,
    /// Punished as malicious at least once (it sent bad data, rather than failed to answer).
    malicious: bool,
}

/// A neighbour. Shared by the set, the index and in-flight query handles.
#[derive(Debug)]
pub struct Neighbour {
    peer_id: PeerId,
    expires_at: u32,
    stats: Mutex<Stats>,
    /// Where a punishment as malicious becomes a ban.
    book: Option<Arc<PeerBook>>,
}

fn millis(rtt: Duration) -> u16 {
    u16::try_from(rtt.as_millis()).unwrap_or(u16::MAX)
}

impl Neighbour {
    /// A neighbour with the initial score and `default_roundtrip` as its RTT.
    pub fn new(peer_id: PeerId, expires_at: u32, default_roundtrip: Duration) -> Self {
        Self {
            peer_id,
            expires_at,
            stats: Mutex::new(Stats {
                score: INITIAL_SCORE,
                total: 0,
                failed: 0,
                failure_history: 0,
                history_len: 0,
                rtt: [millis(default_roundtrip), 0, 0, 0],
                rtt_len: 1,
                rtt_next: 1,
                malicious: false,
            }),
            book: None,
        }
    }

    /// The same neighbour, banned in `book` when it is first punished as malicious.
    pub fn with_book(mut self, book: Arc<PeerBook>) -> Self {
        self.book = Some(book);
        self
    }

    /// The peer id.
    pub fn peer_id(&self) -> &PeerId {
        &self.peer_id
    }

    /// When the overlay entry this neighbour came from expires (Unix seconds).
    pub fn expires_at(&self) -> u32 {
        self.expires_at
    }

    /// The score, 0..=128.
    pub fn score(&self) -> u8 {
        self.stats.lock().score
    }

    /// Whether the score is at least 16.
    pub fn is_reliable(&self) -> bool {
        self.score() >= RELIABLE_SCORE
    }

    /// Tracked outcomes and failures.
    pub fn totals(&self) -> (u64, u64) {
        let s = self.stats.lock();
        (s.total, s.failed)
    }

    /// Mean of the last 4 RTT samples.
    pub fn rtt(&self) -> Duration {
        let s = self.stats.lock();
        Duration::from_millis(mean_rtt(&s))
    }

    /// Records an answer: its outcome and its RTT.
    pub fn track(&self, outcome: Outcome, rtt: Duration) {
        let mut s = self.stats.lock();
        s.total += 1;
        let slot = s.rtt_next;
        s.rtt[slot] = millis(rtt);
        s.rtt_next = (slot + 1) % RTT_SAMPLES;
        s.rtt_len = (s.rtt_len + 1).min(RTT_SAMPLES);
        match outcome {
            Outcome::Accept => {
                s.score = s.score.saturating_add(STEP).min(MAX_SCORE);
                s.failure_history <<= 1;
                s.history_len = s.history_len.saturating_add(1).min(8);
            }
            Outcome::Reject => {
                s.score = s.score.saturating_sub(STEP);
                s.failed += 1;
                s.failure_history = (s.failure_history << 1) | 1;
                s.history_len = s.history_len.saturating_add(1).min(8);
            }
            Outcome::Ignore => {}
        }
    }

    /// Lowers the score; the first punishment as malicious also bans the peer in the book at once, so the
    /// ban holds even if the process stops before the next tick.
    pub fn punish(&self, punishment: Punishment) {
        let first_offence = {
            let mut s = self.stats.lock();
            s.score = s.score.saturating_sub(punishment.amount());
            let first = punishment == Punishment::Malicious && !s.malicious;
            s.malicious |= punishment == Punishment::Malicious;
            first
        };
        if first_offence {
            if let Some(book) = &self.book {
                book.ban(&self.peer_id, crate::network::now_sec());
            }
        }
    }

    /// Whether it was ever punished as malicious.
    pub fn was_malicious(&self) -> bool {
        self.stats.lock().malicious
    }

    /// The selection score (§8.3): −16 after 4 failures in a row; a bonus for a top score with a low RTT.
    pub fn selection_score(&self) -> u8 {
        let s = self.stats.lock();
        if s.history_len >= 4 && s.failure_history & 0b1111 == 0b1111 {
            return s.score.saturating_sub(16);
        }
        let avg = mean_rtt(&s);
        if s.score >= 120 && avg <= 160 {
            let bonus = ((160 - avg) * 16 / 160).max(1) as u8;
            return s.score.saturating_add(bonus);
        }
        s.score
    }
}

fn mean_rtt(s: &Stats) -> u64 {
    let n = s.rtt_len.max(1);
    let sum: u64 = s.rtt[..n].iter().map(|&v| u64::from(v)).sum();
    sum / n as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn neighbour() -> Neighbour {
        Neighbour::new(PeerId([1; 32]), 100, Duration::from_millis(300))
    }

    #[test]
    fn scores_follow_8_2() {
        let n = neighbour();
        assert_eq!(n.score(), 64);
        n.track(Outcome::Accept, Duration::from_millis(10));
        assert_eq!(n.score(), 72);
        n.track(Outcome::Reject, Duration::from_millis(10));
        assert_eq!(n.score(), 64);
        n.track(Outcome::Ignore, Duration::from_millis(10));
        assert_eq!(n.score(), 64);
        assert_eq!(n.totals(), (3, 1));
        for _ in 0..20 {
            n.track(Outcome::Accept, Duration::from_millis(10));
        }
        assert_eq!(n.score(), 128, "capped");
        n.punish(Punishment::Slow);
        assert_eq!(n.score(), 120);
        n.punish(Punishment::Dumb);
        assert_eq!(n.score(), 116);
        n.punish(Punishment::Malicious);
        assert_eq!(n.score(), 0, "saturating");
        assert!(!n.is_reliable());
    }

    #[test]
    fn rtt_is_the_mean_of_the_last_4_samples() {
        let n = neighbour();
        assert_eq!(n.rtt(), Duration::from_millis(300));
        n.track(Outcome::Ignore, Duration::from_millis(100));
        assert_eq!(n.rtt(), Duration::from_millis(200));
        for ms in [10, 20, 30, 40] {
            n.track(Outcome::Ignore, Duration::from_millis(ms));
        }
        assert_eq!(n.rtt(), Duration::from_millis(25));
        n.track(Outcome::Ignore, Duration::from_secs(100));
        assert_eq!(n.rtt(), Duration::from_millis((20 + 30 + 40 + 65_535) / 4));
    }

    #[test]
    fn selection_score_follows_8_3() {
        let n = neighbour();
        for _ in 0..4 {
            n.track(Outcome::Reject, Duration::from_millis(10));
        }
        assert_eq!(n.score(), 32);
        assert_eq!(n.selection_score(), 16, "4 failures in a row");
        n.track(Outcome::Accept, Duration::from_millis(10));
        assert_eq!(n.selection_score(), 40);
        for _ in 0..20 {
            n.track(Outcome::Accept, Duration::from_millis(0));
        }
        // score 128, mean RTT 0 → +16
        assert_eq!(n.selection_score(), 144);
        for _ in 0..4 {
            n.track(Outcome::Accept, Duration::from_millis(159));
        }
        assert_eq!(n.selection_score(), 129, "the bonus is at least 1");
        for _ in 0..4 {
            n.track(Outcome::Accept, Duration::from_millis(200));
        }
        assert_eq!(n.selection_score(), 128, "no bonus above 160 ms");
    }
}
