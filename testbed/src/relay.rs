//! A UDP relay that impairs the datagrams it carries: loss and delay with jitter, each direction on its own,
//! as `tc qdisc … netem loss P` / `netem delay D J` on both ends of a link would. Kernels without netem
//! (`CONFIG_NET_SCH_NETEM` not set, as in the sandbox) get this relay in front of a node instead: the node
//! listens on one port and announces another, where the relay listens (in the node's own network namespace
//! for the fault tests, on loopback for `bench sync --rtt-ms`), and forwards to the node. Everything that
//! reaches the node, and everything it answers, crosses the relay once (QUIC runs over UDP).

use std::collections::{BinaryHeap, HashMap};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rand::Rng;

/// What happens to a datagram on its way through.
#[derive(Debug, Clone, Copy, Default)]
pub struct Impairment {
    /// Probability of dropping it.
    pub loss: f64,
    /// Delay before it goes on.
    pub delay: Duration,
    /// The delay varies uniformly in `delay ± jitter`.
    pub jitter: Duration,
}

impl Impairment {
    /// When the datagram goes on, or `None` when it is lost.
    fn fate(&self, rng: &mut impl Rng) -> Option<Instant> {
        if self.loss > 0.0 && rng.gen_bool(self.loss.min(1.0)) {
            return None;
        }
        let jitter = self.jitter.min(self.delay).as_secs_f64();
        let delay = self.delay.as_secs_f64() + rng.gen_range(-jitter..=jitter);
        Some(Instant::now() + Duration::from_secs_f64(delay.max(0.0)))
    }
}

/// A datagram waiting for its time.
struct Pending {
    due: Instant,
    seq: u64,
    socket: Arc<UdpSocket>,
    to: Option<SocketAddr>,
    bytes: Vec<u8>,
}

impl PartialEq for Pending {
    fn eq(&self, other: &Self) -> bool {
        (self.due, self.seq) == (other.due, other.seq)
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Pending {
    // The earliest first out of the max-heap.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (other.due, other.seq).cmp(&(self.due, self.seq))
    }
}

/// A running relay; dropping it stops its threads.
pub struct Relay {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

/// How often the threads look at the stop flag.
const POLL: Duration = Duration::from_millis(50);

/// Moves the calling thread into the network namespace `ns` (sockets it creates then live there).
fn enter_namespace(ns: &str) -> Result<()> {
    let path = format!("/run/netns/{ns}");
    let file = std::fs::File::open(&path).with_context(|| format!("cannot open {path}"))?;
    // SAFETY: setns on a descriptor we own; it changes this thread's network namespace only.
    let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc != 0 {
        anyhow::bail!("setns {ns}: {}", std::io::Error::last_os_error());
    }
    Ok(())
}

impl Relay {
    /// A relay in namespace `ns` listening on `public` and forwarding to `target`, impairing each datagram
    /// in both directions. Returns once it listens.
    pub fn start(
        ns: &str,
        public: SocketAddr,
        target: SocketAddr,
        impairment: Impairment,
    ) -> Result<Self> {
        let (ready, listening) = mpsc::channel();
        let ns = ns.to_owned();
        Self::spawn(impairment, ready, listening, move || {
            // The sockets towards the node are made on this thread: it lives in the namespace too.
            enter_namespace(&ns)?;
            let socket = UdpSocket::bind(public)
                .with_context(|| format!("cannot bind the relay to {public}"))?;
            Ok((socket, target))
        })
    }

    /// A relay on loopback that listens on `socket` (bound already: its address is the one the node
    /// announces) and forwards to `target`.
    pub fn start_on(socket: UdpSocket, target: SocketAddr, impairment: Impairment) -> Result<Self> {
        let (ready, listening) = mpsc::channel();
        Self::spawn(impairment, ready, listening, move || Ok((socket, target)))
    }

    /// Starts the scheduler and the front thread, which runs `setup` first; returns once it listens.
    fn spawn(
        impairment: Impairment,
        ready: mpsc::Sender<Result<()>>,
        listening: mpsc::Receiver<Result<()>>,
        setup: impl FnOnce() -> Result<(UdpSocket, SocketAddr)> + Send + 'static,
    ) -> Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let (send, scheduled) = mpsc::channel::<Pending>();
        let scheduler = {
            let stop = stop.clone();
            std::thread::spawn(move || schedule(scheduled, &stop))
        };
        let front = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let (socket, target) = match setup().and_then(|(socket, target)| {
                    socket.set_read_timeout(Some(POLL))?;
                    Ok((socket, target))
                }) {
                    Ok(ok) => ok,
                    Err(e) => {
                        let _ = ready.send(Err(e));
                        return;
                    }
                };
                let _ = ready.send(Ok(()));
                forward(Arc::new(socket), target, impairment, send, &stop);
            })
        };
        let relay = Self {
            stop,
            threads: vec![scheduler, front],
        };
        listening
            .recv()
            .context("the relay's thread failed before it listened")??;
        Ok(relay)
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// Sends each scheduled datagram at its time.
fn schedule(scheduled: mpsc::Receiver<Pending>, stop: &AtomicBool) {
    let mut heap = BinaryHeap::new();
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        while heap.peek().is_some_and(|p: &Pending| p.due <= now) {
            let p = heap.pop().unwrap();
            // A node that is gone refuses: the datagram is lost, as on a wire.
            let _ = match p.to {
                Some(to) => p.socket.send_to(&p.bytes, to),
                None => p.socket.send(&p.bytes),
            };
        }
        let wait = heap
            .peek()
            .map_or(POLL, |p| p.due.saturating_duration_since(now).min(POLL));
        match scheduled.recv_timeout(wait) {
            Ok(p) => heap.push(p),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) if heap.is_empty() => return,
            Err(mpsc::RecvTimeoutError::Disconnected) => std::thread::sleep(wait),
        }
    }
}

/// Client → node: each client gets a socket of its own towards the node, whose answers go back to it.
fn forward(
    front: Arc<UdpSocket>,
    target: SocketAddr,
    impairment: Impairment,
    send: mpsc::Sender<Pending>,
    stop: &Arc<AtomicBool>,
) {
    let mut upstreams: HashMap<SocketAddr, Arc<UdpSocket>> = HashMap::new();
    let mut backs = Vec::new();
    let mut rng = rand::thread_rng();
    let mut seq = 0u64;
    let mut buf = vec![0u8; 65_536];
    while !stop.load(Ordering::Relaxed) {
        let Ok((n, client)) = front.recv_from(&mut buf) else {
            continue;
        };
        let upstream = match upstreams.entry(client) {
            std::collections::hash_map::Entry::Occupied(entry) => entry.into_mut(),
            std::collections::hash_map::Entry::Vacant(entry) => {
                let Ok(socket) = upstream_socket(target) else {
                    // Out of sockets: the datagram is lost, as on a wire.
                    continue;
                };
                let socket = Arc::new(socket);
                let (upstream, front, send, stop) =
                    (socket.clone(), front.clone(), send.clone(), stop.clone());
                backs.push(std::thread::spawn(move || {
                    back(upstream, front, client, impairment, send, &stop);
                }));
                entry.insert(socket)
            }
        };
        seq += 1;
        if let Some(due) = impairment.fate(&mut rng) {
            let pending = Pending {
                due,
                seq,
                socket: upstream.clone(),
                to: None,
                bytes: buf[..n].to_vec(),
            };
            if send.send(pending).is_err() {
                break;
            }
        }
    }
    drop(send);
    for thread in backs {
        let _ = thread.join();
    }
}

/// A socket of its own towards `target` for one client.
fn upstream_socket(target: SocketAddr) -> std::io::Result<UdpSocket> {
    let socket = UdpSocket::bind(SocketAddr::new(target.ip(), 0))?;
    socket.connect(target)?;
    socket.set_read_timeout(Some(POLL))?;
    Ok(socket)
}

/// Node → client: the node's answers on the client's socket go out from the relay's address.
fn back(
    upstream: Arc<UdpSocket>,
    front: Arc<UdpSocket>,
    client: SocketAddr,
    impairment: Impairment,
    send: mpsc::Sender<Pending>,
    stop: &AtomicBool,
) {
    let mut rng = rand::thread_rng();
    // Sequence numbers from the upper half: they order datagrams of equal due time, never across directions.
    let mut seq = 1u64 << 63;
    let mut buf = vec![0u8; 65_536];
    while !stop.load(Ordering::Relaxed) {
        // Timeouts, and refusals while the node is down.
        let Ok(n) = upstream.recv(&mut buf) else {
            continue;
        };
        seq += 1;
        if let Some(due) = impairment.fate(&mut rng) {
            let pending = Pending {
                due,
                seq,
                socket: front.clone(),
                to: Some(client),
                bytes: buf[..n].to_vec(),
            };
            if send.send(pending).is_err() {
                return;
            }
        }
    }
}
