//! The client actors use to drive environments, the same whether the sessions live in this
//! process, on an env-worker across the network, or on an environment server speaking the HTTP
//! protocol ([`crate::http_env`]). A remote connection presents the shared token first
//! ([`super::auth`]); every remote call has a deadline; errors name the peer.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use protocol::rpc::{EnvAction, EnvServiceClient, Opened, ServiceError, SessionId, StepReply};
use protocol::wire::{Finding, TaskSpec};
use tarpc::client::RpcError;
use tarpc::context;

use super::auth::{self, HandshakeError};
use super::{transport, Owner, SessionTable, Token};
use crate::error::EnvError;
use crate::http_env::HttpEnv;

/// Drives sessions in-process or on a remote env-worker.
#[derive(Clone)]
pub enum EnvClient {
    /// Sessions in this process.
    Local(Arc<SessionTable>),
    /// Sessions on an env-worker.
    Remote {
        /// The tarpc client.
        client: EnvServiceClient,
        /// The worker's address, for errors.
        peer: SocketAddr,
        /// Deadline of each call.
        timeout: Duration,
    },
    /// Sessions on an environment server, over HTTP.
    Http(HttpEnv),
}

impl EnvClient {
    /// An in-process client over `table`.
    pub fn local(table: Arc<SessionTable>) -> Self {
        Self::Local(table)
    }

    /// Connects to the env-worker at `peer` within `timeout`, presenting `token`; each later
    /// call gets `timeout`.
    pub async fn connect(peer: SocketAddr, timeout: Duration, token: Option<&Token>) -> Result<Self, EnvError> {
        let rpc = |detail: String| EnvError::Rpc { peer: peer.to_string(), op: "connect", detail };
        let late = || EnvError::Timeout { peer: peer.to_string(), op: "connect", after: timeout };
        let mut stream = match tokio::time::timeout(timeout, tokio::net::TcpStream::connect(peer)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return Err(rpc(e.to_string())),
            Err(_) => return Err(late()),
        };
        let _ = stream.set_nodelay(true);
        match auth::present(&mut stream, token, timeout).await {
            Ok(()) => {}
            Err(HandshakeError::Refused) => return Err(EnvError::Unauthorized { peer: peer.to_string() }),
            Err(HandshakeError::Timeout(_)) => return Err(late()),
            Err(e) => return Err(rpc(e.to_string())),
        }
        let client = EnvServiceClient::new(tarpc::client::Config::default(), transport::client(stream)).spawn();
        Ok(Self::Remote { client, peer, timeout })
    }

    /// The message of a text action; a control action is refused (servers serve text tasks).
    fn text(action: EnvAction) -> Result<String, EnvError> {
        match action {
            EnvAction::Text(message) => Ok(message),
            EnvAction::Discrete(_) => {
                Err(ServiceError::BadRequest("a control action: environment servers serve text tasks".into()).into())
            }
        }
    }

    fn ctx(timeout: Duration) -> context::Context {
        // A timeout past a day is a configuration slip, not a deadline: cap it (never overflow).
        let mut ctx = context::current();
        ctx.deadline = Instant::now() + timeout.min(Duration::from_secs(86_400));
        ctx
    }

    fn rpc_err(peer: SocketAddr, op: &'static str, timeout: Duration, e: RpcError) -> EnvError {
        match e {
            RpcError::DeadlineExceeded => EnvError::Timeout { peer: peer.to_string(), op, after: timeout },
            other => EnvError::Rpc { peer: peer.to_string(), op, detail: other.to_string() },
        }
    }

    /// Opens a session for `spec`.
    pub async fn open(&self, spec: TaskSpec) -> Result<Opened, EnvError> {
        match self {
            Self::Local(t) => Ok(t.open(Owner::LOCAL, spec)?),
            Self::Http(h) => h.open(spec).await,
            Self::Remote { client, peer, timeout } => Ok(client
                .open(Self::ctx(*timeout), spec)
                .await
                .map_err(|e| Self::rpc_err(*peer, "open", *timeout, e))??),
        }
    }

    /// Steps one session.
    pub async fn step(&self, session: SessionId, action: EnvAction) -> Result<StepReply, EnvError> {
        match self {
            Self::Local(t) => Ok(t.step(Owner::LOCAL, session, action)?),
            Self::Http(h) => Ok(StepReply::Text(h.step(session, &Self::text(action)?).await?)),
            Self::Remote { client, peer, timeout } => Ok(client
                .step(Self::ctx(*timeout), session, action)
                .await
                .map_err(|e| Self::rpc_err(*peer, "step", *timeout, e))??),
        }
    }

    /// Steps many sessions in one round trip; per-step results in order.
    pub async fn step_batch(
        &self,
        steps: Vec<(SessionId, EnvAction)>,
    ) -> Result<Vec<Result<StepReply, EnvError>>, EnvError> {
        let replies = match self {
            Self::Local(t) => steps.into_iter().map(|(s, a)| t.step(Owner::LOCAL, s, a)).collect::<Vec<_>>(),
            Self::Http(_) => {
                return Ok(futures::future::join_all(steps.into_iter().map(|(s, a)| self.step(s, a))).await);
            }
            Self::Remote { client, peer, timeout } => client
                .step_batch(Self::ctx(*timeout), steps)
                .await
                .map_err(|e| Self::rpc_err(*peer, "step_batch", *timeout, e))??,
        };
        Ok(replies.into_iter().map(|r| r.map_err(EnvError::from)).collect())
    }

    /// The verifier's findings on an episode of a text task.
    pub async fn verify(&self, spec: TaskSpec, agent_messages: Vec<String>) -> Result<Vec<Finding>, EnvError> {
        match self {
            Self::Local(t) => Ok(t.verify(spec, &agent_messages)?),
            Self::Http(h) => h.verify(spec, &agent_messages).await,
            Self::Remote { client, peer, timeout } => Ok(client
                .verify(Self::ctx(*timeout), spec, agent_messages)
                .await
                .map_err(|e| Self::rpc_err(*peer, "verify", *timeout, e))??),
        }
    }

    /// Closes a session; returns whether it was open.
    pub async fn close(&self, session: SessionId) -> Result<bool, EnvError> {
        match self {
            Self::Local(t) => Ok(t.close(Owner::LOCAL, session)?),
            Self::Http(h) => h.close(session).await,
            Self::Remote { client, peer, timeout } => Ok(client
                .close(Self::ctx(*timeout), session)
                .await
                .map_err(|e| Self::rpc_err(*peer, "close", *timeout, e))??),
        }
    }
}
