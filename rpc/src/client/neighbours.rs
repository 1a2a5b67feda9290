//! The neighbour set and its selection index (rpc.md §8.1–§8.3): which neighbours are kept, how the update
//! and apply ticks change the set, and how `choose` / `choose_multiple` draw from it.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use rand::seq::SliceRandom;
use rand::Rng;
use tycho_network::PeerId;

use super::history::RequestHistory;
use super::neighbour::{Neighbour, RELIABLE_SCORE};
use super::peer_book::PeerBook;

/// Whether `choose_multiple` keeps only reliable neighbours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NeighbourType {
    /// Score ≥ 16.
    Reliable,
    /// Any indexed neighbour.
    All,
}

/// A candidate from the overlay: a peer with a resolved address and the expiry of its entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    /// The peer.
    pub peer_id: PeerId,
    /// `entry.created_at + entry_ttl`.
    pub expires_at: u32,
}

#[derive(Default)]
struct Inner {
    set: Vec<Arc<Neighbour>>,
    /// Peers dropped for failures (not for bad data: those are banned in the book), with the time (Unix
    /// seconds).
    dropped: std::collections::HashMap<PeerId, u32>,
    /// Neighbours whose selection score is ≥ 16, with that score.
    index: Vec<(Arc<Neighbour>, u8)>,
}

/// The neighbour set with its index.
pub struct Neighbours {
    keep: usize,
    default_roundtrip: Duration,
    /// A neighbour dropped for failures is not taken back for this long (the update interval).
    readmit_after: u32,
    /// Bans of neighbours that sent bad data.
    book: Arc<PeerBook>,
    inner: RwLock<Inner>,
    changed: tokio::sync::Notify,
}

impl Neighbours {
    /// An empty set keeping `keep` neighbours; one dropped for failures comes back no sooner than
    /// `readmit_after`, one that sent bad data is banned in `book` and stays out while the ban lasts.
    pub fn new(
        keep: usize,
        default_roundtrip: Duration,
        readmit_after: Duration,
        book: Arc<PeerBook>,
    ) -> Self {
        Self {
            keep: keep.max(1),
            default_roundtrip,
            readmit_after: u32::try_from(readmit_after.as_secs()).unwrap_or(u32::MAX),
            book,
            inner: RwLock::new(Inner::default()),
            changed: tokio::sync::Notify::new(),
        }
    }

    /// The neighbours kept.
    pub fn keep(&self) -> usize {
        self.keep
    }

    /// A snapshot of the set.
    pub fn get(&self) -> Vec<Arc<Neighbour>> {
        self.inner.read().set.clone()
    }

    /// The neighbour of a peer, if in the set.
    pub fn find(&self, peer: &PeerId) -> Option<Arc<Neighbour>> {
        self.inner
            .read()
            .set
            .iter()
            .find(|n| n.peer_id() == peer)
            .cloned()
    }

    /// Number of neighbours.
    pub fn len(&self) -> usize {
        self.inner.read().set.len()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the set has neighbours but none that a query could pick: none in the selection index (each
    /// failed its last 4 queries, §8.3, as after a partition), or none of those still reliable. No query goes
    /// to them, so only a ping can bring one back.
    pub fn is_stranded(&self) -> bool {
        let inner = self.inner.read();
        !inner.set.is_empty() && inner.index.iter().all(|(n, _)| !n.is_reliable())
    }

    /// Resolves once the set holds at least `n` neighbours.
    pub async fn wait_for(&self, n: usize) {
        loop {
            let notified = self.changed.notified();
            if self.len() >= n {
                return;
            }
            notified.await;
        }
    }

    /// The book of bans.
    pub fn book(&self) -> &Arc<PeerBook> {
        &self.book
    }

    /// The initial set: up to `keep` random candidates that are not banned at `now`.
    pub fn init(&self, mut candidates: Vec<Candidate>, now: u32) {
        candidates.retain(|c| self.book.banned(&c.peer_id, now).is_none());
        candidates.shuffle(&mut rand::thread_rng());
        let mut inner = self.inner.write();
        inner.set = candidates
            .into_iter()
            .take(self.keep)
            .map(|c| self.make(c))
            .collect();
        rebuild(&mut inner);
        drop(inner);
        self.changed.notify_waiters();
    }

    fn make(&self, c: Candidate) -> Arc<Neighbour> {
        Arc::new(
            Neighbour::new(c.peer_id, c.expires_at, self.default_roundtrip)
                .with_book(self.book.clone()),
        )
    }

    /// One update tick (§8.1 item 2): `candidates` were drawn by the caller (`keep + (keep − active)` random
    /// ones). Drops unreliable or expired neighbours, churns the lowest-scored one if the set is still full,
    /// then appends new candidates up to `keep`: none banned, none dropped within `readmit_after` unless
    /// that would leave the set empty.
    pub fn update(&self, mut candidates: Vec<Candidate>, now: u32) {
        candidates.retain(|c| self.book.banned(&c.peer_id, now).is_none());
        let mut inner = self.inner.write();
        let before: Vec<PeerId> = inner.set.iter().map(|n| *n.peer_id()).collect();
        self.retain_usable(&mut inner, now);
        let readmit_after = self.readmit_after;
        inner
            .dropped
            .retain(|_, at| now < at.saturating_add(readmit_after));
        if inner.set.len() >= self.keep {
            if let Some((worst, _)) = inner.set.iter().enumerate().min_by_key(|(_, n)| n.score()) {
                inner.set.remove(worst);
            }
        }
        for c in &candidates {
            if inner.set.len() >= self.keep {
                break;
            }
            if before.contains(&c.peer_id) || inner.dropped.contains_key(&c.peer_id) {
                continue;
            }
            let n = self.make(*c);
            inner.set.push(n);
        }
        // Every candidate that is not banned was dropped lately for failures (a partition times every query
        // out): rather than stay without a neighbour for `readmit_after`, and sync from nobody long after
        // the network is back, take them back with fresh scores. Those that still fail are dropped again.
        if inner.set.is_empty() {
            for c in candidates {
                if inner.set.len() >= self.keep {
                    break;
                }
                if before.contains(&c.peer_id) {
                    continue;
                }
                inner.dropped.remove(&c.peer_id);
                let n = self.make(c);
                inner.set.push(n);
            }
        }
        rebuild(&mut inner);
        drop(inner);
        self.changed.notify_waiters();
    }

    /// One apply tick (§8.1 item 3): drops unreliable or expired neighbours and rebuilds the index.
    pub fn apply(&self, now: u32) {
        let mut inner = self.inner.write();
        self.retain_usable(&mut inner, now);
        rebuild(&mut inner);
        drop(inner);
        self.changed.notify_waiters();
    }

    /// Drops unreliable and expired neighbours: one that sent bad data (banned in the book when it was
    /// punished), and one that only failed, remembered for `readmit_after`.
    fn retain_usable(&self, inner: &mut Inner, now: u32) {
        let Inner { set, dropped, .. } = inner;
        set.retain(|n| {
            if n.was_malicious() {
                return false;
            }
            if !n.is_reliable() {
                dropped.insert(*n.peer_id(), now);
                return false;
            }
            n.expires_at() > now
        });
    }

    /// Draws one indexed neighbour with probability proportional to its effective weight.
    pub fn choose(&self, history: Option<&RequestHistory>) -> Option<Arc<Neighbour>> {
        self.choose_excluding(history, &[])
    }

    /// As [`Self::choose`], skipping `excluded` peers.
    pub fn choose_excluding(
        &self,
        history: Option<&RequestHistory>,
        excluded: &[PeerId],
    ) -> Option<Arc<Neighbour>> {
        let inner = self.inner.read();
        let weighted: Vec<(&Arc<Neighbour>, u32)> = inner
            .index
            .iter()
            // One that sent bad data is out at once, not at the next tick.
            .filter(|(n, _)| !excluded.contains(n.peer_id()) && !n.was_malicious())
            .map(|(n, score)| (n, effective_weight(n, *score, history)))
            .collect();
        let total: u32 = weighted.iter().map(|(_, w)| *w).sum();
        if total == 0 {
            return None;
        }
        let mut pick = rand::thread_rng().gen_range(0..total);
        for (n, w) in weighted {
            if pick < w {
                return Some(n.clone());
            }
            pick -= w;
        }
        None
    }

    /// Samples up to `n` indexed neighbours by weight without replacement (key `u^(1/w)`, top n), then keeps
    /// only reliable ones when asked: it may return fewer than `n`.
    pub fn choose_multiple(
        &self,
        n: usize,
        kind: NeighbourType,
        history: Option<&RequestHistory>,
    ) -> Vec<Arc<Neighbour>> {
        let inner = self.inner.read();
        let mut rng = rand::thread_rng();
        let mut keyed: Vec<(f64, &Arc<Neighbour>)> = inner
            .index
            .iter()
            .filter(|(nb, _)| !nb.was_malicious())
            .map(|(nb, score)| {
                let w = f64::from(effective_weight(nb, *score, history));
                let u: f64 = rng.gen_range(f64::MIN_POSITIVE..1.0);
                (u.powf(1.0 / w), nb)
            })
            .collect();
        keyed.sort_by(|a, b| b.0.total_cmp(&a.0));
        keyed
            .into_iter()
            .take(n)
            .map(|(_, nb)| nb.clone())
            .filter(|nb| kind == NeighbourType::All || nb.is_reliable())
            .collect()
    }
}

fn effective_weight(n: &Neighbour, selection_score: u8, history: Option<&RequestHistory>) -> u32 {
    let fine = history.map_or(0, |h| h.fine(n.peer_id()));
    u32::from(selection_score.saturating_sub(fine)).max(1)
}

fn rebuild(inner: &mut Inner) {
    inner.index = inner
        .set
        .iter()
        .filter_map(|n| {
            let score = n.selection_score();
            (score >= RELIABLE_SCORE).then(|| (n.clone(), score))
        })
        .collect();
}

#[cfg(test)]
mod tests {
    use super::super::neighbour::{Outcome, Punishment};
    use super::*;

    fn book() -> Arc<PeerBook> {
        Arc::new(PeerBook::in_memory(&crate::config::NeighborsConfig {
            ban_duration: Duration::from_secs(600),
            max_ban_duration: Duration::from_secs(3600),
            ..Default::default()
        }))
    }

    fn candidate(i: u8) -> Candidate {
        Candidate {
            peer_id: PeerId([i; 32]),
            expires_at: 1000,
        }
    }

    #[test]
    fn a_set_whose_neighbours_all_failed_lately_is_stranded_until_one_answers() {
        let set = Neighbours::new(3, Duration::from_millis(300), Duration::ZERO, book());
        set.init(vec![candidate(1)], 0);
        assert!(!set.is_stranded(), "a fresh neighbour is selectable");
        let n = set.get()[0].clone();
        // five failures: still reliable (64 − 40 = 24), but out of the index (§8.3: 24 − 16 < 16)
        for _ in 0..5 {
            n.track(Outcome::Reject, Duration::from_millis(10));
        }
        set.apply(10);
        assert_eq!(set.len(), 1, "a reliable neighbour stays in the set");
        assert!(set.choose(None).is_none(), "and is not selectable");
        assert!(set.is_stranded());
        // one answer (a ping) makes it selectable again
        n.track(Outcome::Accept, Duration::from_millis(10));
        set.apply(10);
        assert!(!set.is_stranded());
        assert!(set.choose(None).is_some_and(|c| Arc::ptr_eq(&c, &n)));
        // an empty set is not stranded: there is nobody to ping
        set.apply(1000);
        assert!(set.is_empty() && !set.is_stranded());
    }

    #[test]
    fn update_drops_bad_neighbours_churns_one_and_refills() {
        let set = Neighbours::new(3, Duration::from_millis(300), Duration::ZERO, book());
        set.init((1..=5).map(candidate).collect(), 0);
        assert_eq!(set.len(), 3);
        let first = set.get();
        let peers =
            |set: &Neighbours| -> Vec<PeerId> { set.get().iter().map(|n| *n.peer_id()).collect() };
        // an unreliable neighbour leaves and is not taken back in the same tick
        first[0].punish(Punishment::Malicious);
        set.update((1..=9).map(candidate).collect(), 10);
        let now = peers(&set);
        assert_eq!(now.len(), 3);
        assert!(!now.contains(first[0].peer_id()));
        // a full set of reliable neighbours churns its lowest-scored one and refills with a new peer
        let kept = set.get();
        kept[0].track(Outcome::Accept, Duration::ZERO);
        kept[1].track(Outcome::Accept, Duration::ZERO);
        let worst = *kept[2].peer_id();
        set.update((1..=9).map(candidate).collect(), 10);
        let after = peers(&set);
        assert_eq!(after.len(), 3);
        assert!(!after.contains(&worst), "the lowest score was churned");
        assert!(after.contains(kept[0].peer_id()) && after.contains(kept[1].peer_id()));
        // unreliable neighbours leave at apply, expired ones too
        set.get()[0].punish(Punishment::Malicious);
        set.apply(10);
        assert_eq!(set.len(), 2);
        set.apply(1000);
        assert!(set.is_empty());
    }

    #[test]
    fn a_set_whose_every_candidate_timed_out_takes_them_back_rather_than_stay_empty() {
        // Two peers, both dropped for timeouts during a partition (a timeout: −8 and Slow −8); bans last 120 s.
        let set = Neighbours::new(
            5,
            Duration::from_millis(300),
            Duration::from_secs(120),
            book(),
        );
        set.init(vec![candidate(1), candidate(2)], 0);
        for n in set.get() {
            while n.is_reliable() {
                n.track(Outcome::Reject, Duration::from_secs(1));
                n.punish(Punishment::Slow);
            }
        }
        set.apply(10);
        assert!(set.is_empty());
        // The partition heals a second later: both come back at the next tick, with fresh scores.
        set.update(vec![candidate(1), candidate(2)], 11);
        assert_eq!(set.len(), 2);
        assert!(set.get().iter().all(|n| n.is_reliable()));
        assert_eq!(
            set.choose_multiple(10, NeighbourType::Reliable, None).len(),
            2
        );
        // With another candidate at hand, a dropped peer waits out its ban.
        let gone = *set.get()[0].peer_id();
        while set.get()[0].is_reliable() {
            set.get()[0].punish(Punishment::Slow);
        }
        set.apply(12);
        assert_eq!(set.len(), 1);
        set.update(vec![candidate(1), candidate(2), candidate(3)], 13);
        let now: Vec<PeerId> = set.get().iter().map(|n| *n.peer_id()).collect();
        assert_eq!(now.len(), 2, "{now:?}");
        assert!(
            !now.contains(&gone),
            "a banned peer stays out while others exist"
        );
        // When the others are dropped for bad data, the set empties: the one that only timed out comes back,
        // those that sent bad data stay out.
        for n in set.get() {
            n.punish(Punishment::Malicious);
        }
        set.apply(14);
        assert!(set.is_empty());
        set.update(vec![candidate(1), candidate(2), candidate(3)], 15);
        let now: Vec<PeerId> = set.get().iter().map(|n| *n.peer_id()).collect();
        assert_eq!(
            now,
            vec![gone],
            "only the peer that timed out is taken back early"
        );
    }

    #[test]
    fn choose_follows_weights_and_history() {
        let set = Neighbours::new(2, Duration::from_millis(300), Duration::ZERO, book());
        set.init(vec![candidate(1), candidate(2)], 0);
        let history = RequestHistory::new(Some(10));
        let bad = PeerId([1; 32]);
        for _ in 0..5 {
            history.unhelpful(&bad); // fine 16: weight 64 − 16 = 48 vs 64
        }
        let mut counts = [0u32; 2];
        for _ in 0..4000 {
            let n = set.choose(Some(&history)).unwrap();
            counts[usize::from(n.peer_id().0[0] - 1)] += 1;
        }
        assert!(counts[1] > counts[0], "{counts:?}");
        let excluded = set.choose_excluding(None, &[PeerId([2; 32])]).unwrap();
        assert_eq!(excluded.peer_id(), &bad);
        assert!(set
            .choose_excluding(None, &[PeerId([1; 32]), PeerId([2; 32])])
            .is_none());

        let all = set.choose_multiple(10, NeighbourType::Reliable, None);
        assert_eq!(all.len(), 2);
        set.get()[0].punish(Punishment::Malicious);
        assert_eq!(
            set.choose_multiple(10, NeighbourType::Reliable, None).len(),
            1,
            "unreliable neighbours are dropped from the sample"
        );
    }

    #[test]
    fn a_neighbour_that_sent_bad_data_stays_out_for_its_ban_across_refreshes_and_a_new_set() {
        // Bans are taken at the real time of the punishment; the ticks run at that time too.
        let t0 = crate::network::now_sec();
        let book = book();
        let set = Neighbours::new(2, Duration::from_millis(300), Duration::ZERO, book.clone());
        let forever = |i: u8| Candidate {
            peer_id: PeerId([i; 32]),
            expires_at: u32::MAX,
        };
        set.init(vec![forever(1), forever(2)], t0);
        let liar = set.get()[0].clone();
        let liar_candidate = forever(liar.peer_id().0[0]);
        liar.punish(Punishment::Malicious);
        let ban = book.banned(liar.peer_id(), t0).expect("banned at once");
        assert!(ban.until >= t0 + 600 && ban.offences == 1, "{ban:?}");
        assert!(
            (0..200).all(|_| set.choose(None).is_none_or(|n| !Arc::ptr_eq(&n, &liar))),
            "a liar is not chosen even before the next tick"
        );
        // Refreshes that take failed peers back at once: the liar is not taken back while banned, even when
        // the set would otherwise be empty.
        for dt in [1, 300, 590] {
            set.apply(t0 + dt);
            set.update(vec![liar_candidate], t0 + dt);
            assert!(set.find(liar.peer_id()).is_none(), "still banned at +{dt}");
        }
        // A new set over the same book (a restarted overlay client) skips it too.
        let again = Neighbours::new(2, Duration::from_millis(300), Duration::ZERO, book.clone());
        again.init(vec![liar_candidate], t0 + 10);
        assert!(again.is_empty());
        // After the ban it comes back; a second offence bans it twice as long.
        again.update(vec![liar_candidate], ban.until);
        assert_eq!(again.len(), 1);
        again.get()[0].punish(Punishment::Malicious);
        let second = book.banned(liar.peer_id(), ban.until).unwrap();
        assert_eq!(second.offences, 2);
        assert!(second.until >= t0 + 1200, "{second:?}");
        // Punishing it again before it is dropped is still one offence.
        again.get()[0].punish(Punishment::Malicious);
        assert_eq!(book.banned(liar.peer_id(), ban.until).unwrap().offences, 2);
    }
}
