//! The JSON form of a delivery, one per line in an indexer's event stream (`regolith ledger apply-batch`):
//!
//! ```json
//! {"schema":1,"context":{"source_network":"eth","sending_instance":"0xpublisher","target_instance":"mirror-17",
//!  "transport":"ccip"},"message_id":"0x1f..","sequence":400,"course":"C17","edition":2,"digest":"<64 hex>"}
//! ```
//!
//! `schema` defaults to 1 and `sequence` is optional; unknown fields are refused so that a misspelt optional
//! field is not silently dropped. A line that is not such an object is `Rejected` at the `decode` stage; a
//! line that is but carries bad values (empty ids, a digest of the wrong length, another schema) is
//! `Rejected` at `validate`. Either way nothing is recorded.

use serde::{Deserialize, Serialize};

use crate::delivery::{Delivery, SCHEMA_VERSION};
use crate::delivery_key::TransportContext;
use crate::error::Result;
use crate::ledger::Ledger;
use crate::outcome::{Outcome, OutcomeKind, Stage};

/// One delivery as a JSON object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeliveryEvent {
    /// Announcement schema version (default 1).
    #[serde(default = "default_schema")]
    pub schema: u32,
    /// Transport context.
    pub context: TransportContext,
    /// Transport message id.
    pub message_id: String,
    /// Transport sequence within the context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence: Option<u64>,
    /// Course id.
    pub course: String,
    /// Edition (a JSON integer).
    pub edition: u64,
    /// SHA-256 of the manifest, hex.
    pub digest: String,
}

fn default_schema() -> u32 {
    SCHEMA_VERSION
}

impl DeliveryEvent {
    /// Parses one line; the error says what is wrong with it (serde's message names line and column).
    pub fn parse(line: &[u8]) -> Result<Self, String> {
        let text = std::str::from_utf8(line).map_err(|e| format!("line is not UTF-8: {e}"))?;
        serde_json::from_str(text).map_err(|e| format!("not a delivery event: {e}"))
    }

    /// The delivery it describes; fails only if the digest is not hex (its length is checked by `apply`).
    pub fn into_delivery(self) -> Result<Delivery, String> {
        let digest = hex::decode(&self.digest).map_err(|e| format!("digest is not hex: {e}"))?;
        Ok(Delivery {
            schema_version: self.schema,
            context: self.context,
            message_id: self.message_id,
            sequence: self.sequence,
            course: self.course,
            edition: self.edition,
            digest,
        })
    }

    /// The event describing `delivery`.
    pub fn from_delivery(delivery: &Delivery) -> Self {
        Self {
            schema: delivery.schema_version,
            context: delivery.context.clone(),
            message_id: delivery.message_id.clone(),
            sequence: delivery.sequence,
            course: delivery.course.clone(),
            edition: delivery.edition,
            digest: hex::encode(&delivery.digest),
        }
    }
}

impl Ledger {
    /// Applies one JSON line of an event stream: decoding failures become `Rejected` at the `decode` stage.
    pub fn apply_json_line(&self, line: &[u8]) -> Result<Outcome> {
        match DeliveryEvent::parse(line).and_then(DeliveryEvent::into_delivery) {
            Ok(delivery) => self.apply(&delivery),
            Err(reason) => {
                self.session.count(OutcomeKind::Rejected);
                Ok(Outcome::rejected(Stage::Decode, None, reason))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = r#"{"context":{"source_network":"eth","sending_instance":"0xp","target_instance":"m","transport":"ccip"},"message_id":"m-1","sequence":7,"course":"C17","edition":10,"digest":"0707070707070707070707070707070707070707070707070707070707070707"}"#;

    #[test]
    fn parses_and_round_trips() {
        let event = DeliveryEvent::parse(LINE.as_bytes()).unwrap();
        assert_eq!(event.schema, 1);
        let delivery = event.clone().into_delivery().unwrap();
        assert_eq!(delivery.edition, 10);
        assert_eq!(delivery.sequence, Some(7));
        assert_eq!(delivery.digest, vec![7; 32]);
        assert_eq!(DeliveryEvent::from_delivery(&delivery), event);
    }

    #[test]
    fn decode_errors_name_the_problem() {
        let cases = [
            (
                LINE.replace("\"edition\":10", "\"edition\":\"10\""),
                "invalid type: string \"10\"",
            ),
            (
                LINE.replace("\"sequence\"", "\"sequnce\""),
                "unknown field `sequnce`",
            ),
            (
                LINE.replace("\"edition\":10", "\"edition\":-1"),
                "invalid value: integer `-1`",
            ),
            (LINE[..40].to_string(), "EOF while parsing"),
        ];
        for (line, expected) in cases {
            let reason = DeliveryEvent::parse(line.as_bytes()).unwrap_err();
            assert!(
                reason.contains(expected),
                "{reason:?} should mention {expected:?}"
            );
        }
        assert!(DeliveryEvent::parse(&[0xff, 0xfe])
            .unwrap_err()
            .contains("not UTF-8"));
        let bad_hex = DeliveryEvent::parse(LINE.replace("\"0707", "\"zz07").as_bytes()).unwrap();
        assert!(bad_hex
            .into_delivery()
            .unwrap_err()
            .contains("digest is not hex"));
    }
}
