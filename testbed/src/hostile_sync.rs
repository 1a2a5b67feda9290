//! `regolith bench sync --hostile`, and the runs the hostile-peer tests make: a fresh `regolith run` child
//! process syncs the fixture chain from a forging peer ([`crate::forger`]), alone or with an honest peer
//! beside it. Per run: how far it got and in what time, its peak RSS (VmHWM of the child), what the forger
//! was asked and forged, and the scores the node gave both peers.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use regolith_formats::BlockId;
use regolith_node::run::Node;
use serde::Serialize;

use crate::forger::{Attack, Forger, ForgerLog};
use crate::process::{metric, RunningNode};

/// A peer serving the fixture chain behind a forging layer.
pub struct ForgingPeer {
    /// The node.
    pub node: Node,
    /// What it was asked.
    pub log: Arc<ForgerLog>,
    /// The highest mc seqno a node reaches from it alone.
    pub reachable_alone: u32,
    _dir: tempfile::TempDir,
}

impl ForgingPeer {
    /// Imports the fixture chain into a temp dir and serves it on `ip` through `attack` (the archive is
    /// committed when the attack is on archives).
    pub async fn start(fixtures: &Path, ip: [u8; 4], attack: Attack) -> Result<Self> {
        let dir = tempfile::tempdir()?;
        let (data, mut config, storage) =
            crate::fixture::import_fixture_chain(dir.path(), fixtures, SocketAddr::from((ip, 0)))
                .await?;
        if attack.on_archives() {
            crate::fixture::start_next_archive(&storage).await?;
        }
        (config.overlay, config.dht) = regolith_rpc::network::quick_discovery();
        let global = data.load_global_config()?;
        let forger = Forger::new(
            regolith_node::run::make_service(&config, &storage)?,
            attack,
            fixtures,
        )?;
        let log = forger.log();
        let reachable_alone = forger.reachable_alone();
        let node = regolith_node::run::start_node_with_service(&config, &global, storage, forger)?;
        Ok(Self {
            node,
            log,
            reachable_alone,
            _dir: dir,
        })
    }

    /// Its signed peer info, as a bootstrap entry.
    pub fn bootstrap_entry(&self) -> Result<serde_json::Value> {
        Ok(serde_json::to_value(
            self.node
                .network
                .signed_peer_info(Duration::from_secs(3600)),
        )?)
    }

    /// Its peer id in hex (the `peer` label of the node's neighbour metrics).
    pub fn peer_hex(&self) -> String {
        self.node.network.peer_id().to_string()
    }
}

/// One run of a fresh node against the peers.
#[derive(Debug, Clone, Serialize)]
pub struct HostileRun {
    /// The attack.
    pub attack: Attack,
    /// An honest peer was beside the forger.
    pub with_honest: bool,
    /// The last applied mc seqno at the end.
    pub reached: u32,
    /// The target it waited for.
    pub target: u32,
    /// Seconds from the node's start to the target (or to the deadline).
    pub seconds: f64,
    /// Peak RSS of the node process, MiB.
    pub peak_rss_mib: f64,
    /// Queries the forger answered.
    pub forger_queries: u64,
    /// Answers it forged.
    pub forged: u64,
    /// Archive chunks it served.
    pub forger_archive_chunks: u64,
    /// The node's score of the forger at the end (`None`: not a neighbour, i.e. dropped or banned).
    pub forger_score: Option<f64>,
    /// The node's score of the honest peer at the end.
    pub honest_score: Option<f64>,
    /// The forger is banned in the node's peers file after the run (read once the node has stopped).
    pub forger_banned: bool,
    /// The honest peer is banned there.
    pub honest_banned: bool,
    /// The node's `regolith_sync_failures_total`, by reason.
    pub failures: Vec<(String, f64)>,
    /// The node's data dir (kept for the caller's checks until the run is dropped).
    #[serde(skip)]
    pub data: PathBuf,
    /// Block ids the forger and the honest peer were asked for with getBlockFull.
    #[serde(skip)]
    pub blocks_asked: Vec<BlockId>,
}

/// Starts a fresh `regolith run` (binary `exe`) in `work` that bootstraps from `peers`, and waits until it
/// has applied mc `target`, or until `settle` holds once it is at `target` (so a node that must stop there is
/// seen to stay), or until `deadline`.
#[allow(clippy::too_many_arguments)]
pub async fn run_victim(
    exe: &Path,
    fixtures: &Path,
    work: &Path,
    attack: Attack,
    forger: &ForgingPeer,
    honest: Option<&ForgingPeer>,
    target: u32,
    deadline: Duration,
) -> Result<HostileRun> {
    let mut peers = vec![forger.bootstrap_entry()?];
    if let Some(honest) = honest {
        peers.push(honest.bootstrap_entry()?);
    }
    let (data, metrics_address) = crate::process::prepare(
        work,
        &fixtures.join("zerostate.boc"),
        peers,
        true,
        regolith_node::boot::cold_boot::BootConfig::Genesis,
    )?;

    let before = (
        forger.log.queries.load(Ordering::Relaxed),
        forger.log.forged.load(Ordering::Relaxed),
        forger.log.archive_chunks.load(Ordering::Relaxed),
    );
    forger.log.blocks_asked.lock().clear();
    if let Some(h) = honest {
        h.log.blocks_asked.lock().clear();
    }
    let mut child = RunningNode::spawn(exe, &data, metrics_address)?;
    let started = Instant::now();
    let mut reached = 0u32;
    let mut page = String::new();
    let forger_label = format!("peer=\"{}\"", forger.peer_hex());
    let dropped = |page: &str| {
        metric(
            page,
            "regolith_overlay_neighbour_score",
            Some(&forger_label),
        )
        .is_none_or(|score| score <= 0.0)
    };
    loop {
        if let Some(text) = child.scrape() {
            reached = metric(&text, "regolith_sync_last_applied_mc_seqno", None)
                .map_or(reached, |v| v as u32);
            page = text;
        }
        if let Ok(Some(status)) = child.exited() {
            bail!(
                "the node exited ({status}) at mc {reached}; see {}",
                work.join("run.log").display()
            );
        }
        // A node that must stop short of the tip is watched until it has dropped the forger, so that
        // staying there is seen, not assumed.
        let forger_dropped = dropped(&page);
        let forged_now = forger.log.forged.load(Ordering::Relaxed) > before.1;
        if reached >= 100 || (reached >= target && forged_now && forger_dropped) {
            break;
        }
        if started.elapsed() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let seconds = started.elapsed().as_secs_f64();
    // The scores are a gauge the node refreshes every `update_metrics_interval`: a forger dropped shortly
    // before the stop shows at 0 on the next refresh. Wait that long (no more) so that the run reports the
    // node's end state, not a refresh from before the drop.
    if forger.log.forged.load(Ordering::Relaxed) > before.1 {
        let refreshed_by = Instant::now()
            + regolith_rpc::config::NeighborsConfig::default().update_metrics_interval * 2;
        while !dropped(&page) && Instant::now() < refreshed_by {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if let Some(text) = child.scrape() {
                page = text;
            }
        }
    }
    let peak_rss_mib = child.peak_rss_mib()?;
    let scores = |peer: &ForgingPeer| {
        metric(
            &page,
            "regolith_overlay_neighbour_score",
            Some(&format!("peer=\"{}\"", peer.peer_hex())),
        )
        .filter(|v| *v > 0.0)
    };
    let failures = page
        .lines()
        .filter(|l| l.starts_with("regolith_sync_failures_total{"))
        .filter_map(|l| {
            let reason = l.split("reason=\"").nth(1)?.split('"').next()?.to_string();
            let value = l.rsplit_once(' ')?.1.parse().ok()?;
            Some((reason, value))
        })
        .collect();
    let run = HostileRun {
        attack,
        with_honest: honest.is_some(),
        reached,
        target,
        seconds,
        peak_rss_mib,
        forger_queries: forger.log.queries.load(Ordering::Relaxed) - before.0,
        forged: forger.log.forged.load(Ordering::Relaxed) - before.1,
        forger_archive_chunks: forger.log.archive_chunks.load(Ordering::Relaxed) - before.2,
        forger_score: scores(forger),
        honest_score: honest.and_then(scores),
        forger_banned: false,
        honest_banned: false,
        failures,
        data: data.root.clone(),
        blocks_asked: forger
            .log
            .blocks_asked
            .lock()
            .iter()
            .chain(
                honest
                    .map(|h| h.log.blocks_asked.lock().clone())
                    .iter()
                    .flatten(),
            )
            .copied()
            .collect(),
    };
    child.stop().await?;
    let book = regolith_rpc::client::PeerBook::open(
        &data.root.join(regolith_node::run::PEERS_FILE),
        &Default::default(),
    )?;
    let now = regolith_rpc::network::now_sec();
    let banned = |peer: &ForgingPeer| book.banned(&peer.node.network.peer_id(), now).is_some();
    Ok(HostileRun {
        forger_banned: banned(forger),
        honest_banned: honest.is_some_and(banned),
        ..run
    })
}
