//! Storage configuration (storage.md §11). Durations are humantime strings, sizes byte-size strings.

use std::path::PathBuf;
use std::time::Duration;

use bytesize::ByteSize;
use serde::{Deserialize, Serialize};

use crate::StorageError;

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
    /// Archive GC; `None` (the default) keeps every archive, which a node that others sync from genesis
    /// must do.
    pub archives_gc: Option<ArchivesGcConfig>,
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
            archives_gc: None,
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

    /// Refuses values the storage would otherwise have to override; the error names the key.
    pub fn validate(&self) -> Result<(), StorageError> {
        let invalid = |key: &str, why: String| {
            Err(StorageError::InvalidConfig {
                key: key.to_string(),
                reason: why,
            })
        };
        let span = self.archives.mc_blocks_per_archive;
        if !(1..=crate::archive::MAX_MC_BLOCKS_PER_ARCHIVE).contains(&span) {
            return invalid(
                "storage.archives.mc_blocks_per_archive",
                format!(
                    "{span} is outside 1..={}",
                    crate::archive::MAX_MC_BLOCKS_PER_ARCHIVE
                ),
            );
        }
        if let Some(gc) = &self.blocks_gc {
            if gc.max_blocks_per_batch == 0 {
                return invalid(
                    "storage.blocks_gc.max_blocks_per_batch",
                    "must be > 0".into(),
                );
            }
            if let BlocksGcKind::BeforeSafeDistance {
                safe_distance,
                min_interval,
            } = gc.kind
            {
                if safe_distance < span {
                    return invalid(
                        "storage.blocks_gc.safe_distance",
                        format!(
                            "{safe_distance} is below {span}, the mc blocks of one archive (blocks an \
                             archive still needs are never removed)"
                        ),
                    );
                }
                if min_interval.is_zero() {
                    return invalid("storage.blocks_gc.min_interval", "must be > 0".into());
                }
            }
        }
        if let Some(ArchivesGcConfig::BeforeSafeDistance { min_interval, .. }) = &self.archives_gc {
            if min_interval.is_zero() {
                return invalid("storage.archives_gc.min_interval", "must be > 0".into());
            }
        }
        Ok(())
    }
}

/// When archive GC runs and what it removes (`remove_outdated_archives(until)`, storage.md §8.7).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ArchivesGcConfig {
    /// Every `min_interval`: until = last mc seqno − `safe_distance`.
    BeforeSafeDistance {
        /// Distance in mc blocks.
        safe_distance: u32,
        /// Interval between runs.
        #[serde(with = "humantime_serde")]
        min_interval: Duration,
    },
    /// When a new persistent key block K has been applied, `offset` later: until = the persistent key
    /// block before K (archives a node booting from that state needs are kept).
    BeforePreviousPersistentState {
        /// Delay after K is applied.
        #[serde(with = "humantime_serde")]
        offset: Duration,
    },
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
            size: ByteSize::mib(64),
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
    /// Test only: most mc blocks per archive (1..=100; the network's value, and the default, is 100).
    /// Smaller archives let a short chain cross several archive and GC windows.
    pub mc_blocks_per_archive: u32,
}

impl Default for ArchivesConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            zstd_level: 3,
            mc_blocks_per_archive: crate::archive::MAX_MC_BLOCKS_PER_ARCHIVE,
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
        assert!(json.contains("\"64 MiB\""), "{json}");
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

    fn refused_key(json: &str) -> String {
        let config: StorageConfig = serde_json::from_str(json).unwrap();
        match config.validate() {
            Err(StorageError::InvalidConfig { key, .. }) => key,
            other => panic!("{json}: expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn gc_values_that_would_be_overridden_are_refused_by_name() {
        StorageConfig::default().validate().unwrap();
        let ok: StorageConfig = serde_json::from_str(
            r#"{"archives": {"mc_blocks_per_archive": 10},
                "blocks_gc": {"type": "before_safe_distance", "safe_distance": 10, "min_interval": "1s"},
                "archives_gc": {"type": "before_safe_distance", "safe_distance": 20, "min_interval": "1s"}}"#,
        )
        .unwrap();
        ok.validate().unwrap();
        assert_eq!(
            ok.archives_gc,
            Some(ArchivesGcConfig::BeforeSafeDistance {
                safe_distance: 20,
                min_interval: Duration::from_secs(1)
            })
        );
        assert_eq!(
            refused_key(
                r#"{"blocks_gc": {"type": "before_safe_distance", "safe_distance": 99, "min_interval": "1s"}}"#
            ),
            "storage.blocks_gc.safe_distance"
        );
        assert_eq!(
            refused_key(
                r#"{"blocks_gc": {"type": "before_safe_distance", "safe_distance": 100, "min_interval": "0s"}}"#
            ),
            "storage.blocks_gc.min_interval"
        );
        assert_eq!(
            refused_key(r#"{"archives": {"mc_blocks_per_archive": 0}}"#),
            "storage.archives.mc_blocks_per_archive"
        );
        assert_eq!(
            refused_key(r#"{"archives": {"mc_blocks_per_archive": 101}}"#),
            "storage.archives.mc_blocks_per_archive"
        );
        assert_eq!(
            refused_key(
                r#"{"archives_gc": {"type": "before_safe_distance", "safe_distance": 5, "min_interval": "0ms"}}"#
            ),
            "storage.archives_gc.min_interval"
        );
        let persistent: StorageConfig = serde_json::from_str(
            r#"{"archives_gc": {"type": "before_previous_persistent_state", "offset": "5m"}}"#,
        )
        .unwrap();
        assert_eq!(
            persistent.archives_gc,
            Some(ArchivesGcConfig::BeforePreviousPersistentState {
                offset: Duration::from_secs(300)
            })
        );
        for bad in [
            r#"{"archives_gc": {"type": "sometimes"}}"#,
            r#"{"archives_gc": {"type": "before_previous_persistent_state", "offset": "5m", "extra": 1}}"#,
            r#"{"blocks_gc": {"type": "before_next_key_block"}}"#,
        ] {
            assert!(serde_json::from_str::<StorageConfig>(bad).is_err(), "{bad}");
        }
    }
}
