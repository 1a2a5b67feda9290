//! Errors of the ledger: failures of the database or of stored data, and invalid arguments of the operator
//! calls. A malformed *delivery* is not an error: it is decided as [`crate::Outcome`] `Rejected`.

/// Everything the ledger can fail with.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// The database failed (with what was being done) or a stored row does not decode (with its table and
    /// key).
    #[error(transparent)]
    Kv(#[from] regolith_kv::KvError),
    /// A stored row could not be decoded (`what` names the table and the key).
    #[error("corrupted {what}: {reason}")]
    Corruption {
        /// Which table and value.
        what: String,
        /// Why.
        reason: String,
    },
    /// The database was written by an incompatible version of the ledger.
    #[error("unsupported ledger database version {found} (this build reads version {expected})")]
    UnsupportedVersion {
        /// Stored version.
        found: u8,
        /// This build's version.
        expected: u8,
    },
    /// An argument of an operator call (not a delivery) is not valid.
    #[error("invalid {field}: {reason}")]
    InvalidArgument {
        /// Which argument.
        field: &'static str,
        /// Why.
        reason: String,
    },
    /// A transaction kept conflicting with concurrent writers and was given up.
    #[error("gave up {what} after {attempts} commit conflicts")]
    Contention {
        /// What was being done.
        what: &'static str,
        /// How many attempts were made.
        attempts: u32,
    },
}

impl LedgerError {
    pub(crate) fn corruption(what: impl Into<String>, reason: impl std::fmt::Display) -> Self {
        Self::Corruption {
            what: what.into(),
            reason: reason.to_string(),
        }
    }
}

/// Result alias of the ledger.
pub type Result<T, E = LedgerError> = std::result::Result<T, E>;
