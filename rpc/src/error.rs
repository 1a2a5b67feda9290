//! Typed errors of the RPC crate.

/// An error of a storage view or a data provider; the service answers it with `err 2` (§2.6).
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// The block storage failed.
    #[error("storage: {0}")]
    Storage(#[from] regolith_storage::StorageError),
    /// No mc block has been applied yet.
    #[error("no masterchain block applied yet")]
    NotReady,
    /// An offset that is not a multiple of the chunk size.
    #[error("offset {offset} is not a multiple of the chunk size {chunk_size}")]
    MisalignedOffset {
        /// The requested offset.
        offset: u64,
        /// The chunk size it must be a multiple of.
        chunk_size: u64,
    },
    /// An archive that is not stored.
    #[error("archive {0} not found")]
    ArchiveNotFound(u64),
    /// The S3 request-rate or bandwidth limit is exhausted (§4.3.6).
    #[error("S3 proxy {0} limit exceeded")]
    LimitExceeded(&'static str),
    /// An invalid split-state manifest (§4.3.4).
    #[error("invalid split manifest {key}: {reason}")]
    InvalidManifest {
        /// The object key.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// The object store failed.
    #[error("object store: {0}")]
    ObjectStore(#[from] object_store::Error),
    /// A file read failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being read.
        context: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A task failed to complete.
    #[error("internal: {0}")]
    Internal(String),
}

/// A `Result` with [`ProviderError`].
pub type ProviderResult<T> = Result<T, ProviderError>;

/// An invalid configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A field has an unacceptable value.
    #[error("invalid config field {field}: {reason}")]
    Invalid {
        /// The field path.
        field: &'static str,
        /// Why it is rejected.
        reason: String,
    },
    /// The S3 client could not be built.
    #[error("cannot build the S3 client: {0}")]
    S3(#[from] object_store::Error),
}
