//! Archive grouping (storage.md §8.1): which archive a block goes into, which archive opens, and when.

use std::collections::BTreeSet;

/// Most mc seqnos one archive spans (the network's constant; tests may lower it with
/// `storage.archives.mc_blocks_per_archive`).
pub const MAX_MC_BLOCKS_PER_ARCHIVE: u32 = 100;

/// The grouping state: known archive ids and the pending override.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grouping {
    /// Every known archive id (committed or being built).
    pub ids: BTreeSet<u32>,
    /// The id the next archive must start at (after a key block).
    pub override_next: Option<u32>,
    /// Most mc seqnos one archive spans.
    pub span: u32,
}

impl Default for Grouping {
    fn default() -> Self {
        Self::new(MAX_MC_BLOCKS_PER_ARCHIVE)
    }
}

/// What one `move_into_archive` call decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Assignment {
    /// The archive the block goes into.
    pub target: u32,
    /// Whether `target` was opened by this call.
    pub opened: bool,
    /// The archive scheduled for commit because `target` opened.
    pub commit_prev: Option<u32>,
    /// The override set by this call (force).
    pub override_set: Option<u32>,
}

impl Grouping {
    /// An empty grouping whose archives span at most `span` mc seqnos (at least 1).
    pub fn new(span: u32) -> Self {
        Self {
            ids: BTreeSet::new(),
            override_next: None,
            span: span.max(1),
        }
    }

    /// Assigns a block referenced by mc seqno `s`; `force` = the block or its mc block is a key block.
    pub fn assign(&mut self, s: u32, force: bool) -> Assignment {
        let prev = self.ids.range(..=s).next_back().copied();
        let mut open = false;
        match self.override_next {
            Some(n) if s == n => {
                open = true;
                self.override_next = None;
            }
            Some(n) if s > n => self.override_next = None,
            _ => {}
        }
        if !open {
            open = match prev {
                None => true,
                Some(p) => s - p >= self.span,
            };
        }
        let (target, opened, commit_prev) = if open {
            let new = self.ids.insert(s);
            // An archive opened at the same id as an existing one is not new, so nothing is scheduled.
            let commit_prev = if new { prev.filter(|p| *p != s) } else { None };
            (s, new, commit_prev)
        } else {
            (prev.unwrap_or(s), false, None)
        };
        let override_set = if force {
            let n = s.saturating_add(1);
            self.override_next = Some(n);
            Some(n)
        } else {
            None
        };
        Assignment {
            target,
            opened,
            commit_prev,
            override_set,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenario_28_grouping_called_directly() {
        let mut g = Grouping::default();
        let a = g.assign(10, true);
        assert_eq!((a.target, a.opened, a.commit_prev), (10, true, None));
        assert_eq!(g.assign(5, false).target, 5);
        assert_eq!(g.assign(8, false).target, 5);
        assert_eq!(g.assign(10, false).target, 10);
        let a = g.assign(11, false);
        assert_eq!((a.target, a.opened, a.commit_prev), (11, true, Some(10)));
        assert_eq!(g.assign(12, false).target, 11);
    }

    #[test]
    fn consecutive_key_blocks_get_own_archives() {
        let mut g = Grouping::default();
        for s in 1..60 {
            assert_eq!(g.assign(s, false).target, 1);
        }
        assert_eq!(g.assign(60, true).target, 1);
        let a = g.assign(61, true);
        assert_eq!((a.target, a.commit_prev), (61, Some(1)));
        let a = g.assign(62, false);
        assert_eq!((a.target, a.commit_prev), (62, Some(61)));
        assert_eq!(g.assign(161, false).target, 62);
        assert_eq!(g.assign(162, false).target, 162);
    }

    #[test]
    fn a_smaller_span_opens_archives_sooner() {
        let mut g = Grouping::new(10);
        let opened: Vec<u32> = (1..=35).filter(|s| g.assign(*s, false).opened).collect();
        assert_eq!(opened, vec![1, 11, 21, 31]);
        assert_eq!(Grouping::new(0).span, 1);
    }

    #[test]
    fn archives_span_at_most_100_mc_blocks() {
        let mut g = Grouping::default();
        assert_eq!(g.assign(1, false).target, 1);
        assert_eq!(g.assign(100, false).target, 1);
        let a = g.assign(101, false);
        assert_eq!((a.target, a.commit_prev), (101, Some(1)));
    }
}
