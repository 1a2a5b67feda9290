//! Value encodings of the JSON API (api.md §3): lt values as decimal strings, BOCs as padded standard base64,
//! block ids as `wc:shard:seqno:root:file`. Addresses (`wc:hex`, lowercase out, standard only) and hashes
//! (hex, either case in, lowercase out) use tycho-types' own serde forms, which are exactly those of §3 and
//! §10.6.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde::de::{Error as _, Visitor};
use serde::{Deserializer, Serializer};
use tycho_types::models::BlockId;

use crate::ext_message::MAX_BOC_SIZE;

/// A BOC as padded standard base64 (api.md §3, §10.6).
pub(crate) fn base64_encode(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

/// Serialises `u64` as a decimal string (api.md §3: lt values in results, §10.2).
pub(crate) fn serialize_u64_string<S: Serializer>(value: &u64, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(value)
}

/// An optional lt parameter: a decimal string, `null` or absent; a JSON number is an error (api.md §3, §10.4).
pub(crate) fn deserialize_optional_lt<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<u64>, D::Error> {
    struct LtVisitor;

    impl<'de> Visitor<'de> for LtVisitor {
        type Value = Option<u64>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a decimal u64 string or null")
        }

        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_str(self)
        }

        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
            v.parse::<u64>().map(Some).map_err(E::custom)
        }
    }

    d.deserialize_option(LtVisitor)
}

/// A message BOC parameter in base64 (api.md §4 sendMessage step 1): an estimated decoded size of 65535 bytes
/// or more is `slice is too big`, bad base64 is `invalid base64`.
pub(crate) fn deserialize_message_boc<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<bytes::Bytes, D::Error> {
    struct BocVisitor;

    impl Visitor<'_> for BocVisitor {
        type Value = bytes::Bytes;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a base64 BOC")
        }

        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
            if base64::decoded_len_estimate(v.len()) >= MAX_BOC_SIZE {
                return Err(E::custom("slice is too big"));
            }
            STANDARD
                .decode(v)
                .map(bytes::Bytes::from)
                .map_err(|_| E::custom("invalid base64"))
        }
    }

    d.deserialize_str(BocVisitor)
}

/// Serialises a block id as `wc:shard16hex:seqno:root_hex:file_hex` (api.md §3).
pub(crate) fn serialize_block_id<S: Serializer>(id: &BlockId, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(id)
}

/// Parses a block id of the form `wc:shard16hex:seqno:root_hex:file_hex` (api.md §3).
pub(crate) fn deserialize_block_id<'de, D: Deserializer<'de>>(d: D) -> Result<BlockId, D::Error> {
    let text = <std::borrow::Cow<'de, str> as serde::Deserialize>::deserialize(d)?;
    text.parse::<BlockId>().map_err(D::Error::custom)
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Deserialize)]
    struct Lt {
        #[serde(default, deserialize_with = "deserialize_optional_lt")]
        lt: Option<u64>,
    }

    fn lt(json: &str) -> Result<Option<u64>, String> {
        serde_json::from_str::<Lt>(json)
            .map(|l| l.lt)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn lt_params_are_strings_or_null() {
        assert_eq!(lt(r#"{"lt":"100"}"#), Ok(Some(100)));
        assert_eq!(lt(r#"{"lt":"18446744073709551615"}"#), Ok(Some(u64::MAX)));
        assert_eq!(lt(r#"{"lt":null}"#), Ok(None));
        assert_eq!(lt(r#"{}"#), Ok(None));
        assert!(lt(r#"{"lt":100}"#).is_err());
        assert!(lt(r#"{"lt":"-1"}"#).is_err());
        assert!(lt(r#"{"lt":"1e3"}"#).is_err());
    }

    #[test]
    fn block_ids_read_and_write_the_same_text() {
        let text = "-1:8000000000000000:4354001:\
                    a7f3000000000000000000000000000000000000000000000000000000000001:\
                    1b4d000000000000000000000000000000000000000000000000000000000002";
        let id = text.parse::<BlockId>().unwrap();
        let mut out = Vec::new();
        serialize_block_id(&id, &mut serde_json::Serializer::new(&mut out)).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), format!("\"{text}\""));
    }
}
