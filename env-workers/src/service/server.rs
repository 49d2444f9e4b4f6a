//! The env-worker tarpc server: serves a [`SessionTable`] on a TCP listener it is given, to
//! authenticated connections within limits, expires idle sessions, and shuts down gracefully
//! when its token is cancelled.
//!
//! ```text
//!  listener ──accept──► (≤ max_connections, else closed) keepalive ─► handshake (token) ─►
//!    transport (frame ≤ max_request_bytes, decoded memory ≤ 8×, deadline ≤ max_deadline,
//!               read and idle timeouts) ─► tarpc channel (≤ max_in_flight requests)
//!    ─► EnvServer { owner: this connection } ─► SessionTable        connection ends: its sessions freed
//!  reaper: every idle_timeout/4, drop sessions idle past idle_timeout
//!  shutdown: stop accepting, refuse new sessions, wait (≤ grace) for open ones to close
//! ```

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{future, StreamExt};
use protocol::rpc::{EnvAction, EnvService, Opened, ServiceError, SessionId, StepReply};
use protocol::wire::{Finding, TaskSpec};
use tarpc::context::Context;
use tarpc::server::{BaseChannel, Channel};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use super::auth::{self, Token};
use super::sessions::Owner;
use super::transport::{self, Timeouts};
use super::{EnvWorkerConfig, SessionTable};

/// How a worker serves: its limits, its token, its grace period.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Limits and timeouts (`[env_worker]`).
    pub config: EnvWorkerConfig,
    /// The token connections must present; `None` accepts any (loopback only).
    pub token: Option<Token>,
    /// On shutdown, how long open sessions get to close.
    pub grace: Duration,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self { config: EnvWorkerConfig::default(), token: None, grace: Duration::from_secs(5) }
    }
}

/// The tarpc handler of one connection: a handle on the shared table, as that connection.
#[derive(Clone)]
pub struct EnvServer {
    table: Arc<SessionTable>,
    owner: Owner,
    max_batch: usize,
}

impl EnvServer {
    /// A handler over `table` for the connection `owner`.
    pub fn new(table: Arc<SessionTable>, owner: Owner, max_batch: usize) -> Self {
        Self { table, owner, max_batch }
    }
}

fn too_large(what: impl Into<String>, found: usize, limit: usize) -> ServiceError {
    ServiceError::TooLarge { what: what.into(), found, limit }
}

impl EnvService for EnvServer {
    async fn open(self, _: Context, spec: TaskSpec) -> Result<Opened, ServiceError> {
        let opened = self.table.open(self.owner, spec);
        if let Err(e) = &opened {
            tracing::debug!(family = %spec.family, seed = spec.seed, error = %e, "open refused");
        }
        opened
    }

    async fn step(self, _: Context, session: SessionId, action: EnvAction) -> Result<StepReply, ServiceError> {
        self.table.step(self.owner, session, action)
    }

    async fn step_batch(
        self,
        _: Context,
        steps: Vec<(SessionId, EnvAction)>,
    ) -> Result<Vec<Result<StepReply, ServiceError>>, ServiceError> {
        if steps.len() > self.max_batch {
            return Err(too_large("sessions per step_batch", steps.len(), self.max_batch));
        }
        Ok(steps.into_iter().map(|(s, a)| self.table.step(self.owner, s, a)).collect())
    }

    async fn verify(
        self,
        _: Context,
        spec: TaskSpec,
        agent_messages: Vec<String>,
    ) -> Result<Vec<Finding>, ServiceError> {
        let limits = self.table.config().limits;
        if agent_messages.len() > limits.max_turns {
            return Err(too_large("messages per verify", agent_messages.len(), limits.max_turns));
        }
        for (i, m) in agent_messages.iter().enumerate() {
            let chars = m.chars().take(limits.max_message_chars + 1).count();
            if chars > limits.max_message_chars {
                return Err(too_large(
                    format!("characters of message {i}"),
                    m.chars().count(),
                    limits.max_message_chars,
                ));
            }
        }
        self.table.verify(spec, &agent_messages)
    }

    async fn close(self, _: Context, session: SessionId) -> Result<bool, ServiceError> {
        self.table.close(self.owner, session)
    }
}

struct Shared {
    table: Arc<SessionTable>,
    config: EnvWorkerConfig,
    token: Option<Token>,
}

/// Serves `table` on `listener` until `shutdown` is cancelled, then refuses new sessions and
/// waits up to `options.grace` for open ones to be closed. A bad connection (no or wrong
/// token, garbage, oversized or slow frames, too many requests) ends itself only.
pub async fn serve(
    listener: TcpListener,
    table: Arc<SessionTable>,
    options: ServeOptions,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let addr = listener.local_addr()?;
    let reaper = tokio::spawn(reap(table.clone(), shutdown.clone()));
    tracing::info!(%addr, authenticated = options.token.is_some(), "env-worker listening");
    let permits = Arc::new(Semaphore::new(options.config.max_connections));
    let shared = Arc::new(Shared { table: table.clone(), config: options.config.clone(), token: options.token });
    let mut connections = 0u64;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let Ok(permit) = permits.clone().try_acquire_owned() else {
                        tracing::warn!(%peer, limit = shared.config.max_connections, "connection refused: too many connections");
                        continue;
                    };
                    connections += 1;
                    // Connections keep being served during the grace period, so clients can
                    // finish and close their sessions; they end when the client hangs up.
                    tokio::spawn(connection(stream, peer, Owner(connections), permit, shared.clone()));
                }
                Err(e) => {
                    // Out of descriptors and the like: back off briefly rather than spin.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
        }
    }
    table.begin_shutdown();
    let deadline = Instant::now() + options.grace;
    while !table.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tracing::info!(%addr, left_open = table.len(), "env-worker stopped");
    reaper.abort();
    Ok(())
}

fn keepalive(stream: &TcpStream, every: Duration) {
    let probe = socket2::TcpKeepalive::new().with_time(every).with_interval(every);
    if let Err(e) = socket2::SockRef::from(stream).set_tcp_keepalive(&probe) {
        tracing::debug!(error = %e, "could not set TCP keepalive");
    }
}

async fn connection(
    mut stream: TcpStream,
    peer: SocketAddr,
    owner: Owner,
    _permit: OwnedSemaphorePermit,
    s: Arc<Shared>,
) {
    let c = &s.config;
    if let Some(every) = c.keepalive() {
        keepalive(&stream, every);
    }
    let _ = stream.set_nodelay(true);
    if let Err(e) = auth::accept(&mut stream, s.token.as_ref(), c.handshake_timeout()).await {
        tracing::warn!(%peer, error = %e, "connection refused");
        return;
    }
    let timeouts = Timeouts { read: c.read_timeout(), idle: c.idle_timeout() };
    let transport = transport::server(stream, c.max_request_bytes, c.max_deadline(), timeouts);
    let handler = EnvServer::new(s.table.clone(), owner, c.max_batch);
    BaseChannel::with_defaults(transport)
        .max_concurrent_requests(c.max_in_flight)
        .execute(handler.serve())
        .for_each(|call| {
            tokio::spawn(call);
            future::ready(())
        })
        .await;
    let freed = s.table.close_owner(owner);
    tracing::debug!(%peer, freed, "connection closed; its sessions freed");
}

async fn reap(table: Arc<SessionTable>, shutdown: CancellationToken) {
    let every = (table.config().idle_timeout / 4).max(Duration::from_millis(10));
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(every) => {
                let dropped = table.expire_idle();
                if dropped > 0 {
                    tracing::info!(dropped, "idle sessions expired");
                }
            }
        }
    }
}
