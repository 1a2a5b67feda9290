//! The generator's error type.

/// Why a chain could not be generated or written.
#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    /// The options are not usable.
    #[error("invalid option: {0}")]
    InvalidOption(String),
    /// The base zerostate does not parse or lacks a part.
    #[error("base zerostate: {0}")]
    Zerostate(String),
    /// A cell, dictionary or Merkle structure could not be built.
    #[error("building {what}: {reason}")]
    Build {
        /// What was being built.
        what: String,
        /// The cell library's message.
        reason: String,
    },
    /// Replaying the generator from its zerostate did not give the chain a data directory holds: the
    /// options, the seed or the base zerostate are not the ones it was generated with.
    #[error(
        "the replayed chain differs at mc block {seqno}: generated {replayed}, stored {stored} \
         (another seed, other generator options or another base zerostate than the ones that made it)"
    )]
    ReplayMismatch {
        /// The mc seqno where they differ.
        seqno: u32,
        /// The id the generator gives.
        replayed: String,
        /// The id that is stored.
        stored: String,
    },
    /// A replayed group did not take every external message its stored blocks list.
    #[error(
        "the replayed group of mc block {seqno} took {taken} of the {given} external messages its stored \
         blocks list"
    )]
    ReplayExternals {
        /// The mc seqno of the group.
        seqno: u32,
        /// The messages the stored blocks list.
        given: usize,
        /// The messages the replay took.
        taken: usize,
    },
    /// The recorded external messages of a group could not be read (the replay of a live chain).
    #[error("the recorded external messages of mc block {seqno}: {reason}")]
    StoredExternals {
        /// The mc seqno of the group.
        seqno: u32,
        /// What failed.
        reason: String,
    },
    /// The caller stopped a replay.
    #[error("the replay was stopped")]
    Stopped,
    /// A file or directory could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file or directory.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// An input file (an archive, `validators.json`) is not one the generator writes.
    #[error("{path}: {reason}")]
    Input {
        /// The file.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A block cannot be forged as asked ([`crate::forge`]).
    #[error("forging mc block {seqno}: {reason}")]
    Forge {
        /// The mc seqno of the block to forge.
        seqno: u32,
        /// Why not.
        reason: String,
    },
    /// A file could not be written.
    #[error("writing {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// Maps a cell-library error into [`ChainError::Build`] naming `what`.
pub(crate) fn build_err(
    what: impl Into<String>,
) -> impl FnOnce(tycho_types::error::Error) -> ChainError {
    let what = what.into();
    move |e| ChainError::Build {
        what,
        reason: e.to_string(),
    }
}

/// Maps an I/O error into [`ChainError::Io`] naming the path.
pub(crate) fn io_err(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> ChainError + '_ {
    move |source| ChainError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Maps a read error into [`ChainError::Read`] naming the path.
pub(crate) fn read_err(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> ChainError + '_ {
    move |source| ChainError::Read {
        path: path.display().to_string(),
        source,
    }
}

/// A [`ChainError::Input`] naming `path`.
pub(crate) fn input_err(path: &std::path::Path, reason: impl std::fmt::Display) -> ChainError {
    ChainError::Input {
        path: path.display().to_string(),
        reason: reason.to_string(),
    }
}
