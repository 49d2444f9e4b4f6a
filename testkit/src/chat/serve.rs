//! The chat server's connections and its one route.
//!
//! Each accepted connection is served by hyper's HTTP/1.1 connection driver (keep-alive off: one
//! request per connection, as the judge's client must not depend on reuse) with an axum
//! [`Router`] as the service. Every connection ends when the server is dropped.
//!
//! **Dropped connections** ([`Reply::Drop`]) are made by failing the service future: the handler
//! marks its response with [`DropConnection`], the wrapper around the router turns a marked
//! response into an error, and hyper closes the connection without writing a response.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::State as Shared;
use axum::http::{header, HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use axum::Router;
use hyper::service::Service as _;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use super::{Active, Recorded, Reply, State};

/// How long a client may take to send its request (head and body).
const READ_DEADLINE: Duration = Duration::from_secs(5);
/// The largest request body accepted.
const MAX_REQUEST: usize = 16 << 20;
/// The only path served.
const COMPLETIONS: &str = "/v1/chat/completions";

/// Marks a response that must not be sent: the connection is closed instead.
#[derive(Debug, Clone, Copy)]
struct DropConnection;

/// The service error that makes hyper close a connection without a response.
#[derive(Debug)]
struct Dropped;

impl std::fmt::Display for Dropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection dropped by the script")
    }
}

impl std::error::Error for Dropped {}

/// Accepts connections until `stop`, serving each on its own task.
pub(super) async fn accept(listener: TcpListener, state: Arc<State>, stop: CancellationToken) {
    let router = Router::new().route(COMPLETIONS, any(complete)).fallback(not_found).with_state(state.clone());
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok((sock, _)) => {
                    let (state, stop, router) = (state.clone(), stop.clone(), router.clone());
                    tokio::spawn(async move {
                        state.open.fetch_add(1, Ordering::SeqCst);
                        tokio::select! {
                            _ = stop.cancelled() => {}
                            _ = connection(sock, router) => {}
                        }
                        state.open.fetch_sub(1, Ordering::SeqCst);
                    });
                }
                Err(e) => tracing::debug!(error = %e, "test chat server: accept failed"),
            },
        }
    }
}

/// Serves one request on `sock`; a [`DropConnection`] response closes it unanswered.
async fn connection(sock: TcpStream, router: Router) {
    let router = TowerToHyperService::new(router);
    let service = hyper::service::service_fn(move |request| {
        let response = router.call(request);
        async move {
            let response = match response.await {
                Ok(r) => r,
                Err(never) => match never {},
            };
            if response.extensions().get::<DropConnection>().is_some() {
                return Err(Dropped);
            }
            Ok(response)
        }
    });
    let served = hyper::server::conn::http1::Builder::new()
        .keep_alive(false)
        .timer(TokioTimer::new())
        .header_read_timeout(READ_DEADLINE)
        .serve_connection(TokioIo::new(sock), service)
        .await;
    if let Err(e) = served {
        tracing::debug!(error = %e, "test chat server: connection ended");
    }
}

async fn not_found() -> Response {
    (StatusCode::NOT_FOUND, "not found: POST /v1/chat/completions\n").into_response()
}

/// The completions route: records the request, then plays the next scripted reply.
async fn complete(
    Shared(state): Shared<Arc<State>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if method != Method::POST {
        return not_found().await;
    }
    let Ok(Ok(body)) = tokio::time::timeout(READ_DEADLINE, axum::body::to_bytes(body, MAX_REQUEST)).await else {
        return dropped();
    };
    let authorization = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).map(str::to_string);
    let body = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
    if let Ok(mut r) = state.requests.lock() {
        r.push(Recorded { path: uri.path().to_string(), authorization, body });
    }
    let mut active = Active::new(&state);
    let mut reply = state.next();
    while let Reply::Delayed(delay, inner) = reply {
        tokio::time::sleep(delay).await;
        reply = *inner;
    }
    if reply == Reply::Hang {
        // Until the client hangs up (hyper drops this future) or the server stops (which ends
        // the connection's task).
        std::future::pending::<()>().await;
    }
    active.release();
    match reply {
        Reply::Content(content) => json(completion(&content, None, "stop")),
        Reply::ContentWithReasoning { content, reasoning } => json(completion(&content, Some(&reasoning), "stop")),
        Reply::Cut(content) => json(completion(&content, None, "length")),
        Reply::Status(status, text) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            (status, text).into_response()
        }
        Reply::NotJson => ([(header::CONTENT_TYPE, "application/json")], "<html>upstream busy</html>").into_response(),
        Reply::Drop | Reply::Hang | Reply::Delayed(..) => dropped(),
    }
}

fn dropped() -> Response {
    let mut response = StatusCode::INTERNAL_SERVER_ERROR.into_response();
    response.extensions_mut().insert(DropConnection);
    response
}

fn json(body: serde_json::Value) -> Response {
    axum::Json(body).into_response()
}

/// A chat-completions response body with one choice.
fn completion(content: &str, reasoning: Option<&str>, finish_reason: &str) -> serde_json::Value {
    let mut message = serde_json::json!({"role": "assistant", "content": content});
    if let Some(r) = reasoning {
        message["reasoning_content"] = r.into();
    }
    serde_json::json!({
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": "test",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    })
}
