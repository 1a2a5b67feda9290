//! What the fuzz targets share: the fixtures directory, one tokio runtime per process, the RPC service over
//! the imported fixture chain (built once per process), a deterministic splitter for streaming targets, and
//! the canonical encodings used by the round-trip checks.

use std::path::PathBuf;
use std::sync::OnceLock;

use regolith_formats::BlockId;
use regolith_rpc::proto::{self, RpcRequest};
use regolith_rpc::{BlockchainRpcService, StorageProvider};
use regolith_storage::Storage;

/// `$REGOLITH_FIXTURES`, or `../shared/fixtures` beside the repository.
pub fn fixtures_dir() -> PathBuf {
    std::env::var_os("REGOLITH_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures"))
}

/// The process's tokio runtime (one worker: the fuzzer itself is single-threaded).
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("tokio runtime")
    })
}

/// A node's RPC service over the fixture chain (zerostate + archive 1, committed), in a temp dir.
pub struct FixtureNode {
    /// The service, as the node installs it in the overlay.
    pub service: BlockchainRpcService,
    /// The storage it serves.
    pub storage: Storage,
    /// The ids of the 107 blocks of archive 1.
    pub block_ids: Vec<BlockId>,
    _dir: tempfile::TempDir,
}

/// The fixture node, imported on first use (a few seconds, once per process).
pub fn fixture_node() -> &'static FixtureNode {
    static NODE: OnceLock<FixtureNode> = OnceLock::new();
    NODE.get_or_init(|| {
        runtime().block_on(async {
            let dir = tempfile::tempdir().expect("temp dir");
            let listen = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
            let (_, config, storage) =
                regolith_testbed::fixture::import_fixture_chain(dir.path(), &fixtures_dir(), listen)
                    .await
                    .expect(
                        "importing the fixture chain (set REGOLITH_FIXTURES to the fixtures dir)",
                    );
            regolith_testbed::fixture::start_next_archive(&storage)
                .await
                .expect("committing archive 1");
            let service = BlockchainRpcService::builder()
                .with_storage(storage.clone())
                .with_provider(StorageProvider::new(storage.clone(), 4))
                .without_broadcast_listener()
                .with_config(config.blockchain_rpc_service.clone())
                .build();
            FixtureNode {
                service,
                storage,
                block_ids: archive_block_ids(),
                _dir: dir,
            }
        })
    })
}

/// The ids of the blocks of `archive_1.bin`, in archive order.
pub fn archive_block_ids() -> Vec<BlockId> {
    let file = std::fs::File::open(fixtures_dir().join("archive_1.bin")).expect("archive_1.bin");
    let mut reader =
        regolith_formats::archive::ArchiveReader::new_compressed(std::io::BufReader::new(file))
            .expect("zstd");
    let mut ids = Vec::new();
    while let Some(entry) = reader.next_entry().expect("archive_1 reads") {
        if entry.ty == regolith_formats::archive::ArchiveEntryType::Block {
            ids.push(entry.block_id);
        }
    }
    ids
}

/// A small deterministic generator (xorshift64*), for split points drawn from the input itself.
pub struct Splitter(u64);

impl Splitter {
    /// Seeded from up to 8 bytes (zero is replaced, as xorshift never leaves it).
    pub fn new(seed: &[u8]) -> Self {
        let mut bytes = [0u8; 8];
        bytes[..seed.len().min(8)].copy_from_slice(&seed[..seed.len().min(8)]);
        Self(u64::from_le_bytes(bytes) | 1)
    }

    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Splits `data` into pieces of 0..=`max` bytes (empty pieces included: a writer may be handed one).
    pub fn pieces<'a>(&mut self, mut data: &'a [u8], max: usize) -> Vec<&'a [u8]> {
        let mut out = Vec::new();
        while !data.is_empty() {
            let n = (self.next_u64() as usize % (max + 1)).min(data.len());
            let (head, tail) = data.split_at(n);
            out.push(head);
            data = tail;
        }
        out
    }
}

/// Encodes a decoded request again (every request field has a fixed size, so the encoding is canonical).
pub fn encode_request(request: &RpcRequest) -> Vec<u8> {
    request.encode()
}

/// Decodes `bytes` as `overlay.response` of `T`, then checks that re-encoding is stable.
///
/// TL `bytes` is not a canonical encoding (padding bytes are not checked, and the 4-byte length form is
/// accepted for short lengths), so the check is decode(encode(decode(x))) == decode(x) and, from there on,
/// encode ∘ decode is the identity.
pub fn response_round_trip<T>(bytes: &[u8]) -> Option<proto::OverlayResponse<T>>
where
    T: for<'a> tl_proto::TlRead<'a, Repr = tl_proto::Boxed>
        + tl_proto::TlWrite<Repr = tl_proto::Boxed>
        + PartialEq
        + std::fmt::Debug
        + Clone,
{
    let value = tl_proto::deserialize::<proto::OverlayResponse<T>>(bytes).ok()?;
    let encoded = tl_proto::serialize(value.clone());
    let again = tl_proto::deserialize::<proto::OverlayResponse<T>>(&encoded)
        .expect("a re-encoded response decodes");
    assert_eq!(again, value, "decode(encode(decode(x))) != decode(x)");
    assert_eq!(
        tl_proto::serialize(again),
        encoded,
        "encoding is not stable"
    );
    Some(value)
}

/// Whether two JSON texts hold the same value, floats compared to 1e-12 relative: serde_json (without its
/// `float_roundtrip` feature, as the node builds it) may read a printed f64 back one ulp away, so float fields
/// do not round-trip bit for bit; everything else must.
pub fn same_json(a: &str, b: &str) -> bool {
    fn same(a: &serde_json::Value, b: &serde_json::Value) -> bool {
        use serde_json::Value;
        match (a, b) {
            (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
                let (x, y) = (
                    x.as_f64().unwrap_or(f64::NAN),
                    y.as_f64().unwrap_or(f64::NAN),
                );
                x == y || (x - y).abs() <= 1e-12 * x.abs().max(y.abs())
            }
            (Value::Array(x), Value::Array(y)) => {
                x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y))
            }
            (Value::Object(x), Value::Object(y)) => {
                x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
            }
            _ => a == b,
        }
    }
    match (serde_json::from_str(a), serde_json::from_str(b)) {
        (Ok(a), Ok(b)) => same(&a, &b),
        _ => false,
    }
}

/// The fixture mc zerostate, parsed once per process.
pub fn fixture_zerostate() -> &'static regolith_formats::zerostate::McZerostate {
    static ZEROSTATE: OnceLock<regolith_formats::zerostate::McZerostate> = OnceLock::new();
    ZEROSTATE.get_or_init(|| {
        let raw = std::fs::read(fixtures_dir().join("zerostate.boc")).expect("zerostate.boc");
        regolith_formats::zerostate::McZerostate::parse(&raw).expect("the fixture zerostate")
    })
}
