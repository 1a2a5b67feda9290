//! The chunked download of the blockchain RPC client (getBlockFull, then getBlockDataChunk), fed by a fake peer
//! over real QUIC on loopback. The input scripts the peer: the object it serves (incompressible bytes, so the
//! zstd stream is as long as asked, or a bomb of zeros), the size and chunk size it announces, and what it does
//! to each answer (cut it, lengthen it, flip a byte, answer an error or garbage). Whatever the script, the
//! client never panics, never returns more than `max_block_size` bytes, and returns a block only if it is the
//! zstd decoding of exactly the bytes the peer served, which then are exactly the announced size.
#![no_main]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use regolith_fuzz::{runtime, Splitter};
use regolith_rpc::client::{BlockchainRpcClient, DataRequirement, PeerBook, PublicOverlayClient};
use regolith_rpc::config::{BlockchainRpcClientConfig, PublicOverlayClientConfig};
use regolith_rpc::network::{BlockchainNetwork, NetworkSettings, Silent};
use regolith_rpc::proto::{self, OverlayResponse, RpcRequest};
use tycho_network::{Response, Service, ServiceRequest};
use tycho_types::models::{BlockId, ShardIdent};

const MAX_BLOCK: u64 = 1 << 20;

/// What the peer does to one answer.
#[derive(Debug, Clone, Copy)]
enum Twist {
    Honest,
    Cut(usize),
    Lengthen(usize),
    Flip(usize),
    Error,
    Garbage,
}

#[derive(Default)]
struct Script {
    object: Bytes,
    size: u32,
    chunk_size: u32,
    twists: VecDeque<Twist>,
    /// The data bytes actually sent, by offset asked.
    served: Vec<(u32, Bytes)>,
}

#[derive(Clone, Default)]
struct FakePeer(Arc<Mutex<Script>>);

fn twisted(data: Bytes, twist: Twist) -> Bytes {
    match twist {
        Twist::Cut(n) => data.slice(..data.len().saturating_sub(n.max(1))),
        Twist::Lengthen(n) => {
            let mut v = data.to_vec();
            v.resize(v.len() + n.max(1), 0xa5);
            v.into()
        }
        Twist::Flip(i) if !data.is_empty() => {
            let mut v = data.to_vec();
            let i = i % v.len();
            v[i] ^= 0x5a;
            v.into()
        }
        _ => data,
    }
}

impl FakePeer {
    fn answer(&self, body: &[u8]) -> Bytes {
        let mut s = self.0.lock().unwrap();
        let twist = s.twists.pop_front().unwrap_or(Twist::Honest);
        let respond_err = || Bytes::from(tl_proto::serialize(OverlayResponse::<proto::Data>::Err(1)));
        match twist {
            Twist::Error => return respond_err(),
            Twist::Garbage => return Bytes::from_static(&[0xde, 0xad, 0xbe, 0xef, 1, 2, 3]),
            _ => {}
        }
        let chunk = |s: &Script, offset: u32| {
            let start = (offset as usize).min(s.object.len());
            let end = (start + s.chunk_size as usize).min(s.object.len());
            s.object.slice(start..end)
        };
        match RpcRequest::decode(body) {
            Ok(RpcRequest::GetBlockFull(req)) => {
                let data = twisted(chunk(&s, 0), twist);
                s.served.push((0, data.clone()));
                Bytes::from(tl_proto::serialize(OverlayResponse::Ok(proto::BlockFull::Found {
                    block_id: req.block_id,
                    block: proto::BlockData {
                        data,
                        size: s.size.max(1),
                        chunk_size: s.chunk_size.max(1),
                    },
                    proof: Bytes::from_static(b"proof"),
                    queue_diff: Bytes::from_static(b"diff"),
                })))
            }
            Ok(RpcRequest::GetBlockDataChunk(req)) => {
                let data = twisted(chunk(&s, req.offset), twist);
                s.served.push((req.offset, data.clone()));
                Bytes::from(tl_proto::serialize(OverlayResponse::Ok(proto::Data { data })))
            }
            // The bare pong.
            Ok(RpcRequest::Ping(_)) => Bytes::from_static(&[0x04, 0x08, 0x70, 0x67]),
            _ => respond_err(),
        }
    }
}

impl Service<ServiceRequest> for FakePeer {
    type QueryResponse = Response;
    type OnQueryFuture = futures_ready::Ready<Option<Response>>;
    type OnMessageFuture = futures_ready::Ready<()>;

    fn on_query(&self, req: ServiceRequest) -> Self::OnQueryFuture {
        futures_ready::ready(Some(Response {
            version: Default::default(),
            body: self.answer(&req.body),
        }))
    }

    fn on_message(&self, _req: ServiceRequest) -> Self::OnMessageFuture {
        futures_ready::ready(())
    }
}

mod futures_ready {
    pub use std::future::{ready, Ready};
}

struct Rig {
    peer: FakePeer,
    server: BlockchainNetwork,
    client_node: BlockchainNetwork,
}

fn settings(ip_last: u8) -> NetworkSettings {
    let mut secret_key = [0u8; 32];
    secret_key[0] = ip_last;
    secret_key[1] = 0x77;
    NetworkSettings {
        bind_address: std::net::SocketAddr::from(([127, 0, 0, ip_last], 0)),
        remote_address: None,
        secret_key,
        network: Default::default(),
        dht: Default::default(),
        overlay: Default::default(),
        peer_resolver: Default::default(),
        bootstrap_peers: Vec::new(),
        overlay_id: [0x33; 32],
        rate_limits: None,
    }
}

fn rig() -> &'static Rig {
    static RIG: OnceLock<Rig> = OnceLock::new();
    RIG.get_or_init(|| {
        runtime().block_on(async {
            let peer = FakePeer::default();
            let server = BlockchainNetwork::start(settings(201), peer.clone()).expect("server");
            let client_node = BlockchainNetwork::start(settings(202), Silent).expect("client");
            Rig {
                peer,
                server,
                client_node,
            }
        })
    })
}

fn incompressible(len: usize, seed: u64) -> Vec<u8> {
    let mut g = Splitter::new(&seed.to_le_bytes());
    (0..len).map(|_| g.next_u64() as u8).collect()
}

fuzz_target!(|input: &[u8]| {
    if input.len() < 16 {
        return;
    }
    let mut g = Splitter::new(&input[..8]);
    let rest = &input[8..];
    // The object: incompressible bytes (up to 300 KiB, several 64 KiB chunks), or zeros (a bomb).
    let raw_len = (u32::from_le_bytes([rest[0], rest[1], rest[2], 0]) % (300 << 10)) as usize;
    let raw = if rest[3] & 1 == 0 {
        incompressible(raw_len, g.next_u64())
    } else {
        vec![0u8; raw_len * 16]
    };
    let object = Bytes::from(zstd::bulk::compress(&raw, 1).expect("zstd"));
    let size = match rest[4] % 4 {
        0 => object.len() as u32,
        1 => (object.len() as u32).saturating_add(u32::from(rest[5])),
        2 => (object.len() as u32).saturating_sub(u32::from(rest[5])),
        _ => g.next_u64() as u32,
    };
    let chunk_size = match rest[6] % 4 {
        0 => 64 << 10,
        1 => 128 << 10,
        2 => (g.next_u64() % (1 << 18)) as u32,
        _ => (object.len() as u32).max(1),
    };
    let twists: VecDeque<Twist> = rest[7..]
        .iter()
        .take(32)
        .map(|b| match b % 8 {
            0..=2 => Twist::Honest,
            3 => Twist::Cut(usize::from(b >> 3)),
            4 => Twist::Lengthen(usize::from(b >> 3)),
            5 => Twist::Flip(g.next_u64() as usize),
            6 => Twist::Error,
            _ => Twist::Garbage,
        })
        .collect();

    let rig = rig();
    *rig.peer.0.lock().unwrap() = Script {
        object: object.clone(),
        size,
        chunk_size,
        twists,
        served: Vec::new(),
    };
    let result = runtime().block_on(async {
        // A fresh client and book per input: scores and bans of one run do not leak into the next.
        let mut config = PublicOverlayClientConfig::default();
        config.neighbors.query_timeout = Duration::from_secs(5);
        config.neighbors.enable_metrics = false;
        let book = PeerBook::in_memory(&config.neighbors)
            .with_bootstrap_peers([rig.server.signed_peer_info(Duration::from_secs(3600))]);
        let overlay = PublicOverlayClient::with_peer_book(
            rig.client_node.network.clone(),
            rig.client_node.overlay.clone(),
            config,
            Arc::new(book),
        );
        let client = BlockchainRpcClient::builder()
            .with_overlay_client(overlay)
            .with_config(BlockchainRpcClientConfig {
                max_block_size: bytesize::ByteSize::b(MAX_BLOCK),
                download_retries: 2,
                ..Default::default()
            })
            .build()
            .expect("client");
        let id = BlockId {
            shard: ShardIdent::BASECHAIN,
            seqno: 1,
            root_hash: Default::default(),
            file_hash: Default::default(),
        };
        client.get_block_full(&id, DataRequirement::Optional).await
    });
    let served = std::mem::take(&mut rig.peer.0.lock().unwrap().served);
    if let Ok(found) = result {
        if let Some(full) = found.data {
            assert!(full.block.len() as u64 <= MAX_BLOCK, "over the limit");
            // The last answer at each offset is the one the client kept (an earlier one was retried).
            let mut by_offset = std::collections::BTreeMap::new();
            for (offset, data) in served {
                by_offset.insert(offset, data);
            }
            let mut stream = Vec::new();
            for (offset, data) in by_offset {
                assert_eq!(offset as usize, stream.len(), "chunks are contiguous");
                stream.extend_from_slice(&data);
            }
            assert_eq!(stream.len(), size as usize, "exactly the announced size");
            let decoded = zstd::stream::decode_all(&stream[..]).expect("what was accepted decodes");
            assert!(decoded == full.block, "the block is the decoding of what was served");
        }
    }
});
