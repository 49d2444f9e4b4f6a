//! The env-worker tarpc server: serves a [`SessionTable`] on a TCP listener it is given, expires
//! idle sessions, and shuts down gracefully when its token is cancelled.
//!
//! ```text
//!  listener ──accept──► connection ──tarpc channel──► EnvServer (shared SessionTable)
//!  reaper: every idle_timeout/4, drop sessions idle past idle_timeout
//!  shutdown: stop accepting, refuse new sessions, wait (≤ grace) for open ones to close
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{future, StreamExt};
use protocol::rpc::{EnvAction, EnvService, Opened, ServiceError, SessionId, StepReply};
use protocol::wire::{Finding, TaskSpec};
use tarpc::context::Context;
use tarpc::server::{BaseChannel, Channel};
use tarpc::tokio_serde::formats::Bincode;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::SessionTable;

/// Largest request or reply frame accepted, in bytes.
pub const MAX_FRAME_BYTES: usize = 16 << 20;

/// The tarpc handler: a handle on the shared table.
#[derive(Clone)]
pub struct EnvServer {
    table: Arc<SessionTable>,
}

impl EnvServer {
    /// A handler over `table`.
    pub fn new(table: Arc<SessionTable>) -> Self {
        Self { table }
    }
}

impl EnvService for EnvServer {
    async fn open(self, _: Context, spec: TaskSpec) -> Result<Opened, ServiceError> {
        let opened = self.table.open(spec);
        if let Err(e) = &opened {
            tracing::debug!(family = %spec.family, seed = spec.seed, error = %e, "open refused");
        }
        opened
    }

    async fn step(self, _: Context, session: SessionId, action: EnvAction) -> Result<StepReply, ServiceError> {
        self.table.step(session, action)
    }

    async fn step_batch(self, _: Context, steps: Vec<(SessionId, EnvAction)>) -> Vec<Result<StepReply, ServiceError>> {
        steps.into_iter().map(|(s, a)| self.table.step(s, a)).collect()
    }

    async fn reference(self, _: Context, spec: TaskSpec) -> Result<Vec<String>, ServiceError> {
        self.table.reference(spec)
    }

    async fn verify(
        self,
        _: Context,
        spec: TaskSpec,
        agent_messages: Vec<String>,
    ) -> Result<Vec<Finding>, ServiceError> {
        self.table.verify(spec, &agent_messages)
    }

    async fn close(self, _: Context, session: SessionId) -> bool {
        self.table.close(session)
    }
}

/// Serves `table` on `listener` until `shutdown` is cancelled, then refuses new sessions and
/// waits up to `grace` for open ones to be closed. Malformed frames end their connection only.
pub async fn serve(
    listener: TcpListener,
    table: Arc<SessionTable>,
    shutdown: CancellationToken,
    grace: Duration,
) -> std::io::Result<()> {
    let addr = listener.local_addr()?;
    let mut incoming = tarpc::serde_transport::tcp::listen_on(listener, Bincode::default).await?;
    incoming.config_mut().max_frame_length(MAX_FRAME_BYTES);
    let reaper = tokio::spawn(reap(table.clone(), shutdown.clone()));
    tracing::info!(%addr, "env-worker listening");
    let server = EnvServer::new(table.clone());
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            conn = incoming.next() => match conn {
                Some(Ok(transport)) => {
                    let channel = BaseChannel::with_defaults(transport);
                    // Connections keep being served during the grace period, so clients can
                    // finish and close their sessions; they end when the client hangs up.
                    let serving = channel.execute(server.clone().serve()).for_each(|call| {
                        tokio::spawn(call);
                        future::ready(())
                    });
                    tokio::spawn(serving);
                }
                Some(Err(e)) => tracing::warn!(error = %e, "accepting a connection failed"),
                None => break,
            },
        }
    }
    table.begin_shutdown();
    let deadline = Instant::now() + grace;
    while !table.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tracing::info!(%addr, left_open = table.len(), "env-worker stopped");
    reaper.abort();
    Ok(())
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
