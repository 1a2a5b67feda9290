//! Config and record files of the data directory: strict JSON parsing (unknown fields rejected or logged at
//! any depth) and crash-safe writes (temp file + fsync + rename, secrets with mode 0600 from the first byte).
//! Below every module that reads or writes such a file, so none of them needs the composed config.

use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;

/// What to do with a field the config type does not know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnknownFields {
    /// An error naming the field and the file (`node.json`: a typo must not be silently ignored).
    Reject,
    /// A log line per field (`global.json`, a Tycho file with fields regolith does not use).
    Log,
}

/// Parses a JSON config file, finding unknown fields at any depth.
pub fn parse_json<T: serde::de::DeserializeOwned>(
    text: &str,
    path: &Path,
    unknown: UnknownFields,
) -> Result<T> {
    let mut ignored = Vec::new();
    let mut de = serde_json::Deserializer::from_str(text);
    let value: T = serde_ignored::deserialize(&mut de, |field| ignored.push(field.to_string()))
        .and_then(|v| de.end().map(|()| v))
        .with_context(|| format!("invalid config {}", path.display()))?;
    match unknown {
        UnknownFields::Reject if !ignored.is_empty() => anyhow::bail!(
            "invalid config {}: unknown field{} {}",
            path.display(),
            if ignored.len() > 1 { "s" } else { "" },
            ignored
                .iter()
                .map(|f| format!("`{f}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        UnknownFields::Reject => {}
        UnknownFields::Log => {
            for field in &ignored {
                tracing::info!(file = %path.display(), field, "ignoring a field regolith does not use");
            }
        }
    }
    Ok(value)
}

/// Writes a file atomically: temp file in the same directory, fsync, rename, fsync of the directory.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    regolith_storage::files::write_atomically(path, bytes, 0o666)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// [`write_atomically`] for a file only its owner may read (mode 0600 from the first byte on): the node's
/// secret key and S3 credentials live in `node.json`.
pub fn write_secret_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    regolith_storage::files::write_atomically(path, bytes, 0o600)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// Writes a value as pretty JSON, atomically.
pub fn write_json(path: &Path, value: &impl Serialize) -> Result<()> {
    let mut text = serde_json::to_vec_pretty(value)?;
    text.push(b'\n');
    write_atomically(path, &text)
}

/// Writes `node.json` (or any value holding secrets) as pretty JSON, atomically, with mode 0600.
pub fn write_secret_json(path: &Path, value: &impl Serialize) -> Result<()> {
    let mut text = serde_json::to_vec_pretty(value)?;
    text.push(b'\n');
    write_secret_atomically(path, &text)
}

/// Refuses a secrets file that its group or others may read or write, naming the file and the fix.
pub fn check_secret_file_mode(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path)
        .with_context(|| format!("cannot read the mode of {}", path.display()))?
        .permissions()
        .mode();
    if mode & 0o077 != 0 {
        anyhow::bail!(
            "{} is readable or writable by others (mode {:04o}) but holds the node's secret key: \
             run `chmod 600 {}`",
            path.display(),
            mode & 0o7777,
            path.display()
        );
    }
    Ok(())
}
