//! The HTTP account and chain API of a regolith node (api.md): the JSON-RPC and protobuf methods that wallets
//! and dApps (nekoton's `JrpcTransport` and `ProtoTransport`) call, over a data source the node implements.
//!
//! - [`backend`]: the [`ApiBackend`] trait, what the API reads from the node, already decoded;
//! - [`config`]: [`ApiConfig`], the listen address, body limit, timeout and rate limit;
//! - [`serve`] starts the server (HTTP/1.1 and h2c on one port) with extra routes beside the API's, and
//!   [`router`] builds its routes for embedding;
//! - [`index`]: the transactions index ([`index::TransactionsIndex`]), its own RocksDB;
//! - [`proto`]: the protobuf messages (api.md §7), for clients and tests;
//! - [`register_metrics`]: the `regolith_api_*` metrics.
//!
//! Internals: `jrpc` (the JSON-RPC envelope, parameters and results), `methods` (every method's checks and
//! limits), `encoding` (the value encodings of api.md §3), `ext_message` (sendMessage's checks), `error` (the
//! codes of api.md §2), `rate_limit`, `server`.

pub mod backend;
pub mod config;
mod encoding;
mod error;
mod ext_message;
pub mod index;
mod jrpc;
mod methods;
mod metrics;
pub mod proto;
mod rate_limit;
mod server;

pub use backend::{
    AccountLookup, ApiBackend, BackendError, BackendFeatures, BackendFuture, ConfigSnapshot,
    ExternalMessage, GenTimings, KeyBlockProof, McTimings, NodeStatus,
};
pub use config::{ApiConfig, ApiSettings, IndexGcConfig, RateLimit};
pub use error::ApiError;
pub use metrics::register_metrics;
pub use server::{router, serve, ApiServer, ServeError};
