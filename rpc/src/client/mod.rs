//! The downloading half of blockchain RPC (rpc.md §5.1–§5.2, §7, §8): the [`PublicOverlayClient`] with its
//! neighbour set, scores and tasks, and the [`BlockchainRpcClient`] built on it.

mod blockchain_client;
mod broadcast_timeout;
mod download;
mod error;
mod history;
mod neighbour;
mod neighbours;
mod overlay_client;
mod peer_book;

pub use blockchain_client::{
    ArchiveSearch, BlockDataFull, BlockDataFullWithNeighbour, BlockchainRpcClient,
    BlockchainRpcClientBuilder, DataRequirement, NextBlocksBatch, OwnMessageListener,
    PendingArchive, PendingPersistentState, PendingStatePart,
};
pub use broadcast_timeout::BroadcastTimeout;
pub use download::{download_with_retries, VerifyingSink, MAX_IN_FLIGHT};
pub use error::ClientError;
pub use history::RequestHistory;
pub use neighbour::{Neighbour, Outcome, Punishment, INITIAL_SCORE, MAX_SCORE, RELIABLE_SCORE};
pub use neighbours::{Candidate, NeighbourType, Neighbours};
pub use overlay_client::{PublicOverlayClient, QueryHandle, QueryResponse};
pub use peer_book::{Ban, PeerBook, PeerBookError};
