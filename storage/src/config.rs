//! Storage configuration (storage.md §11). Durations are humantime strings, sizes byte-size strings.

use std::path::PathBuf;
use std::time::Duration;

use bytesize::ByteSize;
use serde::{Deserialize, Serialize};

/// Configuration of the block storage.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct StorageConfig {
    /// The data directory; holds `core/` and `archives/`.
    pub root_dir: PathBuf,
    /// Parsed-block cache.
    pub blocks_cache: BlocksCacheConfig,
    /// Component compression and BlobDB.
    pub components: ComponentsConfig,
    /// Archives.
    pub archives: ArchivesConfig,
    /// Block GC; `None` disables it.
    pub blocks_gc: Option<BlocksGcConfig>,
    /// Test only: every key block counts as persistent.
    pub each_key_block_is_persistent: bool,
    /// Page size of `list_blocks` (tests may lower it).
    pub list_blocks_page: usize,
}

impl Default for StorageConfig {
    fn default() -> Self {
        Self {
            root_dir: PathBuf::from("data"),
            blocks_cache: BlocksCacheConfig::default(),
            components: ComponentsConfig::default(),
            archives: ArchivesConfig::default(),
            blocks_gc: Some(BlocksGcConfig::default()),
            each_key_block_is_persistent: false,
            list_blocks_page: 1000,
        }
    }
}

impl StorageConfig {
    /// Default configuration rooted at `root_dir`.
    pub fn new(root_dir: impl Into<PathBuf>) -> Self {
        Self {
            root_dir: root_dir.into(),
            ..Self::default()
        }
    }
}

/// Parsed-block cache settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct BlocksCacheConfig {
    /// Entry lifetime.
    #[serde(with = "humantime_serde")]
    pub ttl: Duration,
    /// Weighted capacity (data size + 1 KiB per entry).
    #[serde(with = "exact_byte_size")]
    pub size: ByteSize,
}

impl Default for BlocksCacheConfig {
    fn default() -> Self {
        Self {
            ttl: Duration::from_secs(300),
            size: ByteSize::mb(500),
        }
    }
}

/// Component storage settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct ComponentsConfig {
    /// zstd level of stored components.
    pub zstd_level: i32,
    /// BlobDB threshold.
    #[serde(with = "exact_byte_size")]
    pub min_blob_size: ByteSize,
    /// BlobDB file size.
    #[serde(with = "exact_byte_size")]
    pub blob_file_size: ByteSize,
    /// BlobDB GC age cutoff.
    pub blob_gc_age_cutoff: f64,
}

impl Default for ComponentsConfig {
    fn default() -> Self {
        Self {
            zstd_level: 3,
            min_blob_size: ByteSize::kib(4),
            blob_file_size: ByteSize::mib(256),
            blob_gc_age_cutoff: 0.25,
        }
    }
}

/// Archive settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct ArchivesConfig {
    /// Disabled → `move_into_archive` is a no-op and GC is not clamped.
    pub enabled: bool,
    /// zstd level of archive files.
    pub zstd_level: i32,
}

impl Default for ArchivesConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            zstd_level: 3,
        }
    }
}

/// When block GC runs and what it targets.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum BlocksGcKind {
    /// Target = last mc seqno − max(safe_distance, 100, tail + 1), at most once per `min_interval`.
    BeforeSafeDistance {
        /// Distance in mc blocks.
        safe_distance: u32,
        /// Minimal interval between runs.
        #[serde(with = "humantime_serde")]
        min_interval: Duration,
    },
    /// On a new key block K, target = the key block before K.
    BeforePreviousKeyBlock,
    /// On a new key block K, target = the persistent key block before K.
    BeforePreviousPersistentState,
}

/// Block GC settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BlocksGcConfig {
    /// Scheduling mode.
    #[serde(flatten)]
    pub kind: BlocksGcKind,
    /// Blocks per delete batch.
    #[serde(default = "default_max_blocks_per_batch")]
    pub max_blocks_per_batch: usize,
}

fn default_max_blocks_per_batch() -> usize {
    100_000
}

impl Default for BlocksGcConfig {
    fn default() -> Self {
        Self {
            kind: BlocksGcKind::BeforeSafeDistance {
                safe_distance: 1000,
                min_interval: Duration::from_secs(60),
            },
            max_blocks_per_batch: default_max_blocks_per_batch(),
        }
    }
}

/// Byte sizes as strings that round-trip exactly ("4 KiB", "256 MiB", "500 MB", "1234 B"); numbers are
/// accepted too. (`bytesize`'s own `Display` rounds, e.g. 4 KiB → "4.1 KB" and 8 MiB → "8.4 MB", which reads
/// back as 8 400 000 bytes.) Use it as `#[serde(with = "regolith_storage::config::exact_byte_size")]`.
pub mod exact_byte_size {
    use bytesize::ByteSize;
    use serde::{Deserialize, Deserializer, Serializer};

    const UNITS: [(u64, &str); 6] = [
        (1 << 30, "GiB"),
        (1_000_000_000, "GB"),
        (1 << 20, "MiB"),
        (1_000_000, "MB"),
        (1 << 10, "KiB"),
        (1_000, "KB"),
    ];

    /// The exact text of a size: the largest unit that divides it, else bytes.
    pub fn to_text(size: &ByteSize) -> String {
        let bytes = size.as_u64();
        for (unit, name) in UNITS {
            if bytes >= unit && bytes.is_multiple_of(unit) {
                return format!("{} {name}", bytes / unit);
            }
        }
        format!("{bytes} B")
    }

    /// Serialises as [`to_text`].
    pub fn serialize<S: Serializer>(size: &ByteSize, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&to_text(size))
    }

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Repr {
        Number(u64),
        Text(String),
    }

    /// A number of bytes, or a size string (`"8 MiB"`, `"1.5 GB"`).
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<ByteSize, D::Error> {
        match Repr::deserialize(d)? {
            Repr::Number(n) => Ok(ByteSize(n)),
            Repr::Text(t) => t
                .parse::<ByteSize>()
                .map_err(|e| serde::de::Error::custom(format!("invalid size {t:?}: {e}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_round_trip_exactly() {
        let config = StorageConfig::default();
        let json = serde_json::to_string(&config).unwrap();
        assert!(json.contains("\"4 KiB\""), "{json}");
        assert!(json.contains("\"256 MiB\""), "{json}");
        assert!(json.contains("\"500 MB\""), "{json}");
        let back: StorageConfig = serde_json::from_str(&json).unwrap();
        assert_eq!(
            back.components.min_blob_size,
            config.components.min_blob_size
        );
        assert_eq!(
            back.components.blob_file_size,
            config.components.blob_file_size
        );
        assert_eq!(back.blocks_cache.size, config.blocks_cache.size);
        assert_eq!(back.blocks_cache.ttl, config.blocks_cache.ttl);
        let partial: StorageConfig =
            serde_json::from_str(r#"{"components": {"min_blob_size": 100}}"#).unwrap();
        assert_eq!(partial.components.min_blob_size, ByteSize(100));
        assert!(serde_json::from_str::<StorageConfig>(
            r#"{"components": {"min_blob_size": "lots"}}"#
        )
        .is_err());
    }
}
