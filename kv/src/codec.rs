//! The byte encoding of keys and values.

use std::fmt;

/// Why stored bytes do not decode; the database wrapper adds the table and the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(String);

impl DecodeError {
    /// A decode error with its reason.
    pub fn new(reason: impl fmt::Display) -> Self {
        Self(reason.to_string())
    }

    /// Checks that `bytes` has exactly `len` bytes.
    pub fn check_len(what: &str, bytes: &[u8], len: usize) -> Result<(), Self> {
        if bytes.len() != len {
            return Err(Self(format!(
                "{what} of {} bytes, expected {len}",
                bytes.len()
            )));
        }
        Ok(())
    }

    /// The reason.
    pub fn reason(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DecodeError {}

/// A key or value with a byte encoding.
///
/// Keys encode into fixed-size arrays (`type Encoded<'a> = [u8; N]`), so writing or reading a row never
/// allocates for its key; variable-size values encode into a `Vec<u8>`, and raw values lend their bytes.
pub trait Codec: Sized {
    /// The encoded form.
    type Encoded<'a>: AsRef<[u8]>
    where
        Self: 'a;

    /// Encodes the value.
    fn encode(&self) -> Self::Encoded<'_>;

    /// Decodes stored bytes; a wrong length or shape is an error, never a panic.
    fn decode(bytes: &[u8]) -> Result<Self, DecodeError>;
}

/// Uninterpreted bytes (values whose layout the table's owner reads itself, e.g. compressed frames).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RawBytes(pub Vec<u8>);

impl Codec for RawBytes {
    type Encoded<'a> = &'a [u8];

    fn encode(&self) -> &[u8] {
        &self.0
    }

    fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        Ok(Self(bytes.to_vec()))
    }
}

/// An empty value (index rows).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Empty;

impl Codec for Empty {
    type Encoded<'a> = [u8; 0];

    fn encode(&self) -> [u8; 0] {
        []
    }

    fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        if !bytes.is_empty() {
            return Err(DecodeError(format!(
                "expected no bytes, got {}",
                bytes.len()
            )));
        }
        Ok(Self)
    }
}

/// A key that is a fixed name (rows of settings or single values: `db_version`, `last_mc_block`, …), stored
/// as the name's bytes. Such tables are read by name and never enumerated, so stored names do not decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NameKey(pub &'static str);

impl Codec for NameKey {
    type Encoded<'a> = &'a [u8];

    fn encode(&self) -> &[u8] {
        self.0.as_bytes()
    }

    fn decode(_: &[u8]) -> Result<Self, DecodeError> {
        Err(DecodeError(
            "a table keyed by names is read by name, not enumerated".into(),
        ))
    }
}
