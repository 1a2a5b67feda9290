//! External messages through a running node: the valid broadcasts it receives from peers, and the messages
//! local users post to its HTTP API (`POST /v1/messages`, and the account API's sendMessage), go out as broadcasts to the current validator
//! targets (which follow the newest applied key block, [`crate::trust::key_blocks::track_validator_set`]). A message
//! is relayed once per [`DEDUP_WINDOW`]: the same hash again within it is counted and dropped, so two
//! nodes that relay to each other never loop a message.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use parking_lot::Mutex;
use regolith_rpc::client::BlockchainRpcClient;
use tycho_network::InboundRequestMeta;
use tycho_types::cell::{Cell, HashBytes};

/// A message hash seen within this window is not relayed again.
pub const DEDUP_WINDOW: Duration = Duration::from_secs(60);
/// Hashes remembered at most (the oldest go first).
const DEDUP_CAPACITY: usize = 100_000;

/// What happened to a submitted message.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Submitted {
    /// The message's hash (its root cell's representation hash).
    pub hash: String,
    /// Validator targets that got it (0 for a duplicate); a live node's own producer counts as one.
    pub targets: usize,
    /// The same message was relayed within the window: it was not sent again.
    pub duplicate: bool,
}

/// Why a message was refused.
#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    /// Not a valid external message (rpc.md §5.4).
    #[error("{0}")]
    Invalid(String),
    /// The node's client is not running yet.
    #[error("the node is not connected yet")]
    NotReady,
}

/// The relay of one node.
#[derive(Default)]
pub struct ExternalRelay {
    client: OnceLock<BlockchainRpcClient>,
    /// A live node's producer ([`crate::live`]): it collates what the node relays.
    producer: OnceLock<tokio::sync::mpsc::Sender<Cell>>,
    seen: Mutex<Seen>,
}

#[derive(Default)]
struct Seen {
    at: HashMap<HashBytes, Instant>,
    order: VecDeque<(Instant, HashBytes)>,
}

impl Seen {
    /// Records `hash` now; false if it was seen within the window.
    fn first_in_window(&mut self, hash: HashBytes, now: Instant) -> bool {
        while let Some((at, old)) = self.order.front().copied() {
            if now.duration_since(at) < DEDUP_WINDOW && self.order.len() < DEDUP_CAPACITY {
                break;
            }
            self.order.pop_front();
            if self.at.get(&old) == Some(&at) {
                self.at.remove(&old);
            }
        }
        if self.at.contains_key(&hash) {
            return false;
        }
        self.at.insert(hash, now);
        self.order.push_back((now, hash));
        true
    }
}

impl ExternalRelay {
    /// A relay that sends through `client` once it is set ([`Self::connect`]).
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    /// Sets the client the relay sends through (once).
    pub fn connect(&self, client: BlockchainRpcClient) {
        let _ = self.client.set(client);
    }

    /// Also hands every message it relays to a live node's producer (once).
    pub fn deliver_locally_to(&self, producer: tokio::sync::mpsc::Sender<Cell>) {
        let _ = self.producer.set(producer);
    }

    /// Checks `boc` as an external message and relays it to the validator targets, once per window.
    pub async fn submit(&self, boc: &[u8], source: &'static str) -> Result<Submitted, SubmitError> {
        metrics::counter!("regolith_external_messages_total", "source" => source).increment(1);
        if let Err(e) = regolith_rpc::broadcast::validate_external_message(boc) {
            metrics::counter!("regolith_external_messages_invalid_total", "source" => source)
                .increment(1);
            return Err(SubmitError::Invalid(e.to_string()));
        }
        let root = tycho_types::boc::Boc::decode(boc)
            .map_err(|e| SubmitError::Invalid(format!("not a BOC: {e}")))?;
        let hash = *root.repr_hash();
        let client = self.client.get().ok_or(SubmitError::NotReady)?;
        if !self.seen.lock().first_in_window(hash, Instant::now()) {
            metrics::counter!("regolith_external_messages_duplicate_total", "source" => source)
                .increment(1);
            return Ok(Submitted {
                hash: hash.to_string(),
                targets: 0,
                duplicate: true,
            });
        }
        let mut targets = client.broadcast_external_message(boc).await;
        if let Some(producer) = self.producer.get() {
            match producer.try_send(root) {
                Ok(()) => targets += 1,
                Err(e) => {
                    metrics::counter!("regolith_live_externals_dropped_total").increment(1);
                    tracing::warn!(%hash, error = %e, "the live chain's producer cannot take the message");
                }
            }
        }
        metrics::counter!("regolith_external_messages_relayed_total", "source" => source)
            .increment(1);
        metrics::counter!("regolith_external_message_deliveries_total").increment(targets as u64);
        Ok(Submitted {
            hash: hash.to_string(),
            targets,
            duplicate: false,
        })
    }
}

#[async_trait]
impl regolith_rpc::BroadcastListener for ExternalRelay {
    async fn handle_message(&self, meta: Arc<InboundRequestMeta>, message: Bytes) {
        match self.submit(&message, "network").await {
            Ok(done) => {
                tracing::debug!(peer = %meta.peer_id, hash = %done.hash, targets = done.targets, duplicate = done.duplicate, "external message relayed");
            }
            Err(e) => {
                tracing::debug!(peer = %meta.peer_id, error = %e, "external message not relayed");
            }
        }
    }
}

/// Submits a posted message body and answers with a status and JSON (`POST /v1/messages`).
pub(crate) async fn answer(relay: &ExternalRelay, body: &[u8]) -> (u16, serde_json::Value) {
    let boc = match decode_body(body) {
        Ok(boc) => boc,
        Err(e) => return (400, serde_json::json!({ "error": e })),
    };
    match relay.submit(&boc, "http").await {
        Ok(done) => (200, serde_json::to_value(done).unwrap_or_default()),
        Err(e @ SubmitError::Invalid(_)) => (400, serde_json::json!({"error": e.to_string()})),
        Err(e @ SubmitError::NotReady) => (503, serde_json::json!({"error": e.to_string()})),
    }
}

/// A binary BOC as it is (it starts with the BOC magic), otherwise base64 text.
fn decode_body(body: &[u8]) -> Result<Vec<u8>, String> {
    use base64::Engine;
    const BOC_MAGIC: [u8; 4] = [0xb5, 0xee, 0x9c, 0x72];
    if body.starts_with(&BOC_MAGIC) {
        return Ok(body.to_vec());
    }
    let text = std::str::from_utf8(body).map_err(|_| "the body is neither a BOC nor base64")?;
    base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .map_err(|e| format!("the body is neither a BOC nor base64: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hash_is_relayed_once_per_window() {
        let mut seen = Seen::default();
        let t0 = Instant::now();
        let h = HashBytes([7; 32]);
        assert!(seen.first_in_window(h, t0));
        assert!(!seen.first_in_window(h, t0 + Duration::from_secs(1)));
        assert!(seen.first_in_window(HashBytes([8; 32]), t0 + Duration::from_secs(2)));
        assert!(seen.first_in_window(h, t0 + DEDUP_WINDOW + Duration::from_secs(1)));
    }

    #[test]
    fn bodies_are_binary_or_base64() {
        use base64::Engine;
        let boc = [0xb5, 0xee, 0x9c, 0x72, 1, 2, 3];
        assert_eq!(decode_body(&boc).unwrap(), boc);
        let text = base64::engine::general_purpose::STANDARD.encode(boc);
        assert_eq!(decode_body(format!(" {text}\n").as_bytes()).unwrap(), boc);
        assert!(decode_body(b"not base64 !").is_err());
    }
}
