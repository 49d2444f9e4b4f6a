//! A tiny HTTP/1.1 endpoint every role serves: `/metrics` (Prometheus text format), `/healthz`
//! (liveness) and `/readyz` (readiness, from a flag the role sets). It is given its listener and
//! a shutdown token from outside, and every read has a deadline.
//!
//! ```text
//!  GET /metrics  → 200 text/plain; version=0.0.4   (protocol::metrics::render)
//!  GET /healthz  → 200 ok
//!  GET /readyz   → 200 ready | 503 not ready
//!  anything else → 404 / 405
//! ```

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

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

/// Binds `listen` (`metrics.listen`: `host:port`, port 0 picks one) and serves the endpoints
/// there until `shutdown`, on a task of its own; an empty `listen` serves nothing. Returns the
/// bound address. The error names the address it could not bind.
pub async fn serve_on(
    listen: &str,
    ready: Ready,
    shutdown: CancellationToken,
) -> std::io::Result<Option<std::net::SocketAddr>> {
    let listen = listen.trim();
    if listen.is_empty() {
        return Ok(None);
    }
    let named = |e: std::io::Error| std::io::Error::new(e.kind(), format!("binding metrics.listen {listen}: {e}"));
    let listener = TcpListener::bind(listen).await.map_err(named)?;
    let addr = listener.local_addr().map_err(named)?;
    tokio::spawn(serve(listener, ready, shutdown));
    Ok(Some(addr))
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
}
