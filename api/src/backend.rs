//! The data source of the API ([`ApiBackend`]): what the node (or a test) hands the API for every method of
//! api.md §4, already decoded, and how it says "not ready", "no index" or "failed" (api.md §2, §6).

use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;
use tycho_types::cell::{Cell, HashBytes};
use tycho_types::models::{BlockId, ShardAccount, StdAddr};

/// The future every backend method returns: boxed so that the trait stays object-safe
/// (`Arc<dyn ApiBackend>`).
pub type BackendFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, BackendError>> + Send + 'a>>;

/// Why a backend could not answer. Each maps to one error code of api.md §2.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    /// Not initialised yet, no key block or config yet, or no cached shard for the workchain (-32001).
    #[error("not ready")]
    NotReady,
    /// The method needs what this node does not keep: the transactions index on a state-only node, or
    /// block proofs/data without `allow_huge_requests` (-32002).
    #[error("method not supported")]
    NotSupported,
    /// Anything else; the text goes to the client (-32000).
    #[error("{0}")]
    Internal(String),
}

/// What the node keeps, fixed at startup: it decides the capabilities list (api.md §4 getCapabilities) and
/// which methods answer -32002 without asking the backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BackendFeatures {
    /// Full-storage mode: the transactions index exists (getTransactionsList, getTransaction,
    /// getDstTransaction, getAccountsByCodeHash, getTransactionBlockId).
    pub transactions_index: bool,
    /// `allow_huge_requests`: getBlockProof and getBlockData are served.
    pub block_data: bool,
    /// getAccountsByCodeHash is served without the transactions index (from the newest states): nekoton's
    /// `check_connection` calls it.
    pub accounts_by_code_hash: bool,
}

/// The chain position behind getTimings (api.md §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McTimings {
    /// Seqno of the last processed masterchain block.
    pub last_mc_block_seqno: u32,
    /// Its `gen_utime`.
    pub last_mc_utime: u32,
    /// now − `last_mc_utime`, computed when that block was processed.
    pub mc_time_diff: i64,
    /// The smallest lt the transactions index holds: `None` on a state-only node, `Some(u64::MAX)` until the
    /// first block is indexed.
    pub smallest_known_lt: Option<u64>,
}

/// The node's status: getStatus and getTimings (api.md §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeStatus {
    /// Startup has finished (getStatus `ready`).
    pub ready: bool,
    /// The last processed masterchain block, once there is one.
    pub timings: Option<McTimings>,
}

/// `(gen_lt, gen_utime)` of the state an answer comes from (api.md §4 `TM`): of the shard block or of the
/// latest masterchain block, whichever has the larger lt (api.md §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GenTimings {
    /// The block's end lt.
    pub gen_lt: u64,
    /// The block's `gen_utime`.
    pub gen_utime: u32,
}

/// An account looked up in the latest state of its shard (api.md §4 getContractState, §6).
#[derive(Debug, Clone)]
pub struct AccountLookup {
    /// The timings of the state it was looked up in.
    pub timings: GenTimings,
    /// The entry of the shard's accounts dictionary (`None`: no entry). An entry may hold `account_none`.
    pub entry: Option<ShardAccount>,
}

/// The blockchain config of the latest key block (api.md §4 getBlockchainConfig, §10.8: complete, with
/// params 8, 15 and 34, which nekoton needs).
#[derive(Debug, Clone)]
pub struct ConfigSnapshot {
    /// The network's global id.
    pub global_id: i32,
    /// Seqno of the key block that supplied the config.
    pub seqno: u32,
    /// The config cell: the 256-bit config address and one reference to the params dictionary.
    pub config: Cell,
}

/// A stored key block's proof (api.md §4 getKeyBlockProof).
#[derive(Debug, Clone)]
pub struct KeyBlockProof {
    /// The key block.
    pub block_id: BlockId,
    /// Its proof BOC.
    pub proof: Bytes,
}

/// An external message that passed the checks of api.md §4 sendMessage, handed to the node to broadcast.
#[derive(Debug, Clone)]
pub struct ExternalMessage {
    /// The message BOC as the client sent it.
    pub boc: Bytes,
    /// Its root cell.
    pub root: Cell,
    /// The root's representation hash (the message hash).
    pub hash: HashBytes,
    /// The destination account.
    pub dst: StdAddr,
}

/// Everything the API reads from the node, one method per need of api.md §4. Methods of the transactions
/// index may answer [`BackendError::NotSupported`] (-32002) when the node keeps no index; the API does not call
/// them at all when [`BackendFeatures::transactions_index`] is false.
pub trait ApiBackend: Send + Sync + 'static {
    /// What the node keeps; read once at startup.
    fn features(&self) -> BackendFeatures;

    /// Readiness and the chain position.
    fn status(&self) -> BackendFuture<'_, NodeStatus>;

    /// The config of the latest key block; `None` until one is known (-32001).
    fn blockchain_config(&self) -> BackendFuture<'_, Option<ConfigSnapshot>>;

    /// The latest key block's BOC (the whole block); `None` until one with data exists (-32001).
    fn latest_key_block(&self) -> BackendFuture<'_, Option<Bytes>>;

    /// The account at `address` in the latest state of its shard. [`BackendError::NotReady`] before
    /// initialisation and for a workchain with no cached shard.
    fn account_state<'a>(&'a self, address: &'a StdAddr) -> BackendFuture<'a, AccountLookup>;

    /// A library cell of the latest masterchain state, by its hash.
    fn library_cell<'a>(&'a self, hash: &'a HashBytes) -> BackendFuture<'a, Option<Cell>>;

    /// The proof of the key block with this seqno; `None` when it is not a stored key block.
    fn key_block_proof(&self, seqno: u32) -> BackendFuture<'_, Option<KeyBlockProof>>;

    /// A block's proof BOC (getBlockProof, only with [`BackendFeatures::block_data`]).
    fn block_proof<'a>(&'a self, block_id: &'a BlockId) -> BackendFuture<'a, Option<Bytes>>;

    /// A block's data BOC (getBlockData, only with [`BackendFeatures::block_data`]).
    fn block_data<'a>(&'a self, block_id: &'a BlockId) -> BackendFuture<'a, Option<Bytes>>;

    /// Up to `limit` (1..=100) transaction BOCs of `account`, newest first, each with lt ≤ `last_lt` when
    /// given (inclusive). An unknown account gives an empty list.
    fn transactions<'a>(
        &'a self,
        account: &'a StdAddr,
        last_lt: Option<u64>,
        limit: u8,
    ) -> BackendFuture<'a, Vec<Bytes>>;

    /// A transaction BOC by its hash.
    fn transaction<'a>(&'a self, hash: &'a HashBytes) -> BackendFuture<'a, Option<Bytes>>;

    /// The transaction BOC whose inbound message (internal or external) has this representation hash.
    fn dst_transaction<'a>(
        &'a self,
        message_hash: &'a HashBytes,
    ) -> BackendFuture<'a, Option<Bytes>>;

    /// The block that holds the transaction with this hash.
    fn transaction_block_id<'a>(
        &'a self,
        hash: &'a HashBytes,
    ) -> BackendFuture<'a, Option<BlockId>>;

    /// Up to `limit` (1..=100) addresses of active accounts whose code cell has this hash, ordered by
    /// workchain taken as an unsigned byte, then account id, strictly after `continuation` when given.
    fn accounts_by_code_hash<'a>(
        &'a self,
        code_hash: &'a HashBytes,
        continuation: Option<&'a StdAddr>,
        limit: u8,
    ) -> BackendFuture<'a, Vec<StdAddr>>;

    /// Broadcasts a checked external message; returns without waiting for a transaction.
    fn send_message(&self, message: ExternalMessage) -> BackendFuture<'_, ()>;
}
