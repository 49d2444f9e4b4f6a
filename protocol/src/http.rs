//! A tiny HTTP/1.1 endpoint every role serves: `/metrics` (Prometheus text format), `/healthz`
//! (liveness) and `/readyz` (readiness, from a flag the role sets). A role owns one through
//! [`Endpoint`] (which stops it when dropped); [`serve`] is given its listener and a shutdown
//! token from outside. Every read and write has a deadline.
//!
//! ```text
//!  GET /metrics  → 200 text/plain; version=0.0.4   (protocol::metrics::render)
//!  GET /healthz  → 200 ok
//!  GET /readyz   → 200 ready | 503 not ready
//!  anything else → 404 / 405
//! ```

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::error::ProtocolError;

/// How long a client may take to send its request head.
pub const READ_DEADLINE: Duration = Duration::from_secs(5);
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

/// Serves the endpoints on `listener` until `shutdown` is cancelled.
pub async fn serve(listener: TcpListener, ready: Ready, shutdown: CancellationToken) {
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok((sock, _)) => {
                    let ready = ready.clone();
                    tokio::spawn(async move {
                        if let Err(e) = answer(sock, &ready).await {
                            tracing::debug!(error = %e, "metrics request failed");
                        }
                    });
                }
                Err(e) => tracing::warn!(error = %e, "metrics endpoint: accept failed"),
            },
        }
    }
}

async fn answer(mut sock: TcpStream, ready: &Ready) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    let read_head = async {
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_HEAD {
            let n = sock.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            head.extend_from_slice(&buf[..n]);
        }
        Ok::<_, std::io::Error>(())
    };
    if tokio::time::timeout(READ_DEADLINE, read_head).await.is_err() {
        return Ok(());
    }
    let line = String::from_utf8_lossy(head.split(|b| *b == b'\n').next().unwrap_or_default()).into_owned();
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = path.split('?').next().unwrap_or(path);
    let (status, content_type, body) = match (method, path) {
        ("GET", "/metrics") => ("200 OK", "text/plain; version=0.0.4", crate::metrics::render()),
        ("GET", "/healthz") => ("200 OK", "text/plain", "ok\n".to_string()),
        ("GET", "/readyz") if ready.get() => ("200 OK", "text/plain", "ready\n".to_string()),
        ("GET", "/readyz") => ("503 Service Unavailable", "text/plain", "not ready\n".to_string()),
        ("GET", _) => ("404 Not Found", "text/plain", "not found: try /metrics, /healthz or /readyz\n".to_string()),
        _ => ("405 Method Not Allowed", "text/plain", "only GET is served\n".to_string()),
    };
    let reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    tokio::time::timeout(READ_DEADLINE, sock.write_all(reply.as_bytes()))
        .await
        .map_err(|_| std::io::ErrorKind::TimedOut)??;
    let _ = sock.shutdown().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn get(addr: std::net::SocketAddr, path: &str) -> String {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes()).await.unwrap();
        let mut out = String::new();
        tokio::time::timeout(Duration::from_secs(5), s.read_to_string(&mut out)).await.unwrap().unwrap();
        out
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
            metrics.starts_with("HTTP/1.1 200") && metrics.contains("reagent_weights_published_total"),
            "{metrics}"
        );
        assert!(get(addr, "/healthz").await.starts_with("HTTP/1.1 200"));
        assert!(get(addr, "/readyz").await.starts_with("HTTP/1.1 503"));
        ready.set(true);
        assert!(get(addr, "/readyz").await.starts_with("HTTP/1.1 200"));
        assert!(get(addr, "/nope").await.starts_with("HTTP/1.1 404"));
        stop.cancel();
        tokio::time::timeout(Duration::from_secs(5), server).await.unwrap().unwrap();
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
