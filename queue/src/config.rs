//! The `internal_queue` section of the node config (queue.md §8): only `gc_interval`.

use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize};

/// Default GC tick period.
pub const DEFAULT_GC_INTERVAL: Duration = Duration::from_secs(5);

/// Local settings of the queue. An absent section, or one without the field, gives the default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QueueConfig {
    /// GC tick period (humantime, e.g. `"5s"`, `"500ms"`); must be > 0.
    #[serde(
        serialize_with = "humantime_serde::serialize",
        deserialize_with = "positive_duration"
    )]
    pub gc_interval: Duration,
}

impl Default for QueueConfig {
    fn default() -> Self {
        Self {
            gc_interval: DEFAULT_GC_INTERVAL,
        }
    }
}

impl QueueConfig {
    /// Checks the values (for configs built in code).
    pub fn validate(&self) -> Result<(), crate::QueueError> {
        if self.gc_interval.is_zero() {
            return Err(crate::QueueError::Config("gc_interval must be > 0".into()));
        }
        Ok(())
    }
}

fn positive_duration<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
    let value: Duration = humantime_serde::deserialize(deserializer)?;
    if value.is_zero() {
        return Err(serde::de::Error::custom("gc_interval must be > 0"));
    }
    Ok(value)
}
