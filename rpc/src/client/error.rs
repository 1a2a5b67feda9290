//! Errors of the blockchain RPC client (rpc.md §7).

/// What a client call failed with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// No neighbour with a weight above 0 (or none left to try).
    #[error("no neighbours")]
    NoNeighbours,
    /// No neighbour has the data.
    #[error("not found")]
    NotFound,
    /// A transport error.
    #[error("network error: {0}")]
    Network(String),
    /// An answer that does not decode, or data that fails a check.
    #[error("invalid response: {0}")]
    InvalidResponse(String),
    /// The neighbour answered `response.err(code)`.
    #[error("request failed with code {0}")]
    RequestFailed(u32),
    /// The query timed out.
    #[error("timeout")]
    Timeout,
    /// A local failure (a sink, a task).
    #[error("internal error: {0}")]
    Internal(String),
}
