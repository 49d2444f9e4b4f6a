//! The client actors use to drive environments, the same whether the sessions live in this
//! process or on an env-worker across the network. Every remote call has a deadline; errors
//! name the peer.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use protocol::rpc::{EnvAction, EnvServiceClient, Opened, SessionId, StepReply};
use protocol::wire::{Finding, TaskSpec};
use tarpc::client::RpcError;
use tarpc::context;
use tarpc::tokio_serde::formats::Bincode;

use super::SessionTable;
use crate::error::EnvError;

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
}

impl EnvClient {
    /// An in-process client over `table`.
    pub fn local(table: Arc<SessionTable>) -> Self {
        Self::Local(table)
    }

    /// Connects to the env-worker at `peer` within `timeout`; each later call gets `timeout`.
    pub async fn connect(peer: SocketAddr, timeout: Duration) -> Result<Self, EnvError> {
        let mut connect = tarpc::serde_transport::tcp::connect(peer, Bincode::default);
        connect.config_mut().max_frame_length(super::server::MAX_FRAME_BYTES);
        let transport = match tokio::time::timeout(timeout, connect).await {
            Ok(Ok(t)) => t,
            Ok(Err(e)) => return Err(EnvError::Rpc { peer: peer.to_string(), op: "connect", detail: e.to_string() }),
            Err(_) => return Err(EnvError::Timeout { peer: peer.to_string(), op: "connect", after: timeout }),
        };
        let client = EnvServiceClient::new(tarpc::client::Config::default(), transport).spawn();
        Ok(Self::Remote { client, peer, timeout })
    }

    fn ctx(timeout: Duration) -> context::Context {
        let mut ctx = context::current();
        ctx.deadline = Instant::now() + timeout;
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
            Self::Local(t) => Ok(t.open(spec)?),
            Self::Remote { client, peer, timeout } => Ok(client
                .open(Self::ctx(*timeout), spec)
                .await
                .map_err(|e| Self::rpc_err(*peer, "open", *timeout, e))??),
        }
    }

    /// Steps one session.
    pub async fn step(&self, session: SessionId, action: EnvAction) -> Result<StepReply, EnvError> {
        match self {
            Self::Local(t) => Ok(t.step(session, action)?),
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
            Self::Local(t) => steps.into_iter().map(|(s, a)| t.step(s, a)).collect::<Vec<_>>(),
            Self::Remote { client, peer, timeout } => client
                .step_batch(Self::ctx(*timeout), steps)
                .await
                .map_err(|e| Self::rpc_err(*peer, "step_batch", *timeout, e))?,
        };
        Ok(replies.into_iter().map(|r| r.map_err(EnvError::from)).collect())
    }

    /// The reference solution of a text task.
    pub async fn reference(&self, spec: TaskSpec) -> Result<Vec<String>, EnvError> {
        match self {
            Self::Local(t) => Ok(t.reference(spec)?),
            Self::Remote { client, peer, timeout } => Ok(client
                .reference(Self::ctx(*timeout), spec)
                .await
                .map_err(|e| Self::rpc_err(*peer, "reference", *timeout, e))??),
        }
    }

    /// The verifier's findings on an episode of a text task.
    pub async fn verify(&self, spec: TaskSpec, agent_messages: Vec<String>) -> Result<Vec<Finding>, EnvError> {
        match self {
            Self::Local(t) => Ok(t.verify(spec, &agent_messages)?),
            Self::Remote { client, peer, timeout } => Ok(client
                .verify(Self::ctx(*timeout), spec, agent_messages)
                .await
                .map_err(|e| Self::rpc_err(*peer, "verify", *timeout, e))??),
        }
    }

    /// Closes a session; returns whether it was open.
    pub async fn close(&self, session: SessionId) -> Result<bool, EnvError> {
        match self {
            Self::Local(t) => Ok(t.close(session)),
            Self::Remote { client, peer, timeout } => {
                client.close(Self::ctx(*timeout), session).await.map_err(|e| Self::rpc_err(*peer, "close", *timeout, e))
            }
        }
    }
}
