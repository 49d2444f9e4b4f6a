//! A **test server** speaking the OpenAI chat-completions API, with scriptable behaviour: good
//! answers, malformed outputs, scores out of range, answers cut at the length limit, slow
//! responses, HTTP errors, connections dropped or never answered. For tests of the
//! OpenAI-compatible judge and the RRM worker. Not a model server: it answers what it is told to.
//!
//! ```text
//!  TestChatServer::start() ─► 127.0.0.1:<free port>
//!  POST /v1/chat/completions ─► recorded ─► next scripted Reply (FIFO), else the default Reply
//!  anything else ─► 404
//! ```
//!
//! Served by hyper (HTTP/1.1, one request per connection) with an axum router; see [`serve`]
//! for how a dropped connection is made.

mod serve;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

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
    /// A well-formed Agent-RRM answer: `<think>`, `<critique>` and `<score>` blocks.
    ///
    /// The format is `rrm_worker::output::render`'s (this crate does not depend on the worker);
    /// the judge's tests parse every answer written here, so a drift between the two fails them.
    pub fn answer(trace: &str, critique: &str, score: impl std::fmt::Display) -> Self {
        Self::Content(format!("<think>{trace}</think>\n<critique>{critique}</critique>\n<score>{score}</score>"))
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

/// What the server shares between its connections.
#[derive(Debug)]
struct State {
    script: Mutex<VecDeque<Reply>>,
    default: Mutex<Reply>,
    requests: Mutex<Vec<Recorded>>,
    open: AtomicUsize,
    active: AtomicUsize,
    peak: AtomicUsize,
}

impl State {
    fn next(&self) -> Reply {
        let scripted = self.script.lock().ok().and_then(|mut s| s.pop_front());
        scripted.unwrap_or_else(|| self.default.lock().map(|d| d.clone()).unwrap_or(Reply::Drop))
    }
}

/// Counts a request as being answered until released (just before its reply is written, so a
/// client cannot start its next request while this one still counts) or dropped.
struct Active(Option<Arc<State>>);

impl Active {
    fn new(state: &Arc<State>) -> Self {
        let now = state.active.fetch_add(1, Ordering::SeqCst) + 1;
        state.peak.fetch_max(now, Ordering::SeqCst);
        Self(Some(state.clone()))
    }

    fn release(&mut self) {
        if let Some(state) = self.0.take() {
            state.active.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        self.release();
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
        tokio::spawn(serve::accept(listener, state.clone(), stop.clone()));
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
