//! The HTTP server (api.md §1): the routes, the dispatch by content type, the middleware (CORS, rate limit,
//! timeout, body limit), and one accept loop that speaks HTTP/1.1 and HTTP/2 with prior knowledge (h2c) on
//! the same port, with graceful shutdown.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tower::ServiceExt as _;
use tower_http::cors::CorsLayer;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::TimeoutLayer;

use crate::backend::ApiBackend;
use crate::config::ApiConfig;
use crate::methods::Api;
use crate::rate_limit::{self, ClientAddr};

/// How long a shutdown waits for open connections to finish.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// How often the rate limiter forgets idle clients.
const LIMITER_SWEEP: Duration = Duration::from_secs(60);

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The listen address could not be bound.
    #[error("cannot listen on {address} (the account API): {source}")]
    Bind {
        /// The address.
        address: SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
}

/// The state of the API routes.
struct RouteState {
    api: Api,
    max_body_bytes: usize,
}

/// The API's router: `POST /`, `/rpc`, `/proto` and `GET /` (api.md §1), `extra_routes` beside them, and
/// the middleware over all of them. Requests without a [`ClientAddr`] extension skip the rate limit, so this
/// router is for [`serve`]; it is public for embedding in another server.
pub fn router(config: &ApiConfig, backend: Arc<dyn ApiBackend>, extra_routes: Router) -> Router {
    let state = Arc::new(RouteState {
        api: Api::new(backend),
        max_body_bytes: config.max_body_bytes,
    });
    // api.md §1: the three paths are handled the same way; GET / is the health check.
    let api_routes = Router::new()
        .route("/", post(handle_post).get(health))
        .route("/rpc", post(handle_post))
        .route("/proto", post(handle_post))
        .with_state(state);
    let mut router = api_routes
        .merge(extra_routes)
        // Innermost first: the body limit (HTTP 413 for a declared oversized body), then the timeout
        // (HTTP 408, api.md §1), the rate limit (HTTP 429), and permissive CORS outermost so that refusals
        // carry its headers too.
        .layer(RequestBodyLimitLayer::new(config.max_body_bytes))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            config.request_timeout,
        ));
    if let Some(limit) = config.rate_limit {
        let limiter = rate_limit::limiter(limit);
        spawn_limiter_sweep(&limiter);
        router = router.layer(axum::middleware::from_fn_with_state(
            limiter,
            rate_limit::check,
        ));
    }
    router.layer(CorsLayer::permissive())
}

/// Forgets idle clients now and then, for as long as the limiter lives.
fn spawn_limiter_sweep(limiter: &Arc<rate_limit::IpLimiter>) {
    let weak = Arc::downgrade(limiter);
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn(async move {
            let mut tick = tokio::time::interval(LIMITER_SWEEP);
            tick.tick().await;
            loop {
                tick.tick().await;
                let Some(limiter) = weak.upgrade() else {
                    break;
                };
                limiter.retain_recent();
            }
        });
    }
}

/// `GET /`: the current Unix time in milliseconds as text (api.md §1).
async fn health() -> Response {
    let millis = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    (
        [(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"))],
        millis.to_string(),
    )
        .into_response()
}

/// The body kinds of api.md §1's dispatch.
enum BodyKind {
    Json,
    Protobuf,
}

/// api.md §1: the prefix of `Content-Type` picks the protocol.
fn body_kind(request: &Request) -> Option<BodyKind> {
    let value = request.headers().get(header::CONTENT_TYPE)?.as_bytes();
    let has_prefix = |prefix: &[u8]| {
        value.len() >= prefix.len() && value[..prefix.len()].eq_ignore_ascii_case(prefix)
    };
    if has_prefix(b"application/json") {
        Some(BodyKind::Json)
    } else if has_prefix(b"application/x-protobuf") {
        Some(BodyKind::Protobuf)
    } else {
        None
    }
}

async fn handle_post(State(state): State<Arc<RouteState>>, request: Request) -> Response {
    let Some(kind) = body_kind(&request) else {
        // api.md §1: any other content type, or none, is HTTP 415 with an empty body.
        metrics::counter!(crate::metrics::UNSUPPORTED_MEDIA).increment(1);
        return StatusCode::UNSUPPORTED_MEDIA_TYPE.into_response();
    };
    // api.md §2: a body that cannot be read (one past the limit without a declared length among others) is
    // -32700.
    let body = axum::body::to_bytes(request.into_body(), state.max_body_bytes)
        .await
        .map_err(|e| e.to_string());
    match kind {
        BodyKind::Json => {
            let answer = crate::jrpc::handle(&state.api, body).await;
            // api.md §2, §10.7: always HTTP 200 with application/json.
            (
                [(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                )],
                answer,
            )
                .into_response()
        }
        BodyKind::Protobuf => {
            let answer = crate::proto::handle(&state.api, body).await;
            // api.md §7, §10.7: rpc.Error goes with HTTP 422 (the choice is documented in `proto`).
            let status = if answer.is_error {
                StatusCode::UNPROCESSABLE_ENTITY
            } else {
                StatusCode::OK
            };
            (
                status,
                [(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/x-protobuf"),
                )],
                answer.body,
            )
                .into_response()
        }
    }
}

/// A running API server.
pub struct ApiServer {
    local_addr: SocketAddr,
    shutdown: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl ApiServer {
    /// The address it listens on (with the port chosen for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops accepting, lets open connections finish (at most 10 s), and returns when the server is gone.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        if let Err(e) = self.task.await {
            tracing::warn!(error = %e, "the account API's accept loop ended abnormally");
        }
    }
}

/// Starts the API on `config.listen_addr`: the routes of [`router`] with `extra_routes` (for instance the
/// node's `POST /v1/messages`), over HTTP/1.1 and h2c (api.md §1, §10.1).
pub async fn serve(
    config: ApiConfig,
    backend: Arc<dyn ApiBackend>,
    extra_routes: Router,
) -> Result<ApiServer, ServeError> {
    let listener = TcpListener::bind(config.listen_addr)
        .await
        .map_err(|source| ServeError::Bind {
            address: config.listen_addr,
            source,
        })?;
    let local_addr = listener.local_addr().map_err(|source| ServeError::Bind {
        address: config.listen_addr,
        source,
    })?;
    let router = router(&config, backend, extra_routes);
    let (shutdown, shutdown_rx) = watch::channel(false);
    let task = tokio::spawn(accept_loop(listener, router, shutdown_rx));
    tracing::info!(address = %local_addr, "account API listening (HTTP/1.1 and h2c)");
    Ok(ApiServer {
        local_addr,
        shutdown,
        task,
    })
}

async fn accept_loop(listener: TcpListener, router: Router, mut shutdown: watch::Receiver<bool>) {
    // api.md §10.1: the auto builder reads the first bytes of a connection: the HTTP/2 preface means h2c
    // with prior knowledge (nekoton's JRPC client speaks nothing else, api.md §1), anything else HTTP/1.1.
    let builder = auto::Builder::new(TokioExecutor::new());
    let graceful = GracefulShutdown::new();
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors and the like: wait a little rather than spin.
                    tracing::warn!(error = %e, "account API: accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = shutdown.changed() => break,
        };
        let _ = stream.set_nodelay(true);
        let service =
            router
                .clone()
                .map_request(move |mut request: Request<hyper::body::Incoming>| {
                    request.extensions_mut().insert(ClientAddr(peer));
                    request
                });
        let connection = builder
            .serve_connection_with_upgrades(TokioIo::new(stream), TowerToHyperService::new(service))
            .into_owned();
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(%peer, error = %e, "account API connection ended with an error");
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(SHUTDOWN_GRACE, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("account API: connections still open after the shutdown grace period");
    }
    tracing::info!("account API stopped");
}
