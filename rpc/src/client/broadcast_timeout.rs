//! The adaptive broadcast timeout (rpc.md §5.2): windows of 60 s, each estimating the 0.75 quantile of the
//! send durations with the P² algorithm, combined by an exponentially weighted average of their ages.

use std::collections::VecDeque;
use std::time::Duration;

/// Window length.
const WINDOW_MS: u64 = 60_000;
/// Windows kept.
const MAX_WINDOWS: usize = 5;
/// The estimated quantile.
const QUANTILE: f64 = 0.75;

/// The P² estimator of one quantile (Jain & Chlamtac): five markers, no stored samples after the first five.
#[derive(Debug, Clone)]
struct P2 {
    /// The first samples, until five arrived.
    initial: Vec<f64>,
    heights: [f64; 5],
    positions: [f64; 5],
    desired: [f64; 5],
    increments: [f64; 5],
}

impl P2 {
    fn new() -> Self {
        let p = QUANTILE;
        Self {
            initial: Vec::with_capacity(5),
            heights: [0.0; 5],
            positions: [1.0, 2.0, 3.0, 4.0, 5.0],
            desired: [1.0, 1.0 + 2.0 * p, 1.0 + 4.0 * p, 3.0 + 2.0 * p, 5.0],
            increments: [0.0, p / 2.0, p, (1.0 + p) / 2.0, 1.0],
        }
    }

    fn add(&mut self, x: f64) {
        if self.initial.len() < 5 {
            self.initial.push(x);
            if self.initial.len() == 5 {
                self.initial.sort_by(f64::total_cmp);
                self.heights.copy_from_slice(&self.initial);
            }
            return;
        }
        let h = &mut self.heights;
        let k = if x < h[0] {
            h[0] = x;
            0
        } else if x >= h[4] {
            h[4] = x;
            3
        } else {
            (0..4).find(|&i| x < h[i + 1]).unwrap_or(3)
        };
        for i in (k + 1)..5 {
            self.positions[i] += 1.0;
        }
        for i in 0..5 {
            self.desired[i] += self.increments[i];
        }
        for i in 1..4 {
            let d = self.desired[i] - self.positions[i];
            let (np, n, nn) = (
                self.positions[i - 1],
                self.positions[i],
                self.positions[i + 1],
            );
            if (d >= 1.0 && nn - n > 1.0) || (d <= -1.0 && np - n < -1.0) {
                let s = d.signum();
                let (hp, hi, hn) = (self.heights[i - 1], self.heights[i], self.heights[i + 1]);
                let parabolic = hi
                    + s / (nn - np)
                        * ((n - np + s) * (hn - hi) / (nn - n)
                            + (nn - n - s) * (hi - hp) / (n - np));
                self.heights[i] = if hp < parabolic && parabolic < hn {
                    parabolic
                } else {
                    let j = if s > 0.0 { i + 1 } else { i - 1 };
                    hi + s * (self.heights[j] - hi) / (self.positions[j] - n)
                };
                self.positions[i] += s;
            }
        }
    }

    fn estimate(&self) -> Option<f64> {
        if self.initial.len() < 5 {
            if self.initial.is_empty() {
                return None;
            }
            let mut sorted = self.initial.clone();
            sorted.sort_by(f64::total_cmp);
            let at = ((QUANTILE * sorted.len() as f64).floor() as usize).min(sorted.len() - 1);
            return Some(sorted[at]);
        }
        Some(self.heights[2])
    }
}

#[derive(Debug, Clone)]
struct Window {
    start_ms: u64,
    p2: P2,
}

/// Send durations and the timeout derived from them.
#[derive(Debug, Clone)]
pub struct BroadcastTimeout {
    min: Duration,
    upper: Duration,
    windows: VecDeque<Window>,
}

impl BroadcastTimeout {
    /// `upper = max(send_timeout, min_broadcast_timeout)`.
    pub fn new(min_broadcast_timeout: Duration, send_timeout: Duration) -> Self {
        Self {
            min: min_broadcast_timeout,
            upper: send_timeout.max(min_broadcast_timeout),
            windows: VecDeque::new(),
        }
    }

    /// Records one send of `duration` at `now_ms` (a monotonic clock in ms).
    pub fn record(&mut self, now_ms: u64, duration: Duration) {
        let open_new = self
            .windows
            .back()
            .is_none_or(|w| now_ms.saturating_sub(w.start_ms) > WINDOW_MS);
        if open_new {
            self.windows.push_back(Window {
                start_ms: now_ms,
                p2: P2::new(),
            });
            while self.windows.len() > MAX_WINDOWS {
                self.windows.pop_front();
            }
        }
        if let Some(w) = self.windows.back_mut() {
            w.p2.add(duration.as_millis() as f64);
        }
    }

    /// The timeout at `now_ms`: `upper` with no samples, else the weighted quantile clamped to [min, upper].
    pub fn timeout(&self, now_ms: u64) -> Duration {
        let mut weighted = 0.0;
        let mut weights = 0.0;
        for w in &self.windows {
            let Some(q) = w.p2.estimate() else { continue };
            let age = now_ms.saturating_sub(w.start_ms) as f64;
            let weight = (-age / WINDOW_MS as f64).exp();
            weighted += q * weight;
            weights += weight;
        }
        if weights == 0.0 {
            return self.upper;
        }
        let ewa = Duration::from_millis((weighted / weights) as u64);
        ewa.clamp(self.min, self.upper)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn item8_adaptive_timeout() {
        let t = BroadcastTimeout::new(ms(100), ms(500));
        assert_eq!(t.timeout(0), ms(500), "no samples");
        let mut t = BroadcastTimeout::new(ms(100), ms(500));
        for v in [40, 60, 80] {
            t.record(1000, ms(v));
        }
        assert_eq!(t.timeout(1000), ms(100), "clamped to the lower bound");
        let mut t = BroadcastTimeout::new(ms(100), ms(500));
        for v in [300, 320, 340] {
            t.record(1000, ms(v));
        }
        assert_eq!(t.timeout(1000), ms(340), "sorted[floor(0.75·3)]");
        let mut t = BroadcastTimeout::new(ms(700), ms(500));
        assert_eq!(t.timeout(0), ms(700), "upper = max(send, min)");
        for v in [10, 20] {
            t.record(0, ms(v));
        }
        assert_eq!(t.timeout(0), ms(700));

        // two windows 60 s apart: weights e^(−age/60)
        let mut t = BroadcastTimeout::new(ms(1), ms(10_000));
        t.record(0, ms(200));
        t.record(60_001, ms(400));
        let (w0, w1) = ((-60_001.0f64 / 60_000.0).exp(), 1.0);
        let expected = ((200.0 * w0 + 400.0 * w1) / (w0 + w1)) as u64;
        assert_eq!(t.timeout(60_001), ms(expected));
        // at most 5 windows are kept
        let mut t = BroadcastTimeout::new(ms(1), ms(10_000));
        for i in 0..7u64 {
            t.record(i * 61_000, ms(100 * (i + 1)));
        }
        assert_eq!(t.windows.len(), 5);
    }

    #[test]
    fn p2_tracks_the_quantile_of_a_long_stream() {
        let mut p = P2::new();
        for i in 0..10_000u32 {
            p.add(f64::from((i * 7919) % 1000));
        }
        let q = p.estimate().unwrap();
        assert!((700.0..800.0).contains(&q), "{q}");
    }
}
