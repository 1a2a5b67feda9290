//! The 32-byte values of the ledger (delivery keys, context ids, content digests) share one shape: fixed
//! bytes shown and serialised as lowercase hex. Each is its own type so one can never stand in for another.

/// Declares a 32-byte newtype with hex `Display`/`Debug` and hex-string serde.
macro_rules! hash_bytes {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub [u8; 32]);

        impl $name {
            /// The raw bytes.
            pub fn as_bytes(&self) -> &[u8; 32] {
                &self.0
            }

            /// Parses 64 hex digits; the error says what was wrong.
            pub fn from_hex(text: &str) -> Result<Self, String> {
                let bytes = hex::decode(text).map_err(|e| format!("not hex: {e}"))?;
                Self::from_slice(&bytes)
            }

            /// Takes exactly 32 bytes; the error names the length found.
            pub fn from_slice(bytes: &[u8]) -> Result<Self, String> {
                let array: [u8; 32] = bytes
                    .try_into()
                    .map_err(|_| format!("expected 32 bytes, got {}", bytes.len()))?;
                Ok(Self(array))
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&hex::encode(self.0))
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{}({})", stringify!($name), hex::encode(self.0))
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(&hex::encode(self.0))
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
                Self::from_hex(&text).map_err(serde::de::Error::custom)
            }
        }
    };
}

pub(crate) use hash_bytes;
