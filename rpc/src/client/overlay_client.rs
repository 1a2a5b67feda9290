//! The public overlay client (rpc.md §8, §7.1): neighbours drawn from the blockchain overlay's entries, every
//! query scored on its transport outcome, the update / apply / ping tasks, and the validator broadcast
//! targets with their tracking task (§8.5).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;
use rand::seq::SliceRandom;
use tycho_network::{
    ConnectionError, KnownPeerHandle, Network, PeerId, PeerResolverHandle, PublicOverlay, Request,
    UnknownPeerError,
};

use super::error::ClientError;
use super::history::RequestHistory;
use super::neighbour::{Neighbour, Outcome, Punishment};
use super::neighbours::{Candidate, Neighbours};
use super::peer_book::PeerBook;
use crate::config::PublicOverlayClientConfig;
use crate::network::now_sec;
use crate::proto::{self, OverlayResponse};

/// The bare pong (§2.2 item 4).
const PONG: [u8; 4] = [0x04, 0x08, 0x70, 0x67];

/// An answer with the handle that scores it.
#[derive(Debug)]
pub struct QueryResponse<T> {
    /// The decoded answer.
    pub data: T,
    /// How the caller scores it.
    pub handle: QueryHandle,
}

/// Scores one answer. Dropping it leaves the neighbour unscored.
#[derive(Debug)]
pub struct QueryHandle {
    neighbour: Arc<Neighbour>,
    rtt: Duration,
    history: Option<Arc<RequestHistory>>,
}

impl QueryHandle {
    pub(crate) fn new(
        neighbour: Arc<Neighbour>,
        rtt: Duration,
        history: Option<Arc<RequestHistory>>,
    ) -> Self {
        Self {
            neighbour,
            rtt,
            history,
        }
    }

    /// Marks the answer useful in the history now, and leaves only the score to the caller.
    pub fn mark_useful(mut self) -> Self {
        if let Some(h) = self.history.take() {
            h.useful(self.neighbour.peer_id());
        }
        self
    }

    /// The neighbour that answered.
    pub fn neighbour(&self) -> &Arc<Neighbour> {
        &self.neighbour
    }

    /// A good answer: +8, and the history marks it useful.
    pub fn accept(self) {
        self.neighbour.track(Outcome::Accept, self.rtt);
        if let Some(h) = &self.history {
            h.useful(self.neighbour.peer_id());
        }
    }

    /// A bad answer: −8 and a failure; unhelpful in the history.
    pub fn reject(self) {
        self.neighbour.track(Outcome::Reject, self.rtt);
        if let Some(h) = &self.history {
            h.unhelpful(self.neighbour.peer_id());
        }
    }

    /// A neutral answer: no score change, RTT and total recorded; unhelpful in the history.
    pub fn ignore(self) {
        self.neighbour.track(Outcome::Ignore, self.rtt);
        if let Some(h) = &self.history {
            h.unhelpful(self.neighbour.peer_id());
        }
    }

    /// A punishment; nothing is tracked and the history is untouched.
    pub fn punish(self, punishment: Punishment) {
        self.neighbour.punish(punishment);
    }
}

struct Inner {
    network: Network,
    overlay: PublicOverlay,
    config: PublicOverlayClientConfig,
    neighbours: Neighbours,
    validators: Validators,
    /// Known-peer handles of the pinned peers (bootstrap and recent ones): they keep the addresses known to
    /// the network while the overlay has no entry for them.
    pinned: Mutex<HashMap<PeerId, KnownPeerHandle>>,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        for task in self.tasks.get_mut().drain(..) {
            task.abort();
        }
    }
}

/// The overlay client. Cheap to clone; its tasks stop with the last clone.
#[derive(Clone)]
pub struct PublicOverlayClient {
    inner: Arc<Inner>,
}

impl PublicOverlayClient {
    /// A client over the blockchain overlay of `network` with a book that lasts as long as the process;
    /// starts the update, apply, ping and validator tracking tasks (needs a tokio runtime).
    pub fn new(
        network: Network,
        overlay: PublicOverlay,
        config: PublicOverlayClientConfig,
    ) -> Self {
        let book = Arc::new(PeerBook::in_memory(&config.neighbors));
        Self::with_peer_book(network, overlay, config, book)
    }

    /// As [`Self::new`] with a given book: its bans keep liars out, and its bootstrap and recent peers are
    /// always candidates beside the overlay's entries.
    pub fn with_peer_book(
        network: Network,
        overlay: PublicOverlay,
        config: PublicOverlayClientConfig,
        book: Arc<PeerBook>,
    ) -> Self {
        let neighbours = Neighbours::new(
            config.neighbors.keep,
            config.neighbors.default_roundtrip,
            config.neighbors.update_interval,
            book,
        );
        let inner = Arc::new(Inner {
            network,
            overlay,
            validators: Validators::default(),
            neighbours,
            config,
            pinned: Mutex::new(HashMap::new()),
            tasks: Mutex::new(Vec::new()),
        });
        let this = Self { inner };
        this.inner.neighbours.init(this.candidates(), now_sec());
        let weak = Arc::downgrade(&this.inner);
        let mut tasks = vec![
            tokio::spawn(update_task(weak.clone())),
            tokio::spawn(apply_task(weak.clone())),
            tokio::spawn(ping_task(weak.clone())),
            tokio::spawn(validators_task(weak.clone())),
        ];
        if this.inner.config.neighbors.enable_metrics {
            tasks.push(tokio::spawn(metrics_task(weak)));
        }
        *this.inner.tasks.lock() = tasks;
        this
    }

    /// The network.
    pub fn network(&self) -> &Network {
        &self.inner.network
    }

    /// The overlay.
    pub fn overlay(&self) -> &PublicOverlay {
        &self.inner.overlay
    }

    /// The config.
    pub fn config(&self) -> &PublicOverlayClientConfig {
        &self.inner.config
    }

    /// The neighbour set.
    pub fn neighbours(&self) -> &Neighbours {
        &self.inner.neighbours
    }

    /// Resolves once `n` neighbours exist.
    pub async fn wait_for_peers(&self, n: usize) {
        self.inner.neighbours.wait_for(n).await;
    }

    /// The book of bans and pinned peers.
    pub fn peer_book(&self) -> &Arc<PeerBook> {
        self.inner.neighbours.book()
    }

    /// Overlay entries with a resolved address (§8.1 item 1), and the pinned peers, as candidates.
    fn candidates(&self) -> Vec<Candidate> {
        candidates(&self.inner)
    }

    /// Sends a request body to a neighbour and scores the transport outcome (§7.1). `Ok` carries the raw answer
    /// and its RTT, left to the caller.
    pub async fn query_raw(
        &self,
        neighbour: &Arc<Neighbour>,
        body: Bytes,
    ) -> Result<(Bytes, Duration), ClientError> {
        query_raw(&self.inner, neighbour, body).await
    }

    /// A typed query: transport and decoding per §7.1; `response.err` → reject and `RequestFailed`.
    pub async fn query<R, T>(
        &self,
        neighbour: &Arc<Neighbour>,
        history: Option<Arc<RequestHistory>>,
        request: R,
    ) -> Result<QueryResponse<T>, ClientError>
    where
        R: tl_proto::TlWrite<Repr = tl_proto::Boxed>,
        for<'a> T: tl_proto::TlRead<'a, Repr = tl_proto::Boxed>,
    {
        let (answer, rtt) = self
            .query_raw(neighbour, Bytes::from(tl_proto::serialize(request)))
            .await?;
        let handle = QueryHandle {
            neighbour: neighbour.clone(),
            rtt,
            history,
        };
        match tl_proto::deserialize::<OverlayResponse<T>>(&answer) {
            Ok(OverlayResponse::Ok(data)) => Ok(QueryResponse { data, handle }),
            Ok(OverlayResponse::Err(code)) => {
                handle.reject();
                Err(ClientError::RequestFailed(code))
            }
            Err(e) => {
                handle.reject();
                Err(ClientError::InvalidResponse(format!(
                    "{} bytes from {}: {e}",
                    answer.len(),
                    neighbour.peer_id()
                )))
            }
        }
    }

    /// Sends a one-way overlay message to a neighbour (§8.2): its RTT is estimated as 2 × the elapsed time;
    /// after `neighbors.send_timeout` the send counts as a failure plus Slow.
    pub async fn send(&self, neighbour: &Arc<Neighbour>, body: Bytes) -> Result<(), ClientError> {
        let started = Instant::now();
        let request = Request {
            version: Default::default(),
            body,
        };
        let sent = tokio::time::timeout(
            self.inner.config.neighbors.send_timeout,
            self.inner
                .overlay
                .send(&self.inner.network, neighbour.peer_id(), request),
        )
        .await;
        let rtt = started.elapsed() * 2;
        match sent {
            Ok(Ok(())) => {
                neighbour.track(Outcome::Ignore, rtt);
                Ok(())
            }
            Ok(Err(e)) => {
                neighbour.track(Outcome::Reject, rtt);
                Err(ClientError::Network(format!(
                    "sending to {}: {e:#}",
                    neighbour.peer_id()
                )))
            }
            Err(_) => {
                neighbour.track(Outcome::Reject, rtt);
                neighbour.punish(Punishment::Slow);
                Err(ClientError::Timeout)
            }
        }
    }

    /// Pings a neighbour: a bare pong is accepted, anything else rejected.
    pub async fn ping(&self, neighbour: &Arc<Neighbour>) -> Result<Duration, ClientError> {
        ping(&self.inner, neighbour).await
    }

    /// Replaces the validator set (the current validators' public keys as peer ids), §8.5 item 1.
    pub fn update_validator_set(&self, ids: impl IntoIterator<Item = PeerId>) {
        let own = *self.inner.network.peer_id();
        let resolver = self.inner.overlay.peer_resolver().clone();
        self.inner
            .validators
            .update(ids.into_iter().filter(|id| *id != own), resolver.as_ref());
    }

    /// The current broadcast targets (≤ `validators.keep`).
    pub fn broadcast_targets(&self) -> Vec<PeerId> {
        self.inner.validators.targets.lock().clone()
    }

    /// Waits until the broadcast targets change (tests and tools).
    pub async fn targets_changed(&self) {
        self.inner.validators.changed.notified().await;
    }

    /// Sends an overlay message to a validator: no timeout, no scoring.
    pub async fn send_to_validator(&self, peer: &PeerId, body: Bytes) -> Result<(), ClientError> {
        self.inner
            .overlay
            .send(
                &self.inner.network,
                peer,
                Request {
                    version: Default::default(),
                    body,
                },
            )
            .await
            .map_err(|e| ClientError::Network(format!("sending to {peer}: {e:#}")))
    }
}

fn candidates(inner: &Inner) -> Vec<Candidate> {
    let own = inner.network.peer_id();
    let ttl = inner.overlay.entry_ttl_sec();
    let mut out: Vec<Candidate> = {
        let entries = inner.overlay.read_entries();
        entries
            .iter()
            .filter(|e| e.resolver_handle.is_resolved() && e.entry.peer_id != *own)
            .map(|e| Candidate {
                peer_id: e.entry.peer_id,
                expires_at: e.expires_at(ttl),
            })
            .collect()
    };
    // The pinned peers, whatever the overlay holds: a flood of fresh entries (or a restart among departed
    // peers) cannot push them out. Their addresses are kept known to the network by a handle.
    let mut pinned = inner.pinned.lock();
    for info in inner.neighbours.book().pinned(now_sec()) {
        if info.id == *own {
            continue;
        }
        if let std::collections::hash_map::Entry::Vacant(slot) = pinned.entry(info.id) {
            match inner
                .network
                .known_peers()
                .insert_allow_outdated(info.clone(), false)
            {
                Ok(handle) => {
                    slot.insert(handle);
                }
                Err(_) => continue, // banned by the network itself
            }
        }
        if !out.iter().any(|c| c.peer_id == info.id) {
            out.push(Candidate {
                peer_id: info.id,
                // A pinned peer leaves the set only by failing or lying, not by an entry's expiry.
                expires_at: u32::MAX,
            });
        }
    }
    out
}

/// Remembers the neighbours that answered (their newest signed infos) as the recent peers of the book.
fn remember_recent(inner: &Inner) {
    let infos: Vec<_> = inner
        .neighbours
        .get()
        .iter()
        .filter(|n| {
            let (total, failed) = n.totals();
            n.is_reliable() && !n.was_malicious() && total > failed
        })
        .filter_map(|n| inner.network.known_peers().get(n.peer_id()))
        .collect();
    inner.neighbours.book().remember_recent(infos);
}

/// Why a query brought no answer.
enum QueryFailure {
    /// The transport failed.
    Network(anyhow::Error),
    /// No answer within the query timeout.
    Timeout,
}

/// Sends a query and waits for the answer, scoring nothing.
async fn send_query(
    inner: &Inner,
    neighbour: &Arc<Neighbour>,
    body: Bytes,
) -> (Result<Bytes, QueryFailure>, Duration) {
    let started = Instant::now();
    let request = Request {
        version: Default::default(),
        body,
    };
    let timeout = inner.config.neighbors.query_timeout;
    let answer = tokio::time::timeout(
        timeout,
        inner
            .overlay
            .query(&inner.network, neighbour.peer_id(), request),
    )
    .await;
    let rtt = started.elapsed();
    let answer = match answer {
        Ok(Ok(response)) => Ok(response.body),
        Ok(Err(e)) => Err(QueryFailure::Network(e)),
        Err(_) => Err(QueryFailure::Timeout),
    };
    (answer, rtt)
}

fn network_error(neighbour: &Neighbour, e: &anyhow::Error) -> ClientError {
    ClientError::Network(format!("query to {}: {e:#}", neighbour.peer_id()))
}

/// A query that scores nothing, whatever comes of it: for a question the peer may not know (an
/// extension a stock node leaves unanswered), where silence is no fault.
pub(crate) async fn query_untracked(
    client: &PublicOverlayClient,
    neighbour: &Arc<Neighbour>,
    body: Bytes,
) -> Result<(Bytes, Duration), ClientError> {
    match send_query(&client.inner, neighbour, body).await {
        (Ok(answer), rtt) => Ok((answer, rtt)),
        (Err(QueryFailure::Network(e)), _) => Err(network_error(neighbour, &e)),
        (Err(QueryFailure::Timeout), _) => Err(ClientError::Timeout),
    }
}

async fn query_raw(
    inner: &Inner,
    neighbour: &Arc<Neighbour>,
    body: Bytes,
) -> Result<(Bytes, Duration), ClientError> {
    match send_query(inner, neighbour, body).await {
        (Ok(answer), rtt) => Ok((answer, rtt)),
        (Err(QueryFailure::Network(e)), rtt) => {
            neighbour.track(Outcome::Reject, rtt);
            if let Some(c) = e.downcast_ref::<ConnectionError>() {
                match c {
                    ConnectionError::InvalidAddress | ConnectionError::InvalidCertificate => {
                        neighbour.punish(Punishment::Malicious);
                    }
                    ConnectionError::Timeout => neighbour.punish(Punishment::Slow),
                    _ => {}
                }
            } else if e.downcast_ref::<UnknownPeerError>().is_some() {
                // §7.1 deviation: an unknown peer is not malicious.
            }
            Err(network_error(neighbour, &e))
        }
        (Err(QueryFailure::Timeout), rtt) => {
            neighbour.track(Outcome::Reject, rtt);
            neighbour.punish(Punishment::Slow);
            Err(ClientError::Timeout)
        }
    }
}

async fn ping(inner: &Inner, neighbour: &Arc<Neighbour>) -> Result<Duration, ClientError> {
    let (answer, rtt) = query_raw(
        inner,
        neighbour,
        Bytes::from(tl_proto::serialize(proto::Ping)),
    )
    .await?;
    if answer[..] == PONG {
        neighbour.track(Outcome::Accept, rtt);
        Ok(rtt)
    } else {
        neighbour.track(Outcome::Reject, rtt);
        Err(ClientError::InvalidResponse(format!(
            "{} answered a ping with {} bytes, not a pong",
            neighbour.peer_id(),
            answer.len()
        )))
    }
}

async fn update_task(weak: Weak<Inner>) {
    let Some(interval) = weak.upgrade().map(|i| i.config.neighbors.update_interval) else {
        return;
    };
    let mut ticker = tokio::time::interval(interval.max(Duration::from_millis(10)));
    // The immediate first tick is the initial draw, done at construction (and refilled below while the set
    // is not full); a full set churns only from the first real interval on.
    ticker.tick().await;
    loop {
        // While the overlay is empty, wait for entries instead of ticking.
        let added = {
            let Some(inner) = weak.upgrade() else { return };
            if inner.overlay.read_entries().is_empty() {
                let overlay = inner.overlay.clone();
                drop(inner);
                Some(overlay)
            } else {
                None
            }
        };
        if let Some(overlay) = added {
            tokio::select! {
                _ = overlay.entires_added().notified() => {}
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
            if overlay.read_entries().is_empty() {
                continue;
            }
        } else {
            // A set that is not full also refills as soon as new entries arrive.
            let (overlay, full) = {
                let Some(inner) = weak.upgrade() else { return };
                let full = inner.neighbours.len() >= inner.neighbours.keep();
                (inner.overlay.clone(), full)
            };
            if full {
                ticker.tick().await;
            } else {
                // Entries resolve after they arrive: look again every second while not full.
                tokio::select! {
                    _ = ticker.tick() => {}
                    _ = overlay.entires_added().notified() => {}
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        }
        let Some(inner) = weak.upgrade() else { return };
        let keep = inner.neighbours.keep();
        let active = inner.neighbours.len();
        let mut all = candidates(&inner);
        all.shuffle(&mut rand::thread_rng());
        all.truncate(keep + keep.saturating_sub(active));
        inner.neighbours.update(all, now_sec());
    }
}

async fn apply_task(weak: Weak<Inner>) {
    let Some((interval, overlay)) = weak
        .upgrade()
        .map(|i| (i.config.neighbors.apply_score_interval, i.overlay.clone()))
    else {
        return;
    };
    let mut ticker = tokio::time::interval(interval.max(Duration::from_millis(10)));
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = overlay.entries_removed().notified() => {}
        }
        let Some(inner) = weak.upgrade() else { return };
        inner.neighbours.apply(now_sec());
        remember_recent(&inner);
    }
}

async fn ping_task(weak: Weak<Inner>) {
    let Some(interval) = weak.upgrade().map(|i| i.config.neighbors.ping_interval) else {
        return;
    };
    let mut ticker = tokio::time::interval(interval.max(Duration::from_millis(10)));
    ticker.tick().await;
    loop {
        // A stranded set (neighbours, none selectable) gets no query that could bring one back: it is pinged
        // every second rather than at the next tick, and a neighbour that answers is selectable at once. The
        // reference waits for the tick, up to `ping_interval` (30 s) with the network back (deviation, rpc.md
        // §8.1 item 4).
        let ticked = tokio::select! {
            _ = ticker.tick() => true,
            _ = tokio::time::sleep(STRANDED_PING_PAUSE) => false,
        };
        let Some(inner) = weak.upgrade() else { return };
        if !ticked && !inner.neighbours.is_stranded() {
            continue;
        }
        let set = inner.neighbours.get();
        let Some(neighbour) = set.choose(&mut rand::thread_rng()).cloned() else {
            continue;
        };
        if ping(&inner, &neighbour).await.is_ok() && inner.neighbours.is_stranded() {
            inner.neighbours.apply(now_sec());
        }
    }
}

/// How often a stranded neighbour set is pinged.
const STRANDED_PING_PAUSE: Duration = Duration::from_secs(1);

/// Every `update_metrics_interval`: the size of the neighbour set and of the broadcast targets, and the score
/// and RTT of each neighbour.
async fn metrics_task(weak: Weak<Inner>) {
    let Some(interval) = weak
        .upgrade()
        .map(|i| i.config.neighbors.update_metrics_interval)
    else {
        return;
    };
    let mut ticker = tokio::time::interval(interval.max(Duration::from_millis(100)));
    let mut labelled: Vec<String> = Vec::new();
    loop {
        ticker.tick().await;
        let Some(inner) = weak.upgrade() else { return };
        let set = inner.neighbours.get();
        metrics::gauge!("regolith_overlay_neighbours").set(set.len() as f64);
        metrics::gauge!("regolith_overlay_broadcast_targets")
            .set(inner.validators.targets.lock().len() as f64);
        let now: Vec<String> = set.iter().map(|n| n.peer_id().to_string()).collect();
        // Neighbours that left are reported once more, at 0, so that their series do not stay stale.
        for gone in labelled.iter().filter(|p| !now.contains(p)) {
            metrics::gauge!("regolith_overlay_neighbour_score", "peer" => gone.clone()).set(0.0);
        }
        for (n, peer) in set.iter().zip(&now) {
            metrics::gauge!("regolith_overlay_neighbour_score", "peer" => peer.clone())
                .set(f64::from(n.score()));
            metrics::gauge!("regolith_overlay_neighbour_rtt_seconds", "peer" => peer.clone())
                .set(n.rtt().as_secs_f64());
        }
        labelled = now;
    }
}

/// The validator set and the broadcast targets (§8.5).
#[derive(Default)]
struct Validators {
    epoch: AtomicU64,
    /// Validators of the current set with their resolver handles.
    resolved: Mutex<HashMap<PeerId, PeerResolverHandle>>,
    targets: Mutex<Vec<PeerId>>,
    changed: tokio::sync::Notify,
    refresh: Arc<tokio::sync::Notify>,
}

impl Validators {
    fn update(
        &self,
        ids: impl Iterator<Item = PeerId>,
        resolver: Option<&tycho_network::PeerResolver>,
    ) {
        let ids: std::collections::HashSet<PeerId> = ids.collect();
        self.epoch.fetch_add(1, Ordering::AcqRel);
        {
            let mut resolved = self.resolved.lock();
            resolved.retain(|id, _| ids.contains(id));
            if let Some(resolver) = resolver {
                for id in &ids {
                    resolved
                        .entry(*id)
                        .or_insert_with(|| resolver.insert(id, false));
                }
            }
        }
        self.targets.lock().retain(|id| ids.contains(id));
        self.refresh.notify_one();
    }
}

async fn validators_task(weak: Weak<Inner>) {
    let Some((interval, refresh)) = weak.upgrade().map(|i| {
        (
            i.config.validators.ping_interval,
            i.validators.refresh.clone(),
        )
    }) else {
        return;
    };
    let mut ticker = tokio::time::interval(interval.max(Duration::from_millis(10)));
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = refresh.notified() => {}
        }
        let Some(inner) = weak.upgrade() else { return };
        track_validators(&inner).await;
    }
}

/// One tracking round: ping resolved, unexpired validators until `keep` answered or none is left.
async fn track_validators(inner: &Arc<Inner>) {
    use futures_util::stream::{FuturesUnordered, StreamExt};
    let epoch = inner.validators.epoch.load(Ordering::Acquire);
    let now = now_sec();
    let mut candidates: Vec<PeerId> = inner
        .validators
        .resolved
        .lock()
        .iter()
        .filter_map(|(id, handle)| {
            let known = handle.load_handle()?;
            (known.peer_info().expires_at >= now).then_some(*id)
        })
        .collect();
    candidates.shuffle(&mut rand::thread_rng());
    let keep = inner.config.validators.keep;
    let timeout = inner.config.validators.ping_timeout;
    let ping_one = |peer: PeerId| {
        let inner = inner.clone();
        async move {
            let body = Bytes::from(tl_proto::serialize(proto::Ping));
            let request = Request {
                version: Default::default(),
                body,
            };
            let answer =
                tokio::time::timeout(timeout, inner.overlay.query(&inner.network, &peer, request))
                    .await;
            let ok = matches!(answer, Ok(Ok(ref r)) if r.body[..] == PONG);
            (peer, ok)
        }
    };
    let mut queue = candidates.into_iter();
    let mut pending = FuturesUnordered::new();
    for peer in queue.by_ref().take(keep) {
        pending.push(ping_one(peer));
    }
    let mut targets = Vec::new();
    while let Some((peer, ok)) = pending.next().await {
        if ok {
            targets.push(peer);
            if targets.len() >= keep {
                break;
            }
        } else if let Some(next) = queue.next() {
            pending.push(ping_one(next));
        }
    }
    if inner.validators.epoch.load(Ordering::Acquire) == epoch {
        *inner.validators.targets.lock() = targets;
        inner.validators.changed.notify_waiters();
    }
}
