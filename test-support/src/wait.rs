//! Waiting for a condition with a deadline: polls at an interval and fails the test with the caller's
//! reason once the deadline passed. The deadline only bounds a wait for something that happens on its own
//! schedule (a sync, a GC tick, a peer found); no test asserts how long anything took.

use std::time::{Duration, Instant};

/// Calls `attempt` every `interval` until it returns `Ok`, and returns that value. An `Err` is the reason
/// for not being there yet; the first one after `timeout` fails the test with it.
pub fn wait_for<T>(
    timeout: Duration,
    interval: Duration,
    mut attempt: impl FnMut() -> Result<T, String>,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        match attempt() {
            Ok(value) => return value,
            Err(reason) => assert!(Instant::now() < deadline, "{reason}"),
        }
        std::thread::sleep(interval);
    }
}

/// Calls `ready` every `interval` until it holds; fails the test with `what` once `timeout` passed.
pub fn wait_until(
    what: &str,
    timeout: Duration,
    interval: Duration,
    mut ready: impl FnMut() -> bool,
) {
    wait_for(timeout, interval, || {
        if ready() {
            Ok(())
        } else {
            Err(what.to_owned())
        }
    });
}

/// [`wait_for`] in async code: `attempt` may await, and the pause between attempts is a tokio sleep.
pub async fn wait_for_async<T>(
    timeout: Duration,
    interval: Duration,
    mut attempt: impl AsyncFnMut() -> Result<T, String>,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        match attempt().await {
            Ok(value) => return value,
            Err(reason) => assert!(Instant::now() < deadline, "{reason}"),
        }
        tokio::time::sleep(interval).await;
    }
}

/// [`wait_until`] in async code: `ready` may await, and the pause between calls is a tokio sleep.
pub async fn wait_until_async(
    what: &str,
    timeout: Duration,
    interval: Duration,
    mut ready: impl AsyncFnMut() -> bool,
) {
    wait_for_async(timeout, interval, async || {
        if ready().await {
            Ok(())
        } else {
            Err(what.to_owned())
        }
    })
    .await;
}
