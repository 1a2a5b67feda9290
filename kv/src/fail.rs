//! Fail points: a test arms one, and the next operation that passes it fails once. Without the `test-utils`
//! feature a fail point holds nothing and never fails, so production builds carry no test hook.

#[cfg(feature = "test-utils")]
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::Result;

/// One place where a test can inject a failure.
#[derive(Debug, Default)]
pub struct FailPoint {
    #[cfg(feature = "test-utils")]
    armed: AtomicBool,
}

impl FailPoint {
    /// Fails once with [`KvError::Injected`] if a test armed this point.
    #[inline]
    pub fn check(&self, name: &'static str) -> Result<()> {
        #[cfg(feature = "test-utils")]
        if self.armed.swap(false, Ordering::AcqRel) {
            return Err(crate::KvError::Injected(name));
        }
        let _ = name;
        Ok(())
    }

    /// Whether the point is armed, disarming it (for points that act on their own, e.g. a stop or a panic).
    #[inline]
    pub fn take(&self) -> bool {
        #[cfg(feature = "test-utils")]
        {
            self.armed.swap(false, Ordering::AcqRel)
        }
        #[cfg(not(feature = "test-utils"))]
        {
            false
        }
    }

    /// Whether the point is armed and not yet hit.
    #[cfg(feature = "test-utils")]
    pub fn is_armed(&self) -> bool {
        self.armed.load(Ordering::Acquire)
    }

    /// Arms the point: the next check fails once.
    #[cfg(feature = "test-utils")]
    pub fn arm(&self) {
        self.armed.store(true, Ordering::Release);
    }
}
