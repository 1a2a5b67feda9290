//! What the overlay client remembers about peers beyond one neighbour set: bans of peers that sent bad data
//! (growing on repeat offences, kept across neighbour refreshes and, with a file, across restarts), and the
//! peers it can always try (the bootstrap peers and the neighbours it used last), so that neither a flood of
//! fresh overlay entries nor a restart among departed peers leaves it without a live neighbour.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use tycho_network::{PeerId, PeerInfo};

use crate::config::NeighborsConfig;

/// Bans remembered at most (the oldest ended ones go first): fresh keys cost an attacker nothing.
const MAX_BANS: usize = 4096;
/// Recent neighbours remembered at most.
const MAX_RECENT: usize = 32;
/// The file's format version.
const VERSION: u32 = 1;

/// A peers file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PeerBookError {
    /// The file could not be read or written.
    #[error("{context}: {source}")]
    Io {
        /// What was done, with the path.
        context: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The file does not parse.
    #[error(
        "{path} is not a valid peers file ({reason}); it holds only bans and recent neighbours: move it \
         away to start without them"
    )]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// One ban.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ban {
    /// Unix seconds at which the ban ends.
    pub until: u32,
    /// Offences so far; each one doubles the ban (up to the maximum).
    pub offences: u32,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    version: u32,
    /// `(peer id hex, ban)`.
    bans: Vec<(String, Ban)>,
    recent: Vec<PeerInfo>,
}

#[derive(Default)]
struct State {
    bans: HashMap<PeerId, Ban>,
    recent: Vec<Arc<PeerInfo>>,
    bootstrap: Vec<Arc<PeerInfo>>,
}

/// Bans and always-tried peers of one node; shared by its overlay clients.
pub struct PeerBook {
    path: Option<PathBuf>,
    ban_duration: Duration,
    max_ban_duration: Duration,
    state: Mutex<State>,
}

impl std::fmt::Debug for PeerBook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerBook")
            .field("path", &self.path)
            .field("bans", &self.state.lock().bans.len())
            .finish()
    }
}

impl PeerBook {
    /// A book that lives as long as the process (tools, tests).
    pub fn in_memory(config: &NeighborsConfig) -> Self {
        Self {
            path: None,
            ban_duration: config.ban_duration,
            max_ban_duration: config.max_ban_duration.max(config.ban_duration),
            state: Mutex::new(State::default()),
        }
    }

    /// The book kept in `path` (created at the first change); a missing file is an empty book, a file that
    /// does not parse is an error naming it (it is never overwritten or deleted).
    pub fn open(path: &Path, config: &NeighborsConfig) -> Result<Self, PeerBookError> {
        let mut book = Self::in_memory(config);
        book.path = Some(path.to_owned());
        let bytes = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(book),
            Err(source) => {
                return Err(PeerBookError::Io {
                    context: format!("reading {}", path.display()),
                    source,
                })
            }
        };
        let invalid = |reason: String| PeerBookError::Invalid {
            path: path.to_owned(),
            reason,
        };
        let file: File = serde_json::from_slice(&bytes).map_err(|e| invalid(e.to_string()))?;
        if file.version != VERSION {
            return Err(invalid(format!("unknown version {}", file.version)));
        }
        let state = book.state.get_mut();
        for (peer, ban) in file.bans {
            let id = peer
                .parse::<PeerId>()
                .map_err(|e| invalid(format!("peer id {peer:?}: {e}")))?;
            state.bans.insert(id, ban);
        }
        // A recent peer's signed info is checked again when it is used (signature and expiry).
        state.recent = file
            .recent
            .into_iter()
            .take(MAX_RECENT)
            .map(Arc::new)
            .collect();
        metrics::gauge!("regolith_overlay_banned_peers").set(state.bans.len() as f64);
        Ok(book)
    }

    /// Adds the bootstrap peers: always tried, never forgotten (a ban still keeps a lying one out).
    pub fn with_bootstrap_peers(self, peers: impl IntoIterator<Item = PeerInfo>) -> Self {
        self.state.lock().bootstrap = peers.into_iter().map(Arc::new).collect();
        self
    }

    /// Bans a peer that sent bad data: `ban_duration` for the first offence, doubled for each repeat, up to
    /// `max_ban_duration`; written to the file at once. Returns the ban.
    pub fn ban(&self, peer: &PeerId, now: u32) -> Ban {
        let ban = {
            let mut state = self.state.lock();
            let offences = state.bans.get(peer).map_or(0, |b| b.offences) + 1;
            let factor = 1u32
                .checked_shl(offences.saturating_sub(1).min(31))
                .unwrap_or(u32::MAX);
            let length = self
                .ban_duration
                .saturating_mul(factor)
                .min(self.max_ban_duration);
            let ban = Ban {
                until: now.saturating_add(u32::try_from(length.as_secs()).unwrap_or(u32::MAX)),
                offences,
            };
            state.bans.insert(*peer, ban);
            if state.bans.len() > MAX_BANS {
                // The ban that ended first goes (offences of peers long gone are not worth memory).
                if let Some(oldest) = state
                    .bans
                    .iter()
                    .filter(|(id, _)| *id != peer)
                    .min_by_key(|(_, b)| b.until)
                    .map(|(id, _)| *id)
                {
                    state.bans.remove(&oldest);
                }
            }
            metrics::gauge!("regolith_overlay_banned_peers").set(state.bans.len() as f64);
            ban
        };
        metrics::counter!("regolith_overlay_bans_total").increment(1);
        tracing::warn!(
            %peer,
            offences = ban.offences,
            until = ban.until,
            "banned a neighbour that sent bad data"
        );
        self.save();
        ban
    }

    /// The ban of a peer, if it has not ended at `now`.
    pub fn banned(&self, peer: &PeerId, now: u32) -> Option<Ban> {
        self.state
            .lock()
            .bans
            .get(peer)
            .copied()
            .filter(|b| b.until > now)
    }

    /// Every ban remembered (ended ones too: they count for the next offence).
    pub fn bans(&self) -> Vec<(PeerId, Ban)> {
        let mut out: Vec<_> = self
            .state
            .lock()
            .bans
            .iter()
            .map(|(id, b)| (*id, *b))
            .collect();
        out.sort_by_key(|(id, _)| id.0);
        out
    }

    /// The peers always tried, bootstrap ones first: those with a valid signed info at `now`, not banned.
    pub fn pinned(&self, now: u32) -> Vec<Arc<PeerInfo>> {
        let state = self.state.lock();
        let mut out: Vec<Arc<PeerInfo>> = Vec::new();
        for info in state.bootstrap.iter().chain(&state.recent) {
            let banned = state.bans.get(&info.id).is_some_and(|b| b.until > now);
            if !banned && !out.iter().any(|o| o.id == info.id) && info.verify(now) {
                out.push(info.clone());
            }
        }
        out
    }

    /// Remembers the neighbours in use (their newest signed infos); written when the set of peers changed.
    pub fn remember_recent(&self, mut infos: Vec<Arc<PeerInfo>>) {
        // An empty set (a partition) does not erase what worked before.
        if infos.is_empty() {
            return;
        }
        infos.truncate(MAX_RECENT);
        let changed = {
            let mut state = self.state.lock();
            let ids = |v: &[Arc<PeerInfo>]| {
                let mut ids: Vec<[u8; 32]> = v.iter().map(|i| i.id.0).collect();
                ids.sort_unstable();
                ids
            };
            let newer = |info: &PeerInfo| {
                state
                    .recent
                    .iter()
                    .any(|old| old.id == info.id && old.expires_at < info.expires_at)
            };
            let changed = ids(&infos) != ids(&state.recent) || infos.iter().any(|i| newer(i));
            state.recent = infos;
            changed
        };
        if changed {
            self.save();
        }
    }

    /// The remembered recent neighbours.
    pub fn recent(&self) -> Vec<Arc<PeerInfo>> {
        self.state.lock().recent.clone()
    }

    fn save(&self) {
        let Some(path) = &self.path else { return };
        let file = {
            let state = self.state.lock();
            let mut bans: Vec<(String, Ban)> = state
                .bans
                .iter()
                .map(|(id, b)| (id.to_string(), *b))
                .collect();
            bans.sort_by(|a, b| a.0.cmp(&b.0));
            File {
                version: VERSION,
                bans,
                recent: state.recent.iter().map(|i| (**i).clone()).collect(),
            }
        };
        let result = serde_json::to_vec_pretty(&file)
            .map_err(std::io::Error::other)
            .and_then(|bytes| regolith_storage::files::write_atomically(path, &bytes, 0o600));
        if let Err(e) = result {
            // The bans stay in memory; only a restart would forget them.
            tracing::error!(file = %path.display(), error = %e, "cannot write the peers file");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(ban: u64, max: u64) -> NeighborsConfig {
        NeighborsConfig {
            ban_duration: Duration::from_secs(ban),
            max_ban_duration: Duration::from_secs(max),
            ..NeighborsConfig::default()
        }
    }

    #[test]
    fn bans_grow_on_repeat_offences_up_to_the_maximum_and_survive_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("peers.json");
        let cfg = config(600, 3000);
        let liar = PeerId([7; 32]);
        {
            let book = PeerBook::open(&path, &cfg).unwrap();
            assert_eq!(book.ban(&liar, 1000).until, 1600);
            assert!(book.banned(&liar, 1599).is_some());
            assert!(book.banned(&liar, 1600).is_none(), "the first ban ends");
            assert_eq!(book.ban(&liar, 2000).until, 3200, "twice as long");
        }
        let book = PeerBook::open(&path, &cfg).unwrap();
        assert_eq!(
            book.banned(&liar, 3000),
            Some(Ban {
                until: 3200,
                offences: 2
            }),
            "the ban is read back after a restart"
        );
        assert_eq!(book.ban(&liar, 4000).until, 6400);
        assert_eq!(book.ban(&liar, 7000).until, 10_000, "capped at the maximum");
        assert_eq!(book.ban(&liar, 20_000).until, 23_000);
        assert!(book.banned(&PeerId([8; 32]), 4000).is_none());
    }

    #[test]
    fn a_peers_file_that_does_not_parse_is_an_error_naming_it_and_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("peers.json");
        std::fs::write(&path, b"{\"version\": 1, \"bans\": [[\"zz\", ").unwrap();
        let err = PeerBook::open(&path, &config(1, 1))
            .unwrap_err()
            .to_string();
        assert!(err.contains("peers.json"), "{err}");
        assert!(std::fs::read(&path).unwrap().starts_with(b"{\"version\""));
    }
}
