//! A Redis connection that reconnects with backoff and puts a deadline on every command.
//!
//! ```text
//!  call(op) ──► connection? ──no──► connect (connect_timeout) ─┐
//!                 │ yes                                         │
//!                 ▼                                             ▼
//!          command (op_timeout + extra) ── ok ──► reply
//!                 │ error or timeout
//!                 ▼
//!   retryable (I/O, dropped, LOADING, TRYAGAIN…) and within retry_for?
//!         yes: drop the connection, back off (doubling, jittered), try again
//!         no:  ProtocolError naming the endpoint and the operation
//! ```
//!
//! A blocking read holds its connection for the block time, so every consumer owns its own
//! link ([`RedisLink::connect`]); producers and the weight store can share one (clones share
//! the connection).

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, ErrorKind, RetryMethod, ServerErrorKind};
use tokio::sync::Mutex;

use crate::config::RedisConfig;
use crate::error::{ProtocolError, Result};
use crate::secret::redact_url;

mod tcp;

/// Deadlines and backoff for a [`RedisLink`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkSettings {
    /// Deadline for opening a connection.
    pub connect_timeout: Duration,
    /// Deadline for one command's reply.
    pub op_timeout: Duration,
    /// How long a failing command is retried before the error is returned.
    pub retry_for: Duration,
    /// First backoff.
    pub backoff_min: Duration,
    /// Largest backoff.
    pub backoff_max: Duration,
}

impl From<&RedisConfig> for LinkSettings {
    fn from(c: &RedisConfig) -> Self {
        Self {
            connect_timeout: c.connect_timeout(),
            op_timeout: c.op_timeout(),
            retry_for: c.retry_for(),
            backoff_min: Duration::from_millis(c.backoff_min_ms),
            backoff_max: Duration::from_millis(c.backoff_max_ms),
        }
    }
}

impl Default for LinkSettings {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(2),
            op_timeout: Duration::from_secs(5),
            retry_for: Duration::from_secs(30),
            backoff_min: Duration::from_millis(20),
            backoff_max: Duration::from_secs(1),
        }
    }
}

struct Slot {
    conn: Option<MultiplexedConnection>,
    generation: u64,
}

/// A reconnecting Redis connection; cheap to clone (clones share the connection).
#[derive(Clone)]
pub struct RedisLink {
    client: redis::Client,
    endpoint: Arc<str>,
    settings: LinkSettings,
    slot: Arc<Mutex<Slot>>,
}

impl std::fmt::Debug for RedisLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisLink").field("endpoint", &self.endpoint).finish()
    }
}

impl RedisLink {
    /// A link to `url`; connects lazily on the first command. Each call makes an independent
    /// connection, so a consumer's blocking reads never stall anyone else's commands.
    pub fn connect(url: &str, settings: LinkSettings) -> Result<Self> {
        let client = redis::Client::open(url).map_err(|source| ProtocolError::Redis {
            endpoint: redact_url(url),
            op: "open",
            source,
        })?;
        Ok(Self::with_client(client, redact_url(url), settings))
    }

    /// A link to the server `[redis]` names, as its user, with the password read from the
    /// variable `redis.password_env` names and TLS for `rediss://` ([`crate::redis_auth`]).
    pub fn from_config(cfg: &RedisConfig) -> Result<Self> {
        let target = crate::redis_auth::target(cfg)?;
        Ok(Self::with_client(target.client, target.endpoint, cfg.into()))
    }

    /// A link over an already built client ([`crate::redis_auth::target_with`]: launchers that
    /// hold a password in memory rather than in their environment).
    pub fn from_target(target: crate::redis_auth::Target, settings: LinkSettings) -> Self {
        Self::with_client(target.client, target.endpoint, settings)
    }

    fn with_client(client: redis::Client, endpoint: String, settings: LinkSettings) -> Self {
        Self {
            endpoint: endpoint.into(),
            client,
            settings,
            slot: Arc::new(Mutex::new(Slot { conn: None, generation: 0 })),
        }
    }

    /// The server's URL with its password masked ([`redact_url`]), for errors and logs.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The underlying client, for connections the link does not manage (pub/sub).
    pub fn client(&self) -> &redis::Client {
        &self.client
    }

    /// The link's deadlines.
    pub fn settings(&self) -> &LinkSettings {
        &self.settings
    }

    /// A new link to the same server with a connection of its own.
    pub fn fresh(&self) -> Self {
        Self { slot: Arc::new(Mutex::new(Slot { conn: None, generation: 0 })), ..self.clone() }
    }

    /// Runs `f` on the connection with the command deadline extended by `extra` (a blocking
    /// read's block time), retrying retryable failures with backoff for `retry_for`.
    pub async fn call<T, F, Fut>(&self, op: &'static str, extra: Duration, mut f: F) -> Result<T>
    where
        F: FnMut(MultiplexedConnection) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>>,
    {
        let started = Instant::now();
        let mut backoff = self.settings.backoff_min;
        loop {
            let attempt = match self.connection(op).await {
                Ok((conn, generation)) => {
                    let deadline = self.settings.op_timeout + extra;
                    match tokio::time::timeout(deadline, f(conn)).await {
                        Ok(Ok(value)) => return Ok(value),
                        Ok(Err(e)) if !retryable(&e) => {
                            return Err(ProtocolError::Redis { endpoint: self.endpoint.to_string(), op, source: e })
                        }
                        Ok(Err(e)) => {
                            self.invalidate(generation).await;
                            ProtocolError::Redis { endpoint: self.endpoint.to_string(), op, source: e }
                        }
                        Err(_) => {
                            self.invalidate(generation).await;
                            ProtocolError::Timeout { endpoint: self.endpoint.to_string(), op, after: deadline }
                        }
                    }
                }
                Err(e) => e,
            };
            if started.elapsed() + backoff > self.settings.retry_for {
                return Err(attempt);
            }
            tracing::debug!(endpoint = %self.endpoint, op, error = %attempt, ?backoff, "redis command failed; retrying");
            crate::metrics::REDIS_RETRIES.with_label_values(&[op]).inc();
            tokio::time::sleep(jitter(backoff)).await;
            backoff = (backoff * 2).min(self.settings.backoff_max);
        }
    }

    async fn connection(&self, op: &'static str) -> Result<(MultiplexedConnection, u64)> {
        let mut slot = self.slot.lock().await;
        if let Some(conn) = &slot.conn {
            return Ok((conn.clone(), slot.generation));
        }
        // Our own deadlines wrap every call, so the client's response timeout is off; its
        // connect timeout is ours.
        let cfg = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.settings.connect_timeout))
            .set_response_timeout(None);
        let connect = async {
            match tcp::connect(self.client.get_connection_info(), &cfg).await {
                Some(conn) => conn,
                None => self.client.get_multiplexed_async_connection_with_config(&cfg).await,
            }
        };
        let conn = match tokio::time::timeout(self.settings.connect_timeout, connect).await {
            Ok(Ok(conn)) => conn,
            Ok(Err(source)) => return Err(ProtocolError::Redis { endpoint: self.endpoint.to_string(), op, source }),
            Err(_) => {
                return Err(ProtocolError::Timeout {
                    endpoint: self.endpoint.to_string(),
                    op: "connect",
                    after: self.settings.connect_timeout,
                })
            }
        };
        slot.generation += 1;
        slot.conn = Some(conn.clone());
        Ok((conn, slot.generation))
    }

    /// Drops the connection unless another caller already replaced it.
    async fn invalidate(&self, generation: u64) {
        let mut slot = self.slot.lock().await;
        if slot.generation == generation {
            slot.conn = None;
        }
    }

    /// PING with the link's deadlines; for health checks and start-up waits.
    pub async fn ping(&self) -> Result<()> {
        self.call("ping", Duration::ZERO, |mut c| async move { redis::cmd("PING").query_async::<String>(&mut c).await })
            .await
            .map(drop)
    }
}

fn retryable(e: &redis::RedisError) -> bool {
    if e.kind() == ErrorKind::AuthenticationFailed {
        return false;
    }
    if e.kind() == ErrorKind::Server(ServerErrorKind::ExecAbort) {
        // EXECABORT ran nothing. When every queued command was refused for a passing reason —
        // LOADING while a restarted server reads its append-only file, found by the kill soak —
        // the transaction is worth sending again whole; the client itself calls it final.
        let passing = |k: Option<ServerErrorKind>| {
            use ServerErrorKind::{BusyLoading, ClusterDown, MasterDown, TryAgain};
            matches!(k, Some(BusyLoading | TryAgain | MasterDown | ClusterDown))
        };
        let errors = e.clone().into_server_errors();
        return errors.is_some_and(|errs| !errs.is_empty() && errs.iter().all(|(_, s)| passing(s.kind())));
    }
    !matches!(e.retry_method(), RetryMethod::NoRetry)
}

/// A backoff `d` scaled by a random factor in [0.5, 1), so that clients retrying after the same
/// failure do not retry in step; every retry loop of the workspace sleeps through it.
pub fn jitter(d: Duration) -> Duration {
    let f: f64 = 0.5 + rand::random::<f64>() * 0.5;
    d.mul_f64(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_scales_a_backoff_into_its_upper_half() {
        let d = Duration::from_millis(100);
        let drawn: Vec<Duration> = (0..200).map(|_| jitter(d)).collect();
        assert!(drawn.iter().all(|j| *j >= d / 2 && *j < d), "{drawn:?}");
        // 200 draws all in one 5 ms bucket would mean no jitter at all.
        assert!(
            drawn.iter().any(|j| *j < Duration::from_millis(75))
                && drawn.iter().any(|j| *j >= Duration::from_millis(75))
        );
    }

    #[tokio::test]
    async fn nothing_listening_fails_within_the_retry_budget_and_names_the_endpoint() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let settings = LinkSettings {
            retry_for: Duration::from_millis(300),
            backoff_min: Duration::from_millis(10),
            backoff_max: Duration::from_millis(50),
            ..LinkSettings::default()
        };
        let link = RedisLink::connect(&format!("redis://127.0.0.1:{port}"), settings).unwrap();
        let started = Instant::now();
        let err = link.ping().await.unwrap_err().to_string();
        assert!(started.elapsed() < Duration::from_secs(5), "gave up in time");
        assert!(err.contains(&format!("127.0.0.1:{port}")), "{err}");
    }
}
