//! `regolith p2p`: talk to any Tycho network from the command line. The command joins the network's public
//! overlay (bootstrap peers and zerostate from a global config) with an ephemeral key, waits for neighbours,
//! runs one request through the blockchain RPC client, verifies what it got and only then writes it.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use regolith_formats::zerostate::{check_zerostate_proof, McZerostate};
use regolith_formats::BlockId;
use regolith_node::config::{DataDir, GlobalConfig, NodeConfig};
use regolith_node::files::{parse_json, UnknownFields};
use regolith_rpc::client::{
    ArchiveSearch, BlockDataFull, BlockchainRpcClient, DataRequirement, PeerBook,
    PublicOverlayClient,
};
use regolith_rpc::network::{now_sec, BlockchainNetwork, NetworkSettings, Silent};
use regolith_rpc::proto;
use regolith_rpc::StateKind;
use serde_json::{json, Value};
use tycho_types::models::McStateExtra;

use crate::block_ref::BlockRef;

/// `regolith p2p` arguments.
#[derive(clap::Args, Debug)]
pub struct P2pArgs {
    /// The global config (bootstrap peers, zerostate); default `<data>/global.json`.
    #[arg(long)]
    pub global_config: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// How long to wait for neighbours and for the answer.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
    /// What to do.
    #[command(subcommand)]
    pub command: P2pCommand,
}

/// The `regolith p2p` commands.
#[derive(clap::Subcommand, Debug)]
pub enum P2pCommand {
    /// A block with its proof and queue diff: writes DIR/block.boc, DIR/proof.boc, DIR/queue_diff.bin.
    GetBlock {
        /// The block: a full id (`wc:prefix:seqno:root:file`), a short id (`wc:prefix:seqno`) of a block
        /// stored in the data dir, or an mc seqno (found in the data dir, or in the network's archive).
        #[arg(allow_hyphen_values = true)]
        id: BlockRef,
        /// The block after ID instead.
        #[arg(long)]
        next: bool,
        /// Where to write (default: the current directory).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Key block ids after a key block.
    GetKeyBlockIds {
        /// The key block (any form of `get-block`).
        #[arg(allow_hyphen_values = true)]
        id: BlockRef,
        /// At most this many.
        #[arg(long, default_value_t = 8)]
        max: u32,
    },
    /// The archive containing an mc block, as served (zstd package).
    GetArchive {
        /// The mc seqno.
        mc_seqno: u32,
        /// The file to write.
        #[arg(long)]
        out: PathBuf,
    },
    /// A persistent state, decompressed: the state BOC, or the TL queue state.
    GetState {
        /// The block of the state (any form of `get-block`).
        #[arg(allow_hyphen_values = true)]
        id: BlockRef,
        /// The queue state instead of the shard state.
        #[arg(long)]
        queue: bool,
        /// One part of a split state (its shard prefix in hex).
        #[arg(long)]
        part: Option<String>,
        /// The file to write.
        #[arg(long)]
        out: PathBuf,
    },
    /// The zerostate proof, checked against the zerostate of the global config.
    GetZerostateProof {
        /// The file to write.
        #[arg(long)]
        out: PathBuf,
    },
    /// Sends an external message (base64 or binary BOC) to the validators; prints how many got it.
    SendMessage {
        /// The message file.
        file: PathBuf,
    },
    /// The RTT of every neighbour.
    Ping,
}

/// An ephemeral node in the overlay.
struct Session {
    network: BlockchainNetwork,
    client: BlockchainRpcClient,
    global: GlobalConfig,
    /// The data dir, whose stored blocks and zerostate are used when it has them.
    data: DataDir,
}

/// Runs a `regolith p2p` command; returns what to print.
pub async fn run(data: &DataDir, args: P2pArgs) -> Result<Value> {
    let timeout = args.timeout;
    let session = tokio::time::timeout(timeout, join(data, &args))
        .await
        .map_err(|_| {
            anyhow!(
                "no neighbour joined the overlay within {}: check the bootstrap peers of the global config",
                humantime::format_duration(timeout)
            )
        })??;
    let result = tokio::time::timeout(timeout, execute(&session, args.command))
        .await
        .map_err(|_| anyhow!("no answer within {}", humantime::format_duration(timeout)));
    session.network.network.shutdown().await;
    result?
}

async fn join(data: &DataDir, args: &P2pArgs) -> Result<Session> {
    let global_path = args
        .global_config
        .clone()
        .unwrap_or_else(|| data.global_config());
    let text = std::fs::read_to_string(&global_path)
        .with_context(|| format!("cannot read the global config {}", global_path.display()))?;
    let global: GlobalConfig = parse_json(&text, &global_path, UnknownFields::Log)?;
    // The node's own sections (network, overlay, client) when this data dir has a node config.
    let config = if data.node_config().exists() {
        data.load_node_config()?
    } else {
        NodeConfig::new([0; 32], &data.root)
    };
    let now = now_sec();
    let bootstrap_peers: Vec<_> = global
        .parse_bootstrap_peers()?
        .into_iter()
        .filter(|p| p.verify(now))
        .collect();
    if bootstrap_peers.is_empty() {
        bail!(
            "{} has no valid bootstrap peer (none, or all expired)",
            global_path.display()
        );
    }
    // A network of loopback peers is reached from loopback; any other from every interface.
    let all_loopback = bootstrap_peers.iter().all(|p| {
        p.address_list.iter().all(|a| match a {
            tycho_network::Address::Ip { ip, .. } => ip.is_loopback(),
            tycho_network::Address::Dns { hostname, .. } => &**hostname == "localhost",
        })
    });
    let bind_address = if all_loopback {
        SocketAddr::from((Ipv4Addr::LOCALHOST, 0))
    } else {
        SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0))
    };
    let mut secret_key = [0u8; 32];
    rand::Rng::fill(&mut rand::thread_rng(), &mut secret_key);
    let network = BlockchainNetwork::start(
        NetworkSettings {
            bind_address,
            remote_address: None,
            secret_key,
            network: config.network.clone(),
            dht: config.dht.clone(),
            overlay: config.overlay.clone(),
            peer_resolver: config.peer_resolver.clone(),
            bootstrap_peers: bootstrap_peers.clone(),
            overlay_id: regolith_node::init::overlay_id(&global.zerostate),
            rate_limits: None,
        },
        Silent,
    )?;
    // The bootstrap peers are neighbours at once, before the overlay's entries arrive.
    let book = PeerBook::in_memory(&config.public_overlay_client.neighbors)
        .with_bootstrap_peers(bootstrap_peers);
    let overlay = PublicOverlayClient::with_peer_book(
        network.network.clone(),
        network.overlay.clone(),
        config.public_overlay_client.clone(),
        Arc::new(book),
    );
    overlay.wait_for_peers(1).await;
    let client = BlockchainRpcClient::builder()
        .with_overlay_client(overlay)
        .with_config(config.blockchain_rpc_client.clone())
        .with_max_frame_size(config.network.max_frame_size.as_u64())
        .build()
        .ok_or_else(|| anyhow!("cannot build the RPC client"))?;
    Ok(Session {
        network,
        client,
        global,
        data: data.clone(),
    })
}

async fn execute(session: &Session, command: P2pCommand) -> Result<Value> {
    let client = &session.client;
    match command {
        P2pCommand::GetBlock { id, next, out } => {
            let id = resolve(session, &id).await?;
            let got = if next {
                client
                    .get_next_block_full(&id, DataRequirement::Expected)
                    .await?
            } else {
                client
                    .get_block_full(&id, DataRequirement::Expected)
                    .await?
            };
            let neighbour = got.neighbour.peer_id().to_string();
            let Some(data) = got.data else {
                bail!(
                    "neighbour {neighbour} does not have the block {}{id}",
                    if next { "after " } else { "" }
                );
            };
            let checked = regolith_node::sync::block_check::check_downloaded_block(
                (!next).then_some(&id),
                &data,
            )
            .with_context(|| format!("the block from neighbour {neighbour} fails verification"))?;
            if next {
                let prev = checked.parsed().block.load_info()?.load_prev_ref()?;
                let follows = match prev {
                    tycho_types::models::PrevBlockRef::Single(r) => r.root_hash == id.root_hash,
                    tycho_types::models::PrevBlockRef::AfterMerge { left, right } => {
                        left.root_hash == id.root_hash || right.root_hash == id.root_hash
                    }
                };
                if !follows {
                    bail!(
                        "neighbour {neighbour} answered block {} which does not follow {id}",
                        data.block_id
                    );
                }
            }
            let proven = verify_block_proof(session, &data).await.with_context(|| {
                format!(
                    "the proof of block {} from neighbour {neighbour}",
                    data.block_id
                )
            })?;
            let dir = out.unwrap_or_else(|| PathBuf::from("."));
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            for (name, bytes) in [
                ("block.boc", &data.block),
                ("proof.boc", &data.proof),
                ("queue_diff.bin", &data.queue_diff),
            ] {
                regolith_node::files::write_atomically(&dir.join(name), bytes)?;
            }
            Ok(json!({
                "block_id": data.block_id.to_string(),
                "neighbour": neighbour,
                "proof": proven,
                "block_size": data.block.len(),
                "proof_size": data.proof.len(),
                "queue_diff_size": data.queue_diff.len(),
                "out": dir.display().to_string(),
            }))
        }
        P2pCommand::GetKeyBlockIds { id, max } => {
            let id = resolve(session, &id).await?;
            let answer = client.get_next_key_block_ids(&id, max).await?;
            let neighbour = answer.handle.neighbour().peer_id().to_string();
            let ids = answer.data.block_ids.clone();
            if ids
                .iter()
                .any(|k| !k.is_masterchain() || k.seqno <= id.seqno)
            {
                answer.handle.reject();
                bail!("neighbour {neighbour} answered key block ids that do not follow {id}");
            }
            let incomplete = answer.data.incomplete;
            answer.handle.accept();
            Ok(json!({
                "neighbour": neighbour,
                "key_block_ids": ids.iter().map(ToString::to_string).collect::<Vec<_>>(),
                "incomplete": incomplete,
            }))
        }
        P2pCommand::GetArchive { mc_seqno, out } => {
            let found = client.find_archive(mc_seqno).await.map_err(|e| match e {
                regolith_rpc::ClientError::NotFound => {
                    anyhow!("no neighbour has the archive of mc block {mc_seqno}")
                }
                e => e.into(),
            })?;
            let archive = match found {
                ArchiveSearch::Found(a) => a,
                ArchiveSearch::TooNew => {
                    bail!("the archive of mc block {mc_seqno} does not exist yet (too new)")
                }
            };
            let neighbour = archive.neighbour.peer_id().to_string();
            let file = TempFile::create(&out)?;
            let progress = regolith_node::progress::ByteProgress::new(
                &format!("archive {}", archive.id),
                archive.size,
            );
            let sink = file.writer()?;
            let downloaded = client
                .download_archive_compressed(&archive, Box::new(sink), move |n| progress.set(n))
                .await;
            drop(downloaded.with_context(|| {
                format!("the archive from neighbour {neighbour} fails verification")
            })?);
            file.commit()?;
            Ok(json!({
                "archive_id": archive.id,
                "size": archive.size,
                "neighbour": neighbour,
                "out": out.display().to_string(),
            }))
        }
        P2pCommand::GetState {
            id,
            queue,
            part,
            out,
        } => {
            let id = resolve(session, &id).await?;
            let kind = if queue {
                StateKind::Queue
            } else {
                StateKind::Shard
            };
            let part = part
                .map(|p| u64::from_str_radix(p.trim_start_matches("0x"), 16))
                .transpose()
                .context("--part is not a hex shard prefix")?;
            let state = client
                .find_persistent_state(&id, kind)
                .await
                .map_err(|e| match e {
                    regolith_rpc::ClientError::NotFound => anyhow!(
                        "no neighbour has the persistent {} state of {id}",
                        if queue { "queue" } else { "shard" }
                    ),
                    e => e.into(),
                })?;
            let neighbour = state.neighbour.peer_id().to_string();
            let size = match part {
                Some(prefix) => state
                    .parts
                    .iter()
                    .find(|p| p.prefix == prefix)
                    .map(|p| p.size)
                    .ok_or_else(|| anyhow!("the state of {id} has no part {prefix:016x}"))?,
                None => state.size,
            };
            let progress = regolith_node::progress::ByteProgress::new(
                &format!("state of {}", id.as_short_id()),
                size,
            );
            let bytes = client
                .download_persistent_state(&state, part, Vec::new(), move |n| progress.set(n))
                .await
                .with_context(|| format!("the state from neighbour {neighbour}"))?;
            verify_state(client, &id, kind, part, &bytes)
                .await
                .with_context(|| {
                    format!("the state from neighbour {neighbour} fails verification")
                })?;
            regolith_node::files::write_atomically(&out, &bytes)?;
            Ok(json!({
                "block_id": id.to_string(),
                "kind": if queue { "queue" } else { "shard" },
                "part": part.map(|p| format!("{p:016x}")),
                "size": bytes.len(),
                "neighbour": neighbour,
                "out": out.display().to_string(),
            }))
        }
        P2pCommand::GetZerostateProof { out } => {
            let answer = client.get_zerostate_proof().await?;
            let neighbour = answer.handle.neighbour().peer_id().to_string();
            let proto::ZerostateProof::Found { proof } = &answer.data else {
                answer.handle.ignore();
                bail!("neighbour {neighbour} has no zerostate proof");
            };
            let proof = proof.clone();
            if let Err(e) = check_zerostate_proof(&proof, &session.global.zerostate.root_hash) {
                answer.handle.reject();
                bail!("the zerostate proof from neighbour {neighbour} fails verification: {e}");
            }
            answer.handle.accept();
            regolith_node::files::write_atomically(&out, &proof)?;
            Ok(json!({
                "zerostate": session.global.zerostate.as_block_id().to_string(),
                "size": proof.len(),
                "neighbour": neighbour,
                "out": out.display().to_string(),
            }))
        }
        P2pCommand::SendMessage { file } => send_message(session, &file).await,
        P2pCommand::Ping => {
            let overlay = client.overlay_client();
            let mut rows = Vec::new();
            for neighbour in overlay.neighbours().get() {
                let rtt = overlay.ping(&neighbour).await;
                rows.push(json!({
                    "neighbour": neighbour.peer_id().to_string(),
                    "rtt_ms": rtt.as_ref().ok().map(|d| d.as_secs_f64() * 1000.0),
                    "error": rtt.err().map(|e| e.to_string()),
                }));
            }
            Ok(json!({ "neighbours": rows }))
        }
    }
}

/// The zerostate's `McStateExtra` (config, validator set, shards). From the data dir's zerostate when it has
/// one: a peer's zerostate proof is then only cross-checked against it (a peer that fails is rejected and
/// warned about, and the local zerostate is used). Otherwise from a peer's zerostate proof, checked against
/// the zerostate of the global config (rpc.md §3.3).
async fn zerostate_extra(session: &Session) -> Result<McStateExtra> {
    let expected = session.global.zerostate.as_block_id();
    let local_path = session
        .data
        .states()
        .join(regolith_node::boot::genesis::ZEROSTATE_FILE);
    let local = match std::fs::read(&local_path) {
        Ok(bytes) => {
            let zerostate = McZerostate::parse(&bytes)
                .with_context(|| format!("the data dir's zerostate {}", local_path.display()))?;
            if zerostate.id != expected {
                bail!(
                    "the data dir's zerostate {} is {}, but the global config names {expected}",
                    local_path.display(),
                    zerostate.id
                );
            }
            Some(zerostate)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", local_path.display())),
    };
    let answer = match (session.client.get_zerostate_proof().await, &local) {
        (Ok(answer), _) => answer,
        (Err(e), Some(zerostate)) => {
            tracing::warn!(error = %e, "no zerostate proof to cross-check the local zerostate with");
            return Ok(zerostate.extra.clone());
        }
        (Err(e), None) => return Err(e).context("the zerostate proof"),
    };
    let neighbour = answer.handle.neighbour().peer_id().to_string();
    let checked = match &answer.data {
        proto::ZerostateProof::Found { proof } => check_zerostate_proof(proof, &expected.root_hash)
            .map_err(|e| {
                anyhow!("the zerostate proof from neighbour {neighbour} fails verification: {e}")
            }),
        proto::ZerostateProof::NotFound => {
            Err(anyhow!("neighbour {neighbour} has no zerostate proof"))
        }
    };
    match checked {
        Ok(checked) => {
            answer.handle.accept();
            Ok(match local {
                Some(zerostate) => zerostate.extra,
                None => checked.extra,
            })
        }
        Err(e) => {
            if matches!(answer.data, proto::ZerostateProof::Found { .. }) {
                answer.handle.reject();
            } else {
                answer.handle.ignore();
            }
            match local {
                Some(zerostate) => {
                    tracing::warn!(error = %e, "the local zerostate is used");
                    Ok(zerostate.extra)
                }
                None => Err(e),
            }
        }
    }
}

/// The full id of a block named in any form of [`BlockRef`]: as given; a short id or an mc seqno among the
/// blocks stored in the data dir; an mc seqno not stored there from the archive that holds it (downloaded,
/// verified as it streams, scanned for the block's entry). The block itself is then downloaded by that id
/// and verified as usual.
async fn resolve(session: &Session, block: &BlockRef) -> Result<BlockId> {
    if let BlockRef::Full(id) = block {
        return Ok(*id);
    }
    if session.data.root.join("core").exists() {
        let config = session.data.load_node_config()?;
        let storage = crate::commands::inspect::open_for_inspect(config.storage)?;
        match block.resolve(&storage) {
            Ok(id) => return Ok(id),
            Err(e) if !is_masterchain_ref(block) => {
                return Err(e.context(format!(
                    "resolving {block} in {}",
                    session.data.root.display()
                )))
            }
            Err(_) => {}
        }
    }
    match *block {
        BlockRef::McSeqno(seqno) => mc_block_id_from_archive(session, seqno).await,
        BlockRef::Short { seqno, .. } if is_masterchain_ref(block) => {
            mc_block_id_from_archive(session, seqno).await
        }
        _ => bail!(
            "block {block} is not stored in the data dir {}; give its full id (wc:prefix:seqno:root:file)",
            session.data.root.display()
        ),
    }
}

fn is_masterchain_ref(block: &BlockRef) -> bool {
    match block {
        BlockRef::Full(id) => id.is_masterchain(),
        BlockRef::Short { shard, .. } => shard.is_masterchain(),
        BlockRef::McSeqno(_) => true,
    }
}

/// The id of mc block `seqno`, read from the network's archive that holds it.
async fn mc_block_id_from_archive(session: &Session, seqno: u32) -> Result<BlockId> {
    use regolith_formats::archive::{ArchiveEntryType, ArchiveReader};
    let client = &session.client;
    let archive = match client.find_archive(seqno).await {
        Ok(ArchiveSearch::Found(archive)) => archive,
        Ok(ArchiveSearch::TooNew) => bail!(
            "mc block {seqno} is newer than every committed archive of the network: give its full id, or \
             use `get-block --next` with the block before it"
        ),
        Err(regolith_rpc::ClientError::NotFound) => {
            bail!("no neighbour has the archive of mc block {seqno}")
        }
        Err(e) => return Err(e.into()),
    };
    let neighbour = archive.neighbour.peer_id().to_string();
    // Never committed: the temp file is removed when this returns.
    let file = TempFile::create(&std::env::temp_dir().join(format!(
        "regolith-p2p-{}-archive-{}",
        std::process::id(),
        archive.id
    )))?;
    let progress = regolith_node::progress::ByteProgress::new(
        &format!("archive {} (finding mc block {seqno})", archive.id),
        archive.size,
    );
    let sink = file.writer()?;
    drop(
        client
            .download_archive_compressed(&archive, Box::new(sink), move |n| progress.set(n))
            .await
            .with_context(|| format!("the archive from neighbour {neighbour}"))?,
    );
    let reader = std::io::BufReader::new(
        std::fs::File::open(&file.tmp)
            .with_context(|| format!("cannot open {}", file.tmp.display()))?,
    );
    let mut entries = ArchiveReader::new_compressed(reader)
        .with_context(|| format!("cannot decode the archive from neighbour {neighbour}"))?;
    while let Some(entry) = entries
        .next_entry()
        .map_err(|e| anyhow!("the archive from neighbour {neighbour}: {}", e.kind))?
    {
        if entry.ty == ArchiveEntryType::Block
            && entry.block_id.is_masterchain()
            && entry.block_id.seqno == seqno
        {
            return Ok(entry.block_id);
        }
    }
    bail!(
        "archive {} from neighbour {neighbour} does not hold mc block {seqno}",
        archive.id
    )
}

/// The zerostate's extra (its proof checked against the global config) and the chain of key blocks that
/// starts at it, none verified yet.
async fn genesis_chain(
    session: &Session,
) -> Result<(
    McStateExtra,
    regolith_node::trust::key_blocks::KeyBlockChain,
)> {
    use regolith_formats::{ProofChecker, ZerostateConfig};
    let genesis = zerostate_extra(session).await?;
    let checker = ProofChecker::new(ZerostateConfig::new(
        genesis.config.clone(),
        genesis.consensus_info,
    ));
    let chain = regolith_node::trust::key_blocks::KeyBlockChain::new(
        checker,
        session.global.zerostate.as_block_id(),
    );
    Ok((genesis, chain))
}

/// Verifies a downloaded block's proof the way import does: an mc block's signatures against the validator
/// set of the zerostate (from its proof, checked against the global config) or of the previous key block,
/// whose proofs are fetched and verified in order from the zerostate; a shard block's proof link.
async fn verify_block_proof(session: &Session, data: &BlockDataFull) -> Result<Value> {
    use regolith_formats::{ParsedProof, Proven};
    let client = &session.client;
    let (_, mut chain) = genesis_chain(session).await?;
    let parsed = ParsedProof::parse(&data.block_id, &data.proof)?;
    let key_seqno = parsed.prev_key_block_seqno();
    if data.block_id.is_masterchain() && key_seqno != 0 {
        // The key blocks from the zerostate up to the one this block is signed through, each verified.
        chain.walk(client, Some(key_seqno)).await?;
        if chain.newest().map(|k| k.id().seqno) != Some(key_seqno) {
            bail!("key block {key_seqno} is not among the key blocks the neighbours know");
        }
    }
    Ok(match chain.verify(&parsed)? {
        Proven::Signed(by) => json!({
            "signatures": by.signatures,
            "signed_weight": by.signed_weight,
            "total_weight": by.total_weight,
        }),
        Proven::Link => json!({ "link": true }),
    })
}

/// The state checks: a shard state's root is the zerostate root (seqno 0) or the block's new state hash; a
/// part decodes as a BOC; a queue state parses as TL `block.queueState`.
async fn verify_state(
    client: &BlockchainRpcClient,
    id: &BlockId,
    kind: StateKind,
    part: Option<u64>,
    bytes: &[u8],
) -> Result<()> {
    if kind == StateKind::Queue {
        regolith_formats::queue_state::QueueState::parse(bytes)
            .map_err(|e| anyhow!("not a queue state: {e}"))?;
        return Ok(());
    }
    let root = tycho_types::boc::Boc::decode(bytes).map_err(|e| anyhow!("not a BOC: {e}"))?;
    if part.is_some() {
        return Ok(());
    }
    let expected = if id.seqno == 0 {
        id.root_hash
    } else {
        let block = client
            .get_block_full(id, DataRequirement::Optional)
            .await?
            .data
            .ok_or_else(|| {
                anyhow!("the block {id} is needed to check its state and nobody has it")
            })?;
        let checked = regolith_node::sync::block_check::check_downloaded_block(Some(id), &block)?;
        checked.parsed().block.load_state_update()?.new_hash
    };
    if *root.repr_hash() != expected {
        bail!(
            "the state root is {}, the block's state is {expected}",
            root.repr_hash()
        );
    }
    Ok(())
}

async fn send_message(session: &Session, file: &Path) -> Result<Value> {
    use base64::Engine;
    let raw = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let text = String::from_utf8_lossy(&raw);
    let boc = match base64::engine::general_purpose::STANDARD.decode(text.trim()) {
        Ok(bytes) => bytes,
        Err(_) => raw,
    };
    regolith_rpc::broadcast::validate_external_message(&boc)
        .map_err(|e| anyhow!("{} is not a valid external message: {e}", file.display()))?;
    // The current validator set: the one the newest key block installs (its proof verified through the chain
    // of key blocks from the zerostate), or the zerostate's when the chain has no key block yet.
    let client = &session.client;
    let (genesis, mut chain) = genesis_chain(session).await?;
    chain.walk(client, None).await?;
    let (vset, from) = match chain.newest() {
        Some(key_block) => (
            key_block
                .proof
                .key_block_validators()
                .map_err(|e| anyhow!("key block {}: {e}", key_block.id()))?,
            key_block.id().to_string(),
        ),
        None => (
            genesis
                .config
                .get_current_validator_set()
                .context("the zerostate config has no current validator set")?,
            "the zerostate".to_string(),
        ),
    };
    let ids = regolith_node::trust::key_blocks::validator_peer_ids(&vset);
    let overlay = client.overlay_client();
    overlay.update_validator_set(ids.iter().copied());
    // Targets are the validators that answered a ping: wait for the first (at most 30 s, within --timeout).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while overlay.broadcast_targets().is_empty() && tokio::time::Instant::now() < deadline {
        let _ = tokio::time::timeout_at(deadline, overlay.targets_changed()).await;
    }
    let delivered = client.broadcast_external_message(&boc).await;
    Ok(json!({
        "validator_set_from": from,
        "validators": ids.len(),
        "targets": overlay.broadcast_targets().len(),
        "delivered": delivered,
    }))
}

/// A file written in place of `path` only once complete: temp file, fsync, rename, fsync of the directory.
struct TempFile {
    path: PathBuf,
    tmp: PathBuf,
    file: std::fs::File,
}

impl TempFile {
    fn create(path: &Path) -> Result<Self> {
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let name = path
            .file_name()
            .with_context(|| format!("{} has no file name", path.display()))?;
        let tmp = dir.join(format!(".{}.tmp", name.to_string_lossy()));
        let file = std::fs::File::create(&tmp)
            .with_context(|| format!("cannot create {}", tmp.display()))?;
        Ok(Self {
            path: path.to_path_buf(),
            tmp,
            file,
        })
    }

    fn writer(&self) -> Result<std::io::BufWriter<std::fs::File>> {
        Ok(std::io::BufWriter::new(self.file.try_clone()?))
    }

    fn commit(self) -> Result<()> {
        self.file
            .sync_all()
            .with_context(|| format!("cannot sync {}", self.tmp.display()))?;
        std::fs::rename(&self.tmp, &self.path).with_context(|| {
            format!(
                "cannot rename {} to {}",
                self.tmp.display(),
                self.path.display()
            )
        })?;
        let dir = self
            .path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .with_context(|| format!("cannot sync {}", dir.display()))?;
        Ok(())
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        // A download that failed leaves nothing behind; after a commit the temp name no longer exists.
        let _ = std::fs::remove_file(&self.tmp);
    }
}
