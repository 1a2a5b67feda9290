//! Crash points for the crash-safety tests: `REGOLITH_CRASH_AT=<point>:<n>` aborts the process (no cleanup,
//! no flush, like a power cut) the n-th time the named point is reached. Compiled in only with the
//! `crash-points` feature, which the node's own tests enable and release builds do not: without it a point
//! is an empty function and the variable is ignored.

#[cfg(feature = "crash-points")]
mod armed {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;

    static TARGET: OnceLock<Option<(String, u64)>> = OnceLock::new();
    static HITS: AtomicU64 = AtomicU64::new(0);

    pub(crate) fn point(name: &str) {
        let target = TARGET.get_or_init(|| {
            let value = std::env::var("REGOLITH_CRASH_AT").ok()?;
            let (point, n) = value.rsplit_once(':')?;
            Some((point.to_string(), n.parse().ok()?))
        });
        let Some((point, n)) = target else { return };
        if point == name && HITS.fetch_add(1, Ordering::Relaxed) + 1 == *n {
            eprintln!("crash point {name}:{n} reached: aborting");
            std::process::abort();
        }
    }
}

/// Marks a crash point.
#[inline(always)]
pub(crate) fn point(name: &str) {
    #[cfg(feature = "crash-points")]
    armed::point(name);
    #[cfg(not(feature = "crash-points"))]
    let _ = name;
}
