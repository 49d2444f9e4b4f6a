//! Learning that a new version is out: a pub/sub subscription to the notify channel wakes the
//! watcher at once, and `latest` is polled every `poll_interval` anyway, because pub/sub
//! messages are lost while a connection is down. `latest` is the truth; a message only says
//! "look now".
//!
//! ```text
//!  next_version(timeout) ─► GET latest ── newer than seen? ── yes ─► Some(latest)
//!          ▲                                  │ no
//!          │                   deadline passed? ── yes ─► None
//!          │                                  │ no
//!          └── message │ poll_interval │ deadline ◄─ wait (re-subscribing if the connection broke)
//! ```

use std::time::Duration;

use futures::{FutureExt, StreamExt};
use redis::aio::PubSubStream;
use tokio::time::Instant;

use super::WeightStore;
use crate::error::Result;
use crate::wire::PolicyVersion;

/// Watches for versions newer than the last one it returned; see [`WeightStore::subscribe`].
pub struct WeightWatcher {
    store: WeightStore,
    seen: Option<PolicyVersion>,
    messages: Option<PubSubStream>,
    /// The server `messages` come from (redacted), so a change of read route resubscribes.
    source: String,
    resubscribe_at: Instant,
    notifications: u64,
    warned: bool,
}

impl std::fmt::Debug for WeightWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WeightWatcher")
            .field("seen", &self.seen)
            .field("subscribed", &self.messages.is_some())
            .field("notifications", &self.notifications)
            .finish()
    }
}

impl WeightStore {
    /// A watcher for versions newer than `seen` (`None`: any version). It subscribes to the
    /// notify channel now (within the connect and command deadlines); if that fails it polls
    /// `latest` and logs a warning, and it keeps trying to subscribe again.
    pub async fn subscribe(&self, seen: Option<PolicyVersion>) -> WeightWatcher {
        let mut watcher = WeightWatcher {
            store: self.clone(),
            seen,
            messages: None,
            source: String::new(),
            resubscribe_at: Instant::now(),
            notifications: 0,
            warned: false,
        };
        let limit = self.link.settings().connect_timeout + self.link.settings().op_timeout;
        watcher.resubscribe(limit).await;
        watcher
    }
}

impl WeightWatcher {
    /// The newest version returned so far (or the one given at subscription).
    pub fn seen(&self) -> Option<PolicyVersion> {
        self.seen
    }

    /// Records that the caller holds `version` (say, after fetching it directly), so only
    /// newer versions are reported.
    pub fn mark_seen(&mut self, version: PolicyVersion) {
        self.seen = self.seen.max(Some(version));
    }

    /// Whether the pub/sub subscription is up (otherwise the watcher is only polling).
    pub fn is_subscribed(&self) -> bool {
        self.messages.is_some()
    }

    /// Notifications received over pub/sub so far.
    pub fn notifications(&self) -> u64 {
        self.notifications
    }

    /// Waits up to `timeout` for a version newer than the last seen and returns it (the newest
    /// one; versions in between are skipped), or `None` if none appeared in time. It checks
    /// `latest` at once, so a notification sent before this call is not needed. Errors only if
    /// `latest` cannot be read within the link's deadlines.
    pub async fn next_version(&mut self, timeout: Duration) -> Result<Option<PolicyVersion>> {
        let deadline = Instant::now() + timeout;
        let poll = self.store.settings.poll_interval;
        loop {
            if let Some(latest) = self.store.latest_version().await? {
                if Some(latest) > self.seen {
                    self.seen = Some(latest);
                    return Ok(Some(latest));
                }
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            let wake = deadline.min(now + poll);
            if self.messages.is_some() && self.source != self.store.read_endpoint() {
                tracing::info!(from = %self.source, to = %self.store.read_endpoint(), "weights reads moved; subscribing there");
                self.messages = None;
            }
            if self.messages.is_none() && now >= self.resubscribe_at {
                self.resubscribe(wake - now).await;
            }
            self.wait(wake).await;
        }
    }

    /// Waits until a message arrives (then takes every queued one) or `wake`.
    async fn wait(&mut self, wake: Instant) {
        let Some(messages) = self.messages.as_mut() else {
            tokio::time::sleep_until(wake).await;
            return;
        };
        match tokio::time::timeout_at(wake, messages.next()).await {
            Err(_) => {}
            Ok(Some(msg)) => {
                self.notifications += 1;
                tracing::trace!(payload = %String::from_utf8_lossy(msg.get_payload_bytes()), "weights notification");
                while let Some(next) = messages.next().now_or_never() {
                    match next {
                        Some(_) => self.notifications += 1,
                        None => return self.lost(),
                    }
                }
            }
            Ok(None) => self.lost(),
        }
    }

    /// The pub/sub connection closed: poll until it can be opened again.
    fn lost(&mut self) {
        tracing::warn!(channel = %self.store.keys.weights_notify(), "weights pub/sub connection lost; polling until it is back");
        self.messages = None;
        self.warned = true;
        self.resubscribe_at = Instant::now() + self.retry_after();
    }

    fn retry_after(&self) -> Duration {
        self.store.settings.poll_interval.max(Duration::from_secs(1))
    }

    /// Opens a pub/sub connection and subscribes, within `limit`.
    async fn resubscribe(&mut self, limit: Duration) {
        let channel = self.store.keys.weights_notify();
        let links = self.store.route().1;
        let client = links.client.clone();
        let attempt = async {
            let mut pubsub = client.get_async_pubsub().await?;
            pubsub.subscribe(&channel).await?;
            Ok::<_, redis::RedisError>(pubsub.into_on_message())
        };
        let error = match tokio::time::timeout(limit, attempt).await {
            Ok(Ok(messages)) => {
                if self.warned {
                    tracing::info!(%channel, "weights pub/sub subscription restored");
                }
                self.messages = Some(messages);
                self.source = links.link.endpoint().to_string();
                self.warned = false;
                return;
            }
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!("no subscription within {limit:?}"),
        };
        self.resubscribe_at = Instant::now() + self.retry_after();
        if self.warned {
            tracing::debug!(%channel, %error, "weights pub/sub still unavailable");
        } else {
            tracing::warn!(
                endpoint = %links.link.endpoint(),
                %channel,
                %error,
                poll_interval_ms = self.store.settings.poll_interval.as_millis() as u64,
                "weights pub/sub unavailable; polling latest instead"
            );
            self.warned = true;
        }
    }
}
