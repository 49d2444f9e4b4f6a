//! The client of one environment server: every call within the deadline the env-worker calls
//! get (`actor.env_timeout_ms`), retried while the server was not reached or answered 503, the
//! shared token as a bearer header, reply bodies capped, and the episode limits applied here,
//! as an env-worker applies them around its environments ([`Limits`]).
//!
//! ```text
//!  connect ─► GET /v1/info (token checked, protocol = reagent-env/1) ─► HttpEnv
//!  open(spec) ─► POST /v1/open ─► SessionId (ours, random) ↔ the server's session id
//!  step(s, m) ─► over the length limit? refused here : POST /v1/step ─► after_turn (turn limit)
//!  close(s)   ─► POST /v1/close            verify / reference ─► POST, when /v1/info offers them
//!  each call: attempt ─ not reached / 503 ─► back off 50 ms, doubling ─► attempt … until the deadline
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use protocol::rpc::{Opened, ServiceError, SessionId, Start};
use protocol::wire::{Finding, Observation, TaskSpec};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::time::Instant;

use super::endpoint::Endpoint;
use super::wire::{
    CloseReply, ErrorBody, Info, OpenReply, ReferenceReply, StepReply, StepRequest, TaskRequest, VerifyReply,
    VerifyRequest, PROTOCOL,
};
use crate::chat::{describe, excerpt};
use crate::error::EnvError;
use crate::service::{Token, MAX_FRAME_BYTES};
use crate::session::Limits;

/// First pause before retrying a call the server did not take.
const FIRST_BACKOFF: Duration = Duration::from_millis(50);

/// One session as this client tracks it.
#[derive(Debug)]
struct Remote {
    id: String,
    turns: usize,
    over: bool,
}

struct Inner {
    http: reqwest::Client,
    endpoint: Endpoint,
    token: Option<Token>,
    timeout: Duration,
    limits: Limits,
    info: Info,
    sessions: Mutex<HashMap<SessionId, Remote>>,
}

/// Sessions on an environment server that speaks the HTTP protocol (`docs/env-http.md`).
#[derive(Clone)]
pub struct HttpEnv {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for HttpEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpEnv").field("peer", &self.peer()).field("info", &self.inner.info).finish_non_exhaustive()
    }
}

/// Why one attempt failed.
enum Failure {
    /// The server was not reached, or said 503 (it did nothing): worth another attempt.
    Retry(String),
    /// 404: an unknown session, or an optional call not served.
    NotFound(String),
    /// Anything else.
    Final(EnvError),
}

impl HttpEnv {
    /// Checks `endpoint` (a token is required off loopback), then asks the server what it is
    /// within `timeout`, presenting `token`; each later call gets `timeout` too. Episodes are
    /// held to `limits`.
    pub async fn connect(
        endpoint: &str,
        timeout: Duration,
        token: Option<&Token>,
        limits: Limits,
    ) -> Result<Self, EnvError> {
        let endpoint = Endpoint::parse(endpoint, token.is_some())?;
        let http = reqwest::Client::builder()
            .connect_timeout(timeout)
            .build()
            .map_err(|e| EnvError::Endpoint { endpoint: endpoint.peer().to_string(), detail: describe(e) })?;
        let mut inner = Inner {
            http,
            endpoint,
            token: token.cloned(),
            timeout,
            limits,
            info: Info { protocol: String::new(), name: String::new(), verify: false, reference: false },
            sessions: Mutex::default(),
        };
        let info: Info = inner
            .call("info", reqwest::Method::GET, "info", None::<&()>)
            .await
            .map_err(|f| f.into_error(&inner, "info"))?;
        if info.protocol != PROTOCOL {
            return Err(EnvError::Endpoint {
                endpoint: inner.endpoint.peer().to_string(),
                detail: format!("speaks {:?}, not {PROTOCOL:?}", excerpt(&info.protocol)),
            });
        }
        inner.info = info;
        Ok(Self { inner: Arc::new(inner) })
    }

    /// The server, as errors name it.
    pub fn peer(&self) -> &str {
        self.inner.endpoint.peer()
    }

    /// What the server said it is and serves.
    pub fn info(&self) -> &Info {
        &self.inner.info
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, Remote>> {
        self.inner.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Opens a session for `spec` (an `http` task).
    pub async fn open(&self, spec: TaskSpec) -> Result<Opened, EnvError> {
        if spec.family != protocol::wire::TaskFamily::Http {
            let detail = format!("{} tasks are built in; an environment server serves http tasks", spec.family);
            return Err(ServiceError::BadRequest(detail).into());
        }
        let body = TaskRequest { task: spec.into() };
        let reply: OpenReply = self.inner.post("open", Some(&body)).await?;
        let (id, prompt) = reply.checked().map_err(|d| self.inner.malformed("open", d))?;
        let session = SessionId::random();
        self.sessions().insert(session, Remote { id, turns: 0, over: false });
        Ok(Opened { session, start: Start::Text(prompt) })
    }

    /// Steps a session with the agent's `message`, within the episode limits.
    pub async fn step(&self, session: SessionId, message: &str) -> Result<Observation, EnvError> {
        let (id, turns) = {
            let mut sessions = self.sessions();
            let remote = sessions.get_mut(&session).ok_or(ServiceError::UnknownSession(session))?;
            if remote.over {
                return Ok(Observation::flawed("the episode is over; no further actions are accepted"));
            }
            remote.turns += 1;
            (remote.id.clone(), remote.turns)
        };
        let obs = match self.inner.limits.refuse(message) {
            Some(refused) => refused,
            None => {
                let body = StepRequest { session: &id, message: Some(message) };
                let reply: StepReply = self.inner.post("step", Some(&body)).await.map_err(|e| match e {
                    EnvError::Service(ServiceError::UnknownSession(_)) => ServiceError::UnknownSession(session).into(),
                    other => other,
                })?;
                reply.checked().map_err(|d| self.inner.malformed("step", d))?
            }
        };
        let obs = self.inner.limits.after_turn(turns, obs);
        if obs.end.is_some() {
            if let Some(remote) = self.sessions().get_mut(&session) {
                remote.over = true;
            }
        }
        Ok(obs)
    }

    /// Closes a session; returns whether it was open (here and on the server).
    pub async fn close(&self, session: SessionId) -> Result<bool, EnvError> {
        let Some(remote) = self.sessions().remove(&session) else {
            return Ok(false);
        };
        let body = StepRequest { session: &remote.id, message: None };
        match self.inner.post::<_, CloseReply>("close", Some(&body)).await {
            Ok(reply) => Ok(reply.closed),
            Err(EnvError::Service(ServiceError::UnknownSession(_))) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The server's step-verifier findings on an episode of `spec`, given its agent messages
    /// (held to the limits as in play); [`EnvError::Unsupported`] when it serves no verify.
    pub async fn verify(&self, spec: TaskSpec, agent_messages: &[String]) -> Result<Vec<Finding>, EnvError> {
        self.require(self.inner.info.verify, "verify")?;
        let (played, over) = self.inner.limits.playable(agent_messages);
        let body = VerifyRequest { task: spec.into(), messages: played };
        let reply: VerifyReply = self.inner.post("verify", Some(&body)).await?;
        let mut findings = reply.checked(played.len()).map_err(|d| self.inner.malformed("verify", d))?;
        findings.extend(over);
        Ok(findings)
    }

    /// The agent messages of a correct episode of `spec`; [`EnvError::Unsupported`] when the
    /// server serves no reference.
    pub async fn reference(&self, spec: TaskSpec) -> Result<Vec<String>, EnvError> {
        self.require(self.inner.info.reference, "reference")?;
        let reply: ReferenceReply = self.inner.post("reference", Some(&TaskRequest { task: spec.into() })).await?;
        Ok(reply.messages)
    }

    fn require(&self, served: bool, op: &'static str) -> Result<(), EnvError> {
        if served {
            return Ok(());
        }
        Err(EnvError::Unsupported { peer: self.peer().to_string(), op })
    }
}

impl Failure {
    /// The error a caller sees for a failed call of `op`.
    fn into_error(self, inner: &Inner, op: &'static str) -> EnvError {
        let peer = inner.endpoint.peer().to_string();
        match self {
            Self::Retry(detail) => EnvError::Rpc { peer, op, detail },
            Self::NotFound(detail) => match op {
                "step" | "close" => ServiceError::UnknownSession(SessionId(0)).into(),
                "verify" | "reference" => EnvError::Unsupported { peer, op },
                _ => EnvError::Rpc { peer, op, detail: format!("not found (404): {detail}") },
            },
            Self::Final(e) => e,
        }
    }
}

impl Inner {
    fn malformed(&self, op: &'static str, detail: String) -> EnvError {
        EnvError::Rpc { peer: self.endpoint.peer().to_string(), op, detail: format!("malformed reply: {detail}") }
    }

    /// `POST /v1/<op>` with `body`.
    async fn post<B: Serialize, R: DeserializeOwned>(&self, op: &'static str, body: Option<&B>) -> Result<R, EnvError> {
        self.call(op, reqwest::Method::POST, op, body).await.map_err(|f| f.into_error(self, op))
    }

    /// One call: attempts until one is taken, or the deadline passes.
    async fn call<B: Serialize, R: DeserializeOwned>(
        &self,
        op: &'static str,
        method: reqwest::Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<R, Failure> {
        let deadline = Instant::now() + self.timeout.min(Duration::from_secs(86_400));
        let late =
            || Failure::Final(EnvError::Timeout { peer: self.endpoint.peer().to_string(), op, after: self.timeout });
        let mut backoff = FIRST_BACKOFF;
        loop {
            let attempt = self.attempt(op, method.clone(), path, body);
            match tokio::time::timeout_at(deadline, attempt).await {
                Err(_) => return Err(late()),
                Ok(Err(Failure::Retry(detail))) => {
                    if Instant::now() + backoff >= deadline {
                        return Err(Failure::Retry(detail));
                    }
                    tracing::debug!(peer = %self.endpoint.peer(), op, %detail, ?backoff, "environment server call retried");
                    tokio::time::sleep(backoff).await;
                    backoff *= 2;
                }
                Ok(other) => return other,
            }
        }
    }

    async fn attempt<B: Serialize, R: DeserializeOwned>(
        &self,
        op: &'static str,
        method: reqwest::Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<R, Failure> {
        let peer = || self.endpoint.peer().to_string();
        let mut request = self.http.request(method, self.endpoint.url(path));
        if let Some(token) = &self.token {
            request = request.bearer_auth(token.expose());
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let mut response = request.send().await.map_err(|e| {
            if e.is_connect() {
                Failure::Retry(describe(e))
            } else {
                Failure::Final(EnvError::Rpc { peer: peer(), op, detail: describe(e) })
            }
        })?;
        let status = response.status().as_u16();
        let mut bytes = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| Failure::Final(EnvError::Rpc { peer: peer(), op, detail: describe(e) }))?
        {
            if bytes.len() + chunk.len() > MAX_FRAME_BYTES {
                let detail = format!("a reply over {MAX_FRAME_BYTES} bytes");
                return Err(Failure::Final(EnvError::Rpc { peer: peer(), op, detail }));
            }
            bytes.extend_from_slice(&chunk);
        }
        let said = || {
            serde_json::from_slice::<ErrorBody>(&bytes)
                .map_or_else(|_| excerpt(&String::from_utf8_lossy(&bytes)), |b| excerpt(&b.error))
        };
        match status {
            200..=299 => serde_json::from_slice(&bytes).map_err(|e| {
                let detail = format!("malformed reply ({e}): {}", excerpt(&String::from_utf8_lossy(&bytes)));
                Failure::Final(EnvError::Rpc { peer: peer(), op, detail })
            }),
            401 | 403 => Err(Failure::Final(EnvError::Unauthorized { peer: peer() })),
            404 => Err(Failure::NotFound(said())),
            503 => Err(Failure::Retry(format!("busy (HTTP 503): {}", said()))),
            400 | 413 | 422 => Err(Failure::Final(ServiceError::BadRequest(said()).into())),
            other => {
                Err(Failure::Final(EnvError::Rpc { peer: peer(), op, detail: format!("HTTP {other}: {}", said()) }))
            }
        }
    }
}
