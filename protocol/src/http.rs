//! The HTTP endpoint every role serves, on axum: `/metrics` (Prometheus text format), `/healthz`
//! (liveness) and `/readyz` (readiness, from a flag the role sets). A role owns one through
//! [`Endpoint`] (which stops it when dropped); [`serve`] is given its listener and a shutdown
//! token from outside. Each connection answers one request: its head must arrive within
//! [`READ_DEADLINE`] (hyper's header timeout) and the whole exchange end within
//! [`CONNECTION_DEADLINE`], so a client that stalls holds nothing for long.
//!
//! ```text
//!  GET /metrics  → 200 text/plain; version=0.0.4   (protocol::metrics::render)
//!  GET /healthz  → 200 ok
//!  GET /readyz   → 200 ready | 503 not ready
//!  anything else → 404 (GET) / 405
//! ```

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, Method, StatusCode};
use axum::routing::get;
use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::error::ProtocolError;

/// How long a client may take to send its request head.
pub const READ_DEADLINE: Duration = Duration::from_secs(5);
/// How long one connection may last in all (head, answer, and the client reading it).
pub const CONNECTION_DEADLINE: Duration = Duration::from_secs(15);
/// The largest request head read (hyper's smallest buffer).
const MAX_HEAD: usize = 8 * 1024;

/// Readiness, set by the role once it can do its work.
#[derive(Debug, Clone, Default)]
pub struct Ready(Arc<AtomicBool>);

impl Ready {
    /// Marks the role ready (or not).
    pub fn set(&self, ready: bool) {
        self.0.store(ready, Ordering::SeqCst);
    }
    /// Whether the role is ready.
    pub fn get(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// A role's metrics endpoint, serving on its own task from [`Endpoint::start`] until it is
/// dropped (a drop guard stops the server, so a role that returns, early or late, stops
/// serving). Holds the role's readiness flag.
#[derive(Debug)]
pub struct Endpoint {
    ready: Ready,
    addr: Option<SocketAddr>,
    _stop: DropGuard,
}

impl Endpoint {
    /// Binds `listen` (`metrics.listen`: `host:port`, port 0 picks one) and serves `/metrics`,
    /// `/healthz` and `/readyz` (not ready until [`Endpoint::set_ready`]); an empty `listen`
    /// serves nothing. The error names the address it could not bind.
    pub async fn start(listen: &str) -> crate::Result<Self> {
        let (ready, stop) = (Ready::default(), CancellationToken::new());
        let listen = listen.trim();
        let mut addr = None;
        if !listen.is_empty() {
            let named = |source| ProtocolError::Io { what: format!("binding metrics.listen {listen}"), source };
            let listener = TcpListener::bind(listen).await.map_err(named)?;
            let bound = listener.local_addr().map_err(named)?;
            tokio::spawn(serve(listener, ready.clone(), stop.clone()));
            tracing::info!(addr = %bound, "metrics endpoint listening");
            addr = Some(bound);
        }
        Ok(Self { ready, addr, _stop: stop.drop_guard() })
    }

    /// Marks the role ready (`/readyz` answers 200) or not (503).
    pub fn set_ready(&self, ready: bool) {
        self.ready.set(ready);
    }

    /// Runs `work` with the role marked ready, and not ready again once it is done: a role's
    /// main loop.
    pub async fn ready_during<F: std::future::Future>(&self, work: F) -> F::Output {
        self.set_ready(true);
        let out = work.await;
        self.set_ready(false);
        out
    }

    /// The readiness flag, for a part of the role that sets it itself.
    pub fn ready(&self) -> &Ready {
        &self.ready
    }

    /// Where it serves; `None` when `metrics.listen` is empty.
    pub fn addr(&self) -> Option<SocketAddr> {
        self.addr
    }
}

/// The routes.
fn router(ready: Ready) -> Router {
    Router::new()
        .route(
            "/metrics",
            get(|| async { ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], crate::metrics::render()) }),
        )
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .fallback(unknown)
        .with_state(ready)
}

async fn readyz(State(ready): State<Ready>) -> (StatusCode, &'static str) {
    if ready.get() {
        (StatusCode::OK, "ready\n")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready\n")
    }
}

async fn unknown(method: Method) -> (StatusCode, &'static str) {
    if method == Method::GET {
        (StatusCode::NOT_FOUND, "not found: try /metrics, /healthz or /readyz\n")
    } else {
        (StatusCode::METHOD_NOT_ALLOWED, "only GET is served\n")
    }
}

/// Serves the endpoints on `listener` until `shutdown` is cancelled.
pub async fn serve(listener: TcpListener, ready: Ready, shutdown: CancellationToken) {
    let service = TowerToHyperService::new(router(ready));
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok((sock, _)) => {
                    let service = service.clone();
                    let connection = http1::Builder::new()
                        .timer(TokioTimer::new())
                        .header_read_timeout(READ_DEADLINE)
                        .max_buf_size(MAX_HEAD)
                        .keep_alive(false)
                        .serve_connection(TokioIo::new(sock), service);
                    tokio::spawn(async move {
                        match tokio::time::timeout(CONNECTION_DEADLINE, connection).await {
                            Ok(Ok(())) => {}
                            Ok(Err(e)) => tracing::debug!(error = %e, "metrics request failed"),
                            Err(_) => tracing::debug!("metrics connection outlived its deadline; closed"),
                        }
                    });
                }
                Err(e) => tracing::warn!(error = %e, "metrics endpoint: accept failed"),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    async fn request(addr: std::net::SocketAddr, method: &str, path: &str) -> String {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(format!("{method} {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes()).await.unwrap();
        let mut out = String::new();
        tokio::time::timeout(Duration::from_secs(5), s.read_to_string(&mut out)).await.unwrap().unwrap();
        out
    }

    async fn get(addr: std::net::SocketAddr, path: &str) -> String {
        request(addr, "GET", path).await
    }

    #[tokio::test]
    async fn serves_metrics_health_and_readiness() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (ready, stop) = (Ready::default(), CancellationToken::new());
        let server = tokio::spawn(serve(listener, ready.clone(), stop.clone()));
        crate::metrics::WEIGHTS_PUBLISHED.inc();
        let metrics = get(addr, "/metrics").await;
        assert!(
            metrics.starts_with("HTTP/1.1 200")
                && metrics.to_ascii_lowercase().contains("content-type: text/plain; version=0.0.4")
                && metrics.contains("reagent_weights_published_total"),
            "{metrics}"
        );
        assert!(get(addr, "/healthz").await.starts_with("HTTP/1.1 200"));
        assert!(get(addr, "/readyz").await.starts_with("HTTP/1.1 503"));
        ready.set(true);
        assert!(get(addr, "/readyz").await.starts_with("HTTP/1.1 200"));
        let missing = get(addr, "/nope").await;
        assert!(missing.starts_with("HTTP/1.1 404") && missing.contains("try /metrics"), "{missing}");
        assert!(request(addr, "POST", "/nope").await.starts_with("HTTP/1.1 405"));
        assert!(request(addr, "POST", "/metrics").await.starts_with("HTTP/1.1 405"));
        assert!(get(addr, "/metrics?x=1").await.starts_with("HTTP/1.1 200"), "a query string is ignored");
        stop.cancel();
        tokio::time::timeout(Duration::from_secs(5), server).await.unwrap().unwrap();
    }

    /// A client that opens a connection and sends half a head is cut off at the read deadline,
    /// and the endpoint answers others meanwhile.
    #[tokio::test]
    async fn a_stalled_client_is_cut_off_at_the_read_deadline() {
        let endpoint = Endpoint::start("127.0.0.1:0").await.unwrap();
        let addr = endpoint.addr().unwrap();
        let started = std::time::Instant::now();
        let mut stalled = TcpStream::connect(addr).await.unwrap();
        stalled.write_all(b"GET /metr").await.unwrap();
        assert!(get(addr, "/healthz").await.starts_with("HTTP/1.1 200"), "others are served meanwhile");
        let mut out = Vec::new();
        let read = tokio::time::timeout(READ_DEADLINE * 2, stalled.read_to_end(&mut out)).await;
        assert!(read.is_ok(), "the stalled connection was still open after {:?}", started.elapsed());
        assert!(started.elapsed() >= READ_DEADLINE - Duration::from_millis(100), "closed before its deadline");
    }

    #[tokio::test]
    async fn an_endpoint_answers_flips_readiness_and_stops_when_dropped() {
        let endpoint = Endpoint::start("127.0.0.1:0").await.unwrap();
        let addr = endpoint.addr().unwrap();
        assert!(get(addr, "/healthz").await.starts_with("HTTP/1.1 200 OK"));
        assert!(get(addr, "/readyz").await.starts_with("HTTP/1.1 503"), "not ready until the role says so");
        endpoint.set_ready(true);
        assert!(get(addr, "/readyz").await.starts_with("HTTP/1.1 200 OK"));
        endpoint.ready().set(false);
        assert!(get(addr, "/readyz").await.starts_with("HTTP/1.1 503"), "the shared flag flips it back");
        let during = endpoint.ready_during(get(addr, "/readyz")).await;
        assert!(during.starts_with("HTTP/1.1 200 OK"), "ready while the work runs: {during}");
        assert!(get(addr, "/readyz").await.starts_with("HTTP/1.1 503"), "and not ready after it");
        drop(endpoint);
        testkit::wait_until("the dropped endpoint to stop listening", Duration::from_secs(10), || async {
            TcpStream::connect(addr).await.is_err()
        })
        .await;
    }

    #[tokio::test]
    async fn an_empty_listen_serves_nothing_and_a_bad_one_is_named() {
        assert_eq!(Endpoint::start("  ").await.unwrap().addr(), None);
        let taken = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let listen = taken.local_addr().unwrap().to_string();
        let err = Endpoint::start(&listen).await.unwrap_err().to_string();
        assert!(err.contains(&format!("binding metrics.listen {listen}")), "{err}");
    }
}
