//! Errors of byte-format decoding.

/// A value could not be decoded; the message names the field and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    /// The input has the wrong length for a fixed-size value.
    #[error("invalid length of {what}: expected {expected} bytes, got {actual}")]
    InvalidLength {
        /// What was decoded.
        what: &'static str,
        /// Expected length.
        expected: usize,
        /// Actual length.
        actual: usize,
    },
    /// A field holds a value that the format does not allow.
    #[error("invalid {what}: {reason}")]
    InvalidData {
        /// The field.
        what: &'static str,
        /// Why it was rejected.
        reason: String,
    },
    /// A TL constructor id that this format does not know.
    #[error("unknown constructor 0x{actual:08x} for {what} (expected 0x{expected:08x})")]
    UnknownConstructor {
        /// What was decoded.
        what: &'static str,
        /// Expected id.
        expected: u32,
        /// Actual id.
        actual: u32,
    },
    /// The input ended before the value was complete.
    #[error("unexpected end of input while reading {what}")]
    UnexpectedEof {
        /// What was being read.
        what: &'static str,
    },
}

impl FormatError {
    pub(crate) fn invalid(what: &'static str, reason: impl Into<String>) -> Self {
        Self::InvalidData {
            what,
            reason: reason.into(),
        }
    }
}
