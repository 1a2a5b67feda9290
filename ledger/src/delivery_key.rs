//! The delivery identity (ledger.md §1): a transport context plus the transport's message id, hashed with
//! BLAKE3-256 over an unambiguous encoding. It answers only "was this very delivery already processed?"; it
//! is never confused with the announcement (course, edition) or the content digest.
//!
//! Encoding, in this order: the domain tag (u32 LE length ‖ bytes), one version byte, then every field as
//! u32 LE length ‖ UTF-8 bytes. Length prefixes keep ("ab","c") and ("a","bc") apart.

use serde::{Deserialize, Serialize};

use crate::hash_bytes::hash_bytes;

/// Version byte of both encodings below; a change of layout gets a new version.
const ENCODING_VERSION: u8 = 1;
/// Domain tag of delivery keys.
const DELIVERY_KEY_TAG: &[u8] = b"regolith-ledger/delivery-key";
/// Domain tag of context ids, distinct so a context id never equals any delivery key.
const CONTEXT_ID_TAG: &[u8] = b"regolith-ledger/transport-context";

hash_bytes! {
    /// BLAKE3-256 of (transport context, message id): the identity of one delivery.
    DeliveryKey
}

hash_bytes! {
    /// BLAKE3-256 of a transport context alone: the scope of a floor (§4).
    ContextId
}

/// Where a message travelled: a message id means something only inside its context (§1).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TransportContext {
    /// The network the message comes from.
    pub source_network: String,
    /// The instance (contract, account) that sent it.
    pub sending_instance: String,
    /// The receiving instance it was addressed to.
    pub target_instance: String,
    /// The transport that carried it (e.g. its protocol name).
    pub transport: String,
}

impl TransportContext {
    /// A context from its four fields.
    pub fn new(
        source_network: impl Into<String>,
        sending_instance: impl Into<String>,
        target_instance: impl Into<String>,
        transport: impl Into<String>,
    ) -> Self {
        Self {
            source_network: source_network.into(),
            sending_instance: sending_instance.into(),
            target_instance: target_instance.into(),
            transport: transport.into(),
        }
    }

    /// The fields with their names, in encoding order.
    pub fn fields(&self) -> [(&'static str, &str); 4] {
        [
            ("source_network", &self.source_network),
            ("sending_instance", &self.sending_instance),
            ("target_instance", &self.target_instance),
            ("transport", &self.transport),
        ]
    }

    /// The id of this context (the key of its floor).
    pub fn id(&self) -> ContextId {
        let mut hasher = tagged_hasher(CONTEXT_ID_TAG);
        for (_, value) in self.fields() {
            put_field(&mut hasher, value.as_bytes());
        }
        ContextId(*hasher.finalize().as_bytes())
    }

    /// The key of the delivery of `message_id` in this context.
    pub fn delivery_key(&self, message_id: &str) -> DeliveryKey {
        let mut hasher = tagged_hasher(DELIVERY_KEY_TAG);
        for (_, value) in self.fields() {
            put_field(&mut hasher, value.as_bytes());
        }
        put_field(&mut hasher, message_id.as_bytes());
        DeliveryKey(*hasher.finalize().as_bytes())
    }
}

impl std::fmt::Display for TransportContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:?}/{:?}/{:?}/{:?}",
            self.source_network, self.sending_instance, self.target_instance, self.transport
        )
    }
}

fn tagged_hasher(tag: &[u8]) -> blake3::Hasher {
    let mut hasher = blake3::Hasher::new();
    put_field(&mut hasher, tag);
    hasher.update(&[ENCODING_VERSION]);
    hasher
}

fn put_field(hasher: &mut blake3::Hasher, bytes: &[u8]) {
    // Field lengths are bounded by validation far below u32::MAX; saturate rather than wrap regardless.
    let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
    hasher.update(&len.to_le_bytes());
    hasher.update(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context(transport: &str) -> TransportContext {
        TransportContext::new("eth", "0xsender", "mirror-17", transport)
    }

    #[test]
    fn field_boundaries_matter() {
        assert_ne!(
            context("ab").delivery_key("c"),
            context("a").delivery_key("bc")
        );
        let left = TransportContext::new("ab", "c", "t", "x");
        let right = TransportContext::new("a", "bc", "t", "x");
        assert_ne!(left.id(), right.id());
        assert_ne!(left.delivery_key("m"), right.delivery_key("m"));
    }

    #[test]
    fn message_id_is_scoped_by_context() {
        assert_ne!(
            context("ccip").delivery_key("m-1"),
            context("bridge").delivery_key("m-1")
        );
        assert_eq!(
            context("ccip").delivery_key("m-1"),
            context("ccip").delivery_key("m-1")
        );
    }

    #[test]
    fn context_id_is_not_a_delivery_key() {
        let ctx = context("ccip");
        assert_ne!(ctx.id().0, ctx.delivery_key("").0);
    }

    #[test]
    fn encoding_is_stable() {
        // Pinned so an accidental change of layout (which would forget every processed delivery) fails here.
        let mut expected = blake3::Hasher::new();
        expected.update(&(DELIVERY_KEY_TAG.len() as u32).to_le_bytes());
        expected.update(DELIVERY_KEY_TAG);
        expected.update(&[1]);
        for field in ["eth", "0xsender", "mirror-17", "ccip", "m-1"] {
            expected.update(&(field.len() as u32).to_le_bytes());
            expected.update(field.as_bytes());
        }
        assert_eq!(
            context("ccip").delivery_key("m-1").0,
            *expected.finalize().as_bytes()
        );
    }

    #[test]
    fn hex_round_trip() {
        let key = context("ccip").delivery_key("m-1");
        assert_eq!(DeliveryKey::from_hex(&key.to_string()).unwrap(), key);
        assert!(DeliveryKey::from_hex("abcd")
            .unwrap_err()
            .contains("expected 32 bytes, got 2"));
        assert!(DeliveryKey::from_hex("zz").unwrap_err().contains("not hex"));
    }
}
