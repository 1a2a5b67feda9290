//! The request history of one operation (rpc.md §8.4): an LRU map of peer → fine. An unhelpful answer sets the
//! fine to 1 or doubles it up to 16; a useful one halves it; a fine of 0 is removed. The fine lowers the
//! peer's weight when that operation picks a neighbour.

use std::num::NonZeroUsize;

use lru::LruCache;
use parking_lot::Mutex;
use tycho_network::PeerId;

const MAX_FINE: u8 = 16;

/// One operation's history; a history without capacity records nothing.
pub struct RequestHistory {
    fines: Option<Mutex<LruCache<PeerId, u8>>>,
}

impl std::fmt::Debug for RequestHistory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestHistory")
            .field("enabled", &self.fines.is_some())
            .finish()
    }
}

impl RequestHistory {
    /// A history of `capacity` peers; `None` (or 0) disables it.
    pub fn new(capacity: Option<usize>) -> Self {
        Self {
            fines: capacity
                .and_then(NonZeroUsize::new)
                .map(|c| Mutex::new(LruCache::new(c))),
        }
    }

    /// The peer's current fine.
    pub fn fine(&self, peer: &PeerId) -> u8 {
        self.fines
            .as_ref()
            .and_then(|f| f.lock().peek(peer).copied())
            .unwrap_or(0)
    }

    /// An answer that was not accepted.
    pub fn unhelpful(&self, peer: &PeerId) {
        if let Some(fines) = &self.fines {
            let mut fines = fines.lock();
            let fine = fines.get(peer).copied().unwrap_or(0);
            let next = if fine == 0 {
                1
            } else {
                fine.saturating_mul(2).min(MAX_FINE)
            };
            fines.put(*peer, next);
        }
    }

    /// An accepted answer.
    pub fn useful(&self, peer: &PeerId) {
        if let Some(fines) = &self.fines {
            let mut fines = fines.lock();
            if let Some(fine) = fines.get_mut(peer) {
                *fine /= 2;
                if *fine == 0 {
                    fines.pop(peer);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fines_follow_8_4() {
        let h = RequestHistory::new(Some(2));
        let (a, b, c) = (PeerId([1; 32]), PeerId([2; 32]), PeerId([3; 32]));
        h.unhelpful(&a);
        assert_eq!(h.fine(&a), 1);
        for expected in [2, 4, 8, 16, 16] {
            h.unhelpful(&a);
            assert_eq!(h.fine(&a), expected);
        }
        h.useful(&a);
        assert_eq!(h.fine(&a), 8);
        h.unhelpful(&b);
        h.unhelpful(&c);
        assert_eq!(h.fine(&a), 0, "evicted: capacity 2");
        h.useful(&b);
        assert_eq!(h.fine(&b), 0, "1 / 2 = 0 is removed");
        let off = RequestHistory::new(None);
        off.unhelpful(&a);
        assert_eq!(off.fine(&a), 0);
    }
}
