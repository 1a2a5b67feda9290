//! The optional per-IP rate limit (api.md §1): past it a request gets HTTP 429 with `Retry-After` (whole
//! seconds, at least 1) and never reaches a method.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};

use crate::config::RateLimit;

/// The peer address of a connection, put into each request's extensions by the accept loop.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ClientAddr(pub(crate) SocketAddr);

/// One limiter state per client IP.
pub(crate) type IpLimiter = DefaultKeyedRateLimiter<IpAddr>;

pub(crate) fn limiter(limit: RateLimit) -> Arc<IpLimiter> {
    Arc::new(IpLimiter::keyed(
        Quota::per_second(limit.requests_per_second).allow_burst(limit.burst),
    ))
}

/// The middleware: requests with no known peer (a router served elsewhere) pass.
pub(crate) async fn check(
    State(limiter): State<Arc<IpLimiter>>,
    request: Request,
    next: Next,
) -> Response {
    if let Some(ClientAddr(peer)) = request.extensions().get::<ClientAddr>().copied() {
        if let Err(not_until) = limiter.check_key(&peer.ip()) {
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
            metrics::counter!(crate::metrics::RATE_LIMITED).increment(1);
            tracing::debug!(%peer, seconds, "API request rate-limited");
            let retry_after = HeaderValue::from(seconds.max(1));
            return (
                StatusCode::TOO_MANY_REQUESTS,
                [(header::RETRY_AFTER, retry_after)],
            )
                .into_response();
        }
    }
    next.run(request).await
}
