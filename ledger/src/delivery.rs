//! The input of [`crate::Ledger::apply`]: one delivery of an announcement, and its validation (the
//! `validate` stage of ledger.md §2 rule 6). A delivery that fails validation is rejected before anything is
//! read or written, so a corrected retry of the same message is still possible.

use crate::delivery_key::{ContextId, DeliveryKey, TransportContext};
use crate::hash_bytes::hash_bytes;

/// The announcement schema version this ledger understands.
pub const SCHEMA_VERSION: u32 = 1;

/// The longest id (context field, message id, course id) accepted, in bytes.
pub const MAX_ID_LEN: usize = 1024;

hash_bytes! {
    /// SHA-256 of a manifest's bytes: the content commitment of an edition (never a delivery key).
    Digest
}

/// One delivery of "course `course` has edition `edition` whose manifest has SHA-256 `digest`".
///
/// The source is already authenticated when a delivery reaches the ledger. `message_id` is the transport's
/// id, meaningful only inside `context`. `sequence` is the transport's position of the message within its
/// context when the transport has one; only sequenced deliveries can ever be pruned below a floor (§4),
/// deliveries without one stay recorded for good. `digest` is kept as raw bytes so that a wrong length is a
/// rejection that names the length rather than a type error at the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// Version of the announcement schema ([`SCHEMA_VERSION`]).
    pub schema_version: u32,
    /// The transport context of the message.
    pub context: TransportContext,
    /// The transport's message id (non-empty).
    pub message_id: String,
    /// The transport's sequence number of the message within `context`, if it has one.
    pub sequence: Option<u64>,
    /// The course id (non-empty).
    pub course: String,
    /// The edition, compared numerically.
    pub edition: u64,
    /// SHA-256 of the manifest: must be 32 bytes.
    pub digest: Vec<u8>,
}

impl Delivery {
    /// A delivery of the current schema without a sequence number.
    pub fn new(
        context: TransportContext,
        message_id: impl Into<String>,
        course: impl Into<String>,
        edition: u64,
        digest: impl Into<Vec<u8>>,
    ) -> Self {
        Self {
            schema_version: SCHEMA_VERSION,
            context,
            message_id: message_id.into(),
            sequence: None,
            course: course.into(),
            edition,
            digest: digest.into(),
        }
    }

    /// The same delivery with a transport sequence number.
    pub fn with_sequence(mut self, sequence: u64) -> Self {
        self.sequence = Some(sequence);
        self
    }

    /// The delivery key (computed whether or not the delivery is valid).
    pub fn key(&self) -> DeliveryKey {
        self.context.delivery_key(&self.message_id)
    }

    /// Checks the delivery; the error says which field is wrong and how.
    pub(crate) fn validate(&self) -> Result<Checked<'_>, String> {
        if self.schema_version != SCHEMA_VERSION {
            return Err(format!(
                "unknown schema version {} (this ledger reads version {SCHEMA_VERSION})",
                self.schema_version
            ));
        }
        for (name, value) in self.context.fields() {
            check_id(&format!("context.{name}"), value)?;
        }
        check_id("message_id", &self.message_id)?;
        check_id("course", &self.course)?;
        let digest = Digest::from_slice(&self.digest).map_err(|_| {
            format!(
                "digest must be 32 bytes (SHA-256), got {}",
                self.digest.len()
            )
        })?;
        Ok(Checked {
            key: self.key(),
            context_id: self.context.id(),
            sequence: self.sequence,
            course: &self.course,
            edition: self.edition,
            digest,
        })
    }
}

/// A delivery that passed validation, with its derived identities.
#[derive(Debug, Clone)]
pub(crate) struct Checked<'a> {
    pub key: DeliveryKey,
    pub context_id: ContextId,
    pub sequence: Option<u64>,
    pub course: &'a str,
    pub edition: u64,
    pub digest: Digest,
}

/// Checks one id: present and not absurdly long.
pub(crate) fn check_id(field: &str, value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Err(format!("{field} is empty"));
    }
    if value.len() > MAX_ID_LEN {
        return Err(format!(
            "{field} is {} bytes long (at most {MAX_ID_LEN})",
            value.len()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good() -> Delivery {
        Delivery::new(
            TransportContext::new("eth", "0xs", "mirror", "ccip"),
            "m-1",
            "C17",
            1,
            [7u8; 32],
        )
    }

    #[test]
    fn valid_delivery_passes() {
        let delivery = good().with_sequence(5);
        let checked = delivery.validate().unwrap();
        assert_eq!(checked.key, delivery.key());
        assert_eq!(checked.sequence, Some(5));
        assert_eq!(checked.digest, Digest([7; 32]));
    }

    #[test]
    fn each_malformation_is_named() {
        type Mutation = Box<dyn Fn(&mut Delivery)>;
        let cases: Vec<(Mutation, &str)> = vec![
            (
                Box::new(|d: &mut Delivery| d.schema_version = 2),
                "unknown schema version 2",
            ),
            (
                Box::new(|d: &mut Delivery| d.message_id.clear()),
                "message_id is empty",
            ),
            (
                Box::new(|d: &mut Delivery| d.course.clear()),
                "course is empty",
            ),
            (
                Box::new(|d: &mut Delivery| d.context.transport.clear()),
                "context.transport is empty",
            ),
            (
                Box::new(|d: &mut Delivery| d.context.source_network.clear()),
                "context.source_network is empty",
            ),
            (Box::new(|d: &mut Delivery| d.digest.truncate(31)), "got 31"),
            (Box::new(|d: &mut Delivery| d.digest.push(0)), "got 33"),
            (
                Box::new(|d: &mut Delivery| d.course = "x".repeat(MAX_ID_LEN + 1)),
                "course is 1025 bytes long",
            ),
        ];
        for (break_it, expected) in cases {
            let mut delivery = good();
            break_it(&mut delivery);
            let reason = delivery.validate().unwrap_err();
            assert!(
                reason.contains(expected),
                "{reason:?} should mention {expected:?}"
            );
        }
    }
}
