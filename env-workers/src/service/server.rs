//! The env-worker tarpc server: serves a [`SessionTable`] on a TCP listener it is given, to
//! authenticated connections within limits, expires idle sessions, and shuts down gracefully
//! when its token is cancelled.
//!
//! ```text
//!  listener ──accept──► (handshakes pending ≤ max_pending_handshakes, and from this peer
//!    ≤ max_pending_handshakes_per_peer, else closed) keepalive ─► handshake (token, within
//!    handshake_timeout_ms) ─► (authenticated ≤ max_connections, else closed) ─►
//!    transport (frame ≤ max_request_bytes, decoded memory ≤ 8×, deadline ≤ max_deadline,
//!               read and idle timeouts) ─► tarpc channel (≤ max_in_flight requests)
//!    ─► EnvServer { owner: this connection } ─► SessionTable        connection ends: its sessions freed
//!  reaper: every idle_timeout/4, drop sessions idle past idle_timeout
//!  shutdown: stop accepting, refuse new sessions, wait (≤ grace) for open ones to close
//! ```
//!
//! A connection holds a slot of `max_connections` only once it has presented the token, so
//! sockets that never do cannot keep a token holder out: they wait in the handshake budgets,
//! whose per-peer cap keeps one address from taking them all (an attacker with many addresses
//! can still delay handshakes; who may reach a worker is the network policy's to decide,
//! SECURITY.md). Refusals are logged at most once per [`WARN_EVERY`] per kind, with a count.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
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
    /// Slots of authenticated connections (`max_connections`).
    connections: Arc<Semaphore>,
    /// Connections in their handshake, by peer address.
    pending: Mutex<Pending>,
    /// Throttled warnings: pending budgets full, handshakes failed, connection slots full.
    warn_pending_full: Throttle,
    warn_handshake: Throttle,
    warn_connections_full: Throttle,
}

/// How often one kind of refusal is logged, at most.
pub const WARN_EVERY: Duration = Duration::from_secs(5);

/// Connections in their handshake: in all, and per peer address.
#[derive(Debug, Default)]
struct Pending {
    total: usize,
    by_peer: HashMap<IpAddr, usize>,
}

/// A connection's place in the handshake budgets, given back when dropped.
struct PendingSlot {
    shared: Arc<Shared>,
    peer: IpAddr,
}

impl Drop for PendingSlot {
    fn drop(&mut self) {
        let mut p = self.shared.pending.lock().unwrap_or_else(PoisonError::into_inner);
        p.total -= 1;
        if let Some(n) = p.by_peer.get_mut(&self.peer) {
            *n -= 1;
            if *n == 0 {
                p.by_peer.remove(&self.peer);
            }
        }
    }
}

impl Shared {
    /// The state every connection of one server shares.
    fn new(table: Arc<SessionTable>, config: EnvWorkerConfig, token: Option<Token>) -> Arc<Self> {
        Arc::new(Self {
            table,
            connections: Arc::new(Semaphore::new(config.max_connections)),
            config,
            token,
            pending: Mutex::default(),
            warn_pending_full: Throttle::default(),
            warn_handshake: Throttle::default(),
            warn_connections_full: Throttle::default(),
        })
    }

    /// A place in the handshake budgets for a connection from `peer`, or the budget that is full.
    fn admit(self: &Arc<Self>, peer: IpAddr) -> Result<PendingSlot, &'static str> {
        let mut p = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        if p.total >= self.config.max_pending_handshakes {
            return Err("max_pending_handshakes");
        }
        let mine = p.by_peer.entry(peer).or_insert(0);
        if *mine >= self.config.max_pending_handshakes_per_peer {
            return Err("max_pending_handshakes_per_peer");
        }
        *mine += 1;
        p.total += 1;
        Ok(PendingSlot { shared: self.clone(), peer })
    }
}

/// At most one log line per [`WARN_EVERY`] for one kind of event; the others are counted and
/// the count goes into the next line.
#[derive(Debug, Default)]
struct Throttle {
    /// When the last line was written, and the events left out since.
    state: Mutex<(Option<Instant>, u64)>,
}

impl Throttle {
    /// `Some(left_out)` when this event should be logged (`left_out` events were not since the
    /// last line); `None` when it is one of those left out.
    fn admit(&self) -> Option<u64> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        match state.0 {
            Some(last) if now.duration_since(last) < WARN_EVERY => {
                state.1 += 1;
                None
            }
            _ => {
                let left_out = std::mem::take(&mut state.1);
                state.0 = Some(now);
                Some(left_out)
            }
        }
    }
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
    let shared = Shared::new(table.clone(), options.config.clone(), options.token);
    let mut connections = 0u64;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let slot = match shared.admit(peer.ip()) {
                        Ok(slot) => slot,
                        Err(budget) => {
                            if let Some(left_out) = shared.warn_pending_full.admit() {
                                tracing::warn!(%peer, budget, left_out, "connection refused: too many handshakes pending");
                            }
                            continue;
                        }
                    };
                    connections += 1;
                    // Connections keep being served during the grace period, so clients can
                    // finish and close their sessions; they end when the client hangs up.
                    tokio::spawn(connection(stream, peer, Owner(connections), slot, shared.clone()));
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

async fn connection(mut stream: TcpStream, peer: SocketAddr, owner: Owner, pending: PendingSlot, s: Arc<Shared>) {
    let c = &s.config;
    if let Some(every) = c.keepalive() {
        keepalive(&stream, every);
    }
    let _ = stream.set_nodelay(true);
    let handshake = auth::accept(&mut stream, s.token.as_ref(), c.handshake_timeout()).await;
    drop(pending);
    if let Err(e) = handshake {
        if let Some(left_out) = s.warn_handshake.admit() {
            tracing::warn!(%peer, error = %e, left_out, "connection refused");
        }
        return;
    }
    let Ok(_permit): Result<OwnedSemaphorePermit, _> = s.connections.clone().try_acquire_owned() else {
        if let Some(left_out) = s.warn_connections_full.admit() {
            tracing::warn!(%peer, limit = c.max_connections, left_out, "connection refused: too many connections");
        }
        return;
    };
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]
    use super::*;

    fn shared(total: usize, per_peer: usize) -> Arc<Shared> {
        let config = EnvWorkerConfig {
            max_pending_handshakes: total,
            max_pending_handshakes_per_peer: per_peer,
            ..EnvWorkerConfig::default()
        };
        Shared::new(Arc::new(SessionTable::new(super::super::sessions::TableConfig::default())), config, None)
    }

    #[test]
    fn one_peer_cannot_take_every_handshake_slot_and_slots_come_back() {
        let s = shared(5, 2);
        let (a, b, c): (IpAddr, IpAddr, IpAddr) =
            ("127.0.0.2".parse().unwrap(), "127.0.0.1".parse().unwrap(), "10.0.0.7".parse().unwrap());
        let a1 = s.admit(a).unwrap();
        let _a2 = s.admit(a).unwrap();
        assert_eq!(s.admit(a).err(), Some("max_pending_handshakes_per_peer"), "a third from the same address");
        let _b1 = s.admit(b).unwrap();
        let _b2 = s.admit(b).unwrap();
        let _c1 = s.admit(c).unwrap();
        assert_eq!(s.admit(c).err(), Some("max_pending_handshakes"), "five pending in all");
        drop(a1);
        assert!(s.admit(c).is_ok(), "a finished handshake gives its place back");
        assert_eq!(s.pending.lock().unwrap().by_peer.get(&a), Some(&1));
    }

    #[test]
    fn a_throttle_logs_once_per_period_and_counts_what_it_left_out() {
        let t = Throttle::default();
        assert_eq!(t.admit(), Some(0), "the first event is logged");
        assert_eq!((t.admit(), t.admit(), t.admit()), (None, None, None), "then left out within the period");
        t.state.lock().unwrap().0 = Instant::now().checked_sub(WARN_EVERY);
        assert_eq!(t.admit(), Some(3), "the next line says how many were left out");
        assert_eq!(t.admit(), None);
    }
}
