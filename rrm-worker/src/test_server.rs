//! A **test server** speaking the OpenAI chat-completions API, with scriptable behaviour: good
//! answers, malformed outputs, scores out of range, answers cut at the length limit, slow
//! responses, HTTP errors, connections dropped or never answered. For tests of the OpenAI-compatible judge and the worker, and for
//! trying a deployment without a model. Not a model server: it answers what it is told to.
//!
//! ```text
//!  TestChatServer::start() ─► 127.0.0.1:<free port>
//!  POST /v1/chat/completions ─► recorded ─► next scripted Reply (FIFO), else the default Reply
//!  anything else ─► 404
//! ```
//!
//! Hand-written HTTP/1.1 on tokio (one request per connection, `Connection: close`); every read
//! has a deadline, and every connection ends when the server is dropped.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use crate::output;

/// How long a client may take to send its request.
const READ_DEADLINE: Duration = Duration::from_secs(5);
/// The largest request accepted.
const MAX_REQUEST: usize = 16 << 20;

/// What the server does with one request.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// 200 with this text as the assistant's message.
    Content(String),
    /// 200 with `content` and a separate `reasoning_content` (a reasoning parser's split).
    ContentWithReasoning {
        /// The message content.
        content: String,
        /// The reasoning field.
        reasoning: String,
    },
    /// 200 with this text as the assistant's message and `finish_reason = "length"`: an answer
    /// cut at the request's `max_tokens`.
    Cut(String),
    /// This HTTP status with this body.
    Status(u16, String),
    /// 200 with a body that is not JSON.
    NotJson,
    /// Waits, then replies.
    Delayed(Duration, Box<Reply>),
    /// Never replies; the connection stays open until the client gives up or the server stops.
    Hang,
    /// Closes the connection without a reply.
    Drop,
}

impl Reply {
    /// A well-formed answer.
    pub fn answer(trace: &str, critique: &str, score: impl std::fmt::Display) -> Self {
        Self::Content(output::render(trace, critique, score))
    }

    /// A well-formed answer with a stock trace.
    pub fn good(critique: &str, score: f32) -> Self {
        Self::answer("the test server's reasoning", critique, score)
    }

    /// This reply after `delay`.
    pub fn after(delay: Duration, reply: Reply) -> Self {
        Self::Delayed(delay, Box::new(reply))
    }
}

/// One request the server received.
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    /// The path requested.
    pub path: String,
    /// The `Authorization` header, if any.
    pub authorization: Option<String>,
    /// The JSON body (`Null` when it was not JSON).
    pub body: serde_json::Value,
}

impl Recorded {
    /// The content of the message with `role` (`system`, `user`).
    pub fn message(&self, role: &str) -> Option<&str> {
        self.body["messages"].as_array()?.iter().find(|m| m["role"] == role)?["content"].as_str()
    }
}

#[derive(Debug)]
struct State {
    script: Mutex<VecDeque<Reply>>,
    default: Mutex<Reply>,
    requests: Mutex<Vec<Recorded>>,
    open: AtomicUsize,
    active: AtomicUsize,
    peak: AtomicUsize,
}

/// Counts a request as being answered until released (just before its reply is written, so a
/// client cannot start its next request while this one still counts) or dropped.
struct Active<'a>(Option<&'a State>);

impl<'a> Active<'a> {
    fn new(state: &'a State) -> Self {
        let now = state.active.fetch_add(1, Ordering::SeqCst) + 1;
        state.peak.fetch_max(now, Ordering::SeqCst);
        Self(Some(state))
    }

    fn release(&mut self) {
        if let Some(state) = self.0.take() {
            state.active.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl Drop for Active<'_> {
    fn drop(&mut self) {
        self.release();
    }
}

impl State {
    fn next(&self) -> Reply {
        let scripted = self.script.lock().ok().and_then(|mut s| s.pop_front());
        scripted.unwrap_or_else(|| self.default.lock().map(|d| d.clone()).unwrap_or(Reply::Drop))
    }
}

/// The test server; stops (and closes every connection) when dropped.
#[derive(Debug)]
pub struct TestChatServer {
    addr: SocketAddr,
    state: Arc<State>,
    stop: CancellationToken,
}

impl TestChatServer {
    /// Starts on 127.0.0.1 on a free port, answering every request with a good answer until
    /// told otherwise.
    pub async fn start() -> std::io::Result<Self> {
        Self::serve(TcpListener::bind("127.0.0.1:0").await?)
    }

    /// Serves on `listener`.
    pub fn serve(listener: TcpListener) -> std::io::Result<Self> {
        let addr = listener.local_addr()?;
        let state = Arc::new(State {
            script: Mutex::new(VecDeque::new()),
            default: Mutex::new(Reply::good("A test critique.", 0.5)),
            requests: Mutex::new(Vec::new()),
            open: AtomicUsize::new(0),
            active: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
        });
        let stop = CancellationToken::new();
        tokio::spawn(accept(listener, state.clone(), stop.clone()));
        Ok(Self { addr, state, stop })
    }

    /// `http://127.0.0.1:<port>`: a base URL for the judge's `endpoints`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Queues `reply` for a coming request (replies are used in order, before the default).
    pub fn push(&self, reply: Reply) -> &Self {
        if let Ok(mut s) = self.state.script.lock() {
            s.push_back(reply);
        }
        self
    }

    /// What requests get once the queue is empty.
    pub fn set_default(&self, reply: Reply) -> &Self {
        if let Ok(mut d) = self.state.default.lock() {
            *d = reply;
        }
        self
    }

    /// Every completion request received so far, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.state.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// How many requests were received.
    pub fn request_count(&self) -> usize {
        self.state.requests.lock().map(|r| r.len()).unwrap_or(0)
    }

    /// Connections open now (a hanging or delayed reply holds one).
    pub fn open_connections(&self) -> usize {
        self.state.open.load(Ordering::SeqCst)
    }

    /// The most requests this server was answering at once (each counted from when it was
    /// read until its reply started).
    pub fn peak_active(&self) -> usize {
        self.state.peak.load(Ordering::SeqCst)
    }
}

impl Drop for TestChatServer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// A URL where nothing listens (a port bound and released): connections are refused.
pub fn refused_url() -> std::io::Result<String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    let addr = l.local_addr()?;
    drop(l);
    Ok(format!("http://{addr}"))
}

async fn accept(listener: TcpListener, state: Arc<State>, stop: CancellationToken) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok((sock, _)) => {
                    let (state, stop) = (state.clone(), stop.clone());
                    tokio::spawn(async move {
                        state.open.fetch_add(1, Ordering::SeqCst);
                        tokio::select! {
                            _ = stop.cancelled() => {}
                            _ = handle(sock, &state) => {}
                        }
                        state.open.fetch_sub(1, Ordering::SeqCst);
                    });
                }
                Err(e) => tracing::debug!(error = %e, "test chat server: accept failed"),
            },
        }
    }
}

/// Reads one request: its head (lines) and body.
async fn read_request(sock: &mut TcpStream) -> Option<(Vec<String>, Vec<u8>)> {
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 8192];
    let read = async {
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i;
            }
            let n = sock.read(&mut chunk).await.ok().filter(|n| *n > 0)?;
            buf.extend_from_slice(&chunk[..n]);
            if buf.len() > MAX_REQUEST {
                return None;
            }
        };
        let head: Vec<String> = String::from_utf8_lossy(&buf[..head_end]).lines().map(String::from).collect();
        let length = head
            .iter()
            .find_map(|l| l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case("content-length")))
            .and_then(|(_, v)| v.trim().parse::<usize>().ok())
            .unwrap_or(0)
            .min(MAX_REQUEST);
        let mut body = buf[head_end + 4..].to_vec();
        while body.len() < length {
            let n = sock.read(&mut chunk).await.ok().filter(|n| *n > 0)?;
            body.extend_from_slice(&chunk[..n]);
        }
        Some((head, body))
    };
    tokio::time::timeout(READ_DEADLINE, read).await.ok().flatten()
}

fn completion(content: &str, reasoning: Option<&str>, finish_reason: &str) -> String {
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
    .to_string()
}

async fn respond(sock: &mut TcpStream, status: u16, content_type: &str, body: &str) {
    let reason = match status {
        200 => "OK",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    };
    let text = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = sock.write_all(text.as_bytes()).await;
    let _ = sock.shutdown().await;
}

async fn handle(mut sock: TcpStream, state: &State) {
    let Some((head, body)) = read_request(&mut sock).await else { return };
    let mut request_line = head.first().map(|l| l.split_whitespace()).into_iter().flatten();
    let (method, path) = (request_line.next().unwrap_or("").to_string(), request_line.next().unwrap_or("").to_string());
    if method != "POST" || path != "/v1/chat/completions" {
        return respond(&mut sock, 404, "text/plain", "not found: POST /v1/chat/completions\n").await;
    }
    let authorization = head
        .iter()
        .find_map(|l| l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case("authorization")))
        .map(|(_, v)| v.trim().to_string());
    let body = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
    if let Ok(mut r) = state.requests.lock() {
        r.push(Recorded { path, authorization, body });
    }
    let mut active = Active::new(state);
    let mut reply = state.next();
    while let Reply::Delayed(delay, inner) = reply {
        tokio::time::sleep(delay).await;
        reply = *inner;
    }
    if reply != Reply::Hang {
        active.release();
    }
    match reply {
        Reply::Content(content) => {
            respond(&mut sock, 200, "application/json", &completion(&content, None, "stop")).await
        }
        Reply::ContentWithReasoning { content, reasoning } => {
            respond(&mut sock, 200, "application/json", &completion(&content, Some(&reasoning), "stop")).await
        }
        Reply::Cut(content) => respond(&mut sock, 200, "application/json", &completion(&content, None, "length")).await,
        Reply::Status(status, text) => respond(&mut sock, status, "text/plain", &text).await,
        Reply::NotJson => respond(&mut sock, 200, "application/json", "<html>upstream busy</html>").await,
        Reply::Hang => {
            // Until the client hangs up (or the server stops, which ends this task).
            let mut byte = [0u8; 1];
            while matches!(sock.read(&mut byte).await, Ok(n) if n > 0) {}
        }
        Reply::Drop | Reply::Delayed(..) => {}
    }
}
