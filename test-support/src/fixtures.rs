//! The shared fixture files (`shared/fixtures` beside the workspace). They are read-only: tests that write
//! copy them to a temp dir first.

use std::path::PathBuf;

/// The fixtures folder.
pub fn fixtures() -> PathBuf {
    // Every crate of the workspace sits one level below its root, as this one does.
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures")
}

/// The path of the fixture `name` (relative to the fixtures folder).
pub fn fixture_path(name: &str) -> PathBuf {
    fixtures().join(name)
}

/// The bytes of the fixture `name`; panics naming the file when it cannot be read.
pub fn fixture_bytes(name: &str) -> Vec<u8> {
    let path = fixture_path(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("fixture {}: {e}", path.display()))
}

/// The masterchain zerostate of the fixture chain (`zerostate.boc`).
pub fn zerostate_path() -> PathBuf {
    fixture_path("zerostate.boc")
}

/// The first archive of the fixture chain (`archive_1.bin`, zstd-compressed).
pub fn archive_1_path() -> PathBuf {
    fixture_path("archive_1.bin")
}

/// [`archive_1_path`] as a command-line argument.
pub fn archive_1_arg() -> String {
    archive_1_path().to_str().unwrap().to_string()
}

/// The compressed bytes of `archive_1.bin`.
pub fn archive_1_bytes() -> Vec<u8> {
    fixture_bytes("archive_1.bin")
}

/// The decompressed bytes of `archive_1.bin`.
pub fn archive_1_decompressed() -> Vec<u8> {
    zstd::stream::decode_all(&archive_1_bytes()[..]).unwrap()
}
