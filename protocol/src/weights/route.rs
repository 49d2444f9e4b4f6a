//! Where a weight reader reads: the node's replica (`weights.read_url`) when one is configured
//! and answering, else the primary (`redis.url`), which the learner writes. A replica applies
//! the primary's writes in the primary's order, so a replica that shows `latest = v` holds v's
//! manifest and chunks; and the reader verifies every chunk anyway, so a replica can delay a
//! version but never serve a wrong one.
//!
//! ```text
//!  read (latest, manifest, chunks, subscribe)
//!    replica configured and not marked down? ── no ──► primary
//!            │ yes
//!            ▼
//!    on the replica ── ok, or the data's own error (gone, corrupt) ──► result
//!            │ the replica failed (unreachable, refused, timed out)
//!            ▼
//!    mark it down for REPLICA_RETRY_AFTER (warn once, count a fallback) ──► the same read on the primary
//! ```
//!
//! The replica's links give up after one connect deadline (not `redis.retry_for`), so a dead
//! replica costs a reader seconds, not the whole retry budget.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::WeightStore;
use crate::config::ReagentConfig;
use crate::error::{ProtocolError, Result};
use crate::link::{LinkSettings, RedisLink};
use crate::metrics::WEIGHTS_READ_FALLBACKS;
use crate::wire::RunId;

/// How long reads stay on the primary after the replica failed, before trying it again.
pub(super) const REPLICA_RETRY_AFTER: Duration = Duration::from_secs(30);

/// The connections one server's reads use: commands, parallel chunk readers, pub/sub.
pub(super) struct ReadLinks {
    pub(super) link: RedisLink,
    pub(super) fetch_links: Arc<[RedisLink]>,
    pub(super) client: redis::Client,
}

impl ReadLinks {
    /// A command link and `readers` chunk-reader links of their own, all to `link`'s server.
    pub(super) fn new(link: &RedisLink, readers: usize) -> Self {
        let link = link.fresh();
        Self { fetch_links: (0..readers).map(|_| link.fresh()).collect(), client: link.client().clone(), link }
    }
}

/// The node's replica and whether it is being avoided.
pub(super) struct Replica {
    links: Arc<ReadLinks>,
    down_until: Mutex<Option<Instant>>,
    warned: AtomicBool,
}

/// Which server a read went to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Source {
    /// `weights.read_url`.
    Replica,
    /// `redis.url`.
    Primary,
}

impl WeightStore {
    /// A reader's store for `run` as `cfg` says: reads through `weights.read_url` (with
    /// `[redis]`'s user, password and TLS settings) when it is set, falling back to `link` (the
    /// primary); only through `link` when it is empty.
    pub fn reader(cfg: &ReagentConfig, link: &RedisLink, run: &RunId) -> Result<Self> {
        let store = Self::new(link, run, (&cfg.weights).into());
        let Some(url) = cfg.weights.read_url() else { return Ok(store) };
        let mut redis = cfg.redis.clone();
        redis.url = url.to_string();
        let target = crate::redis_auth::target(&redis)?;
        let settings = LinkSettings::from(&cfg.redis);
        Ok(store.with_read_replica(&RedisLink::from_target(target, settings)))
    }

    /// This store with reads going to `replica` first (a replica of the primary this store
    /// writes to). Its retry budget is cut to one connect deadline, so that reads fall back to
    /// the primary quickly when it is down.
    pub fn with_read_replica(mut self, replica: &RedisLink) -> Self {
        // Shown at 0 from the start, so an alert on it can tell "never fell back" from "absent".
        std::sync::LazyLock::force(&WEIGHTS_READ_FALLBACKS);
        let mut settings = *replica.settings();
        settings.retry_for = settings.retry_for.min(settings.connect_timeout);
        let link = RedisLink::from_target(
            crate::redis_auth::Target { client: replica.client().clone(), endpoint: replica.endpoint().to_string() },
            settings,
        );
        self.replica = Some(Arc::new(Replica {
            links: Arc::new(ReadLinks::new(&link, self.settings.fetch_connections)),
            down_until: Mutex::new(None),
            warned: AtomicBool::new(false),
        }));
        self
    }

    /// Where reads go now (redacted): the replica, or the primary while the replica is avoided.
    pub fn read_endpoint(&self) -> String {
        self.route().1.link.endpoint().to_string()
    }

    /// The server reads go to now and its links.
    pub(super) fn route(&self) -> (Source, Arc<ReadLinks>) {
        match &self.replica {
            Some(r) if !r.avoided() => (Source::Replica, r.links.clone()),
            _ => (Source::Primary, self.primary.clone()),
        }
    }

    /// Runs `read` on the current route; if that was the replica and the replica failed, marks
    /// it down and runs `read` again on the primary.
    pub(super) async fn read<T, F, Fut>(&self, read: F) -> Result<T>
    where
        F: Fn(Arc<ReadLinks>) -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let (source, links) = self.route();
        let error = match read(links).await {
            Err(e) if source == Source::Replica && replica_failed(&e) => e,
            other => return other,
        };
        if let Some(replica) = &self.replica {
            replica.mark_down(&error, self.primary.link.endpoint());
        }
        read(self.primary.clone()).await
    }
}

impl Replica {
    fn avoided(&self) -> bool {
        let mut down = self.down_until.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match *down {
            Some(until) if Instant::now() < until => true,
            Some(_) => {
                *down = None;
                tracing::info!(replica = %self.links.link.endpoint(), "trying the weights read replica again");
                false
            }
            None => false,
        }
    }

    fn mark_down(&self, error: &ProtocolError, primary: &str) {
        *self.down_until.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
            Some(Instant::now() + REPLICA_RETRY_AFTER);
        WEIGHTS_READ_FALLBACKS.inc();
        let replica = self.links.link.endpoint();
        if self.warned.swap(true, Ordering::Relaxed) {
            tracing::debug!(%replica, %primary, %error, "weights read replica failed again; reading from the primary");
        } else {
            tracing::warn!(
                %replica,
                %primary,
                %error,
                retry_after_s = REPLICA_RETRY_AFTER.as_secs(),
                "weights read replica (weights.read_url) failed; reading from redis.url instead"
            );
        }
    }
}

/// Whether `e` says the server failed (so another server may do better), rather than that the
/// data was gone or wrong (which the primary would say too, or which verification caught).
fn replica_failed(e: &ProtocolError) -> bool {
    matches!(e, ProtocolError::Redis { .. } | ProtocolError::Timeout { .. } | ProtocolError::Io { .. })
}
