//! The account API over a real server on 127.0.0.1, over HTTP/1.1 and h2c, with a backend made of a real
//! generated chain (api.md §1–§4, §7, §10).

mod chain_backend;
mod client;
mod http;
mod jrpc_envelope;
mod jrpc_methods;
mod proto;

use std::sync::Arc;

use regolith_api::{ApiConfig, ApiServer};

use crate::chain_backend::ChainBackend;

/// A config on a free loopback port.
pub(crate) fn config() -> ApiConfig {
    ApiConfig {
        listen_addr: "127.0.0.1:0".parse().unwrap(),
        ..ApiConfig::default()
    }
}

/// Starts a server over `backend` with the default config.
pub(crate) async fn start(backend: Arc<ChainBackend>) -> ApiServer {
    regolith_api::serve(config(), backend, axum::Router::new())
        .await
        .unwrap()
}
