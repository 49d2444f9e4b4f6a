//! The [`WeightStore`] handle: a shared Redis link for commands, a client for the watchers'
//! pub/sub connections, the run's key names and the `[weights]` tunables.

use std::time::Duration;

use super::WeightSettings;
use crate::codec::Codec;
use crate::error::{ProtocolError, Result};
use crate::keys::Keys;
use crate::link::{LinkSettings, RedisLink};
use crate::wire::{PolicyVersion, RunId};

/// Bytes a batch of chunk writes or reads moves in one round trip at most (one chunk if larger).
pub(super) const BATCH_BYTES: u64 = 32 << 20;

/// Reads and writes one run's policy weights; cheap to clone (clones share the connection).
#[derive(Clone)]
pub struct WeightStore {
    pub(super) link: RedisLink,
    pub(super) client: redis::Client,
    pub(super) keys: Keys,
    pub(super) run: RunId,
    pub(super) settings: WeightSettings,
    pub(super) codec: Codec,
}

impl std::fmt::Debug for WeightStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WeightStore").field("endpoint", &self.link.endpoint()).field("run", &self.run.as_str()).finish()
    }
}

impl WeightStore {
    /// A store for `run` on the Redis at `url`; connects lazily on the first command. It gets a
    /// link of its own, and each watcher a pub/sub connection of its own.
    pub fn connect(url: &str, link_settings: LinkSettings, run: &RunId, settings: WeightSettings) -> Result<Self> {
        Ok(Self::new(&RedisLink::connect(url, link_settings)?, run, settings))
    }

    /// A store for `run` over an existing link (a connection of its own is made from it, so
    /// large chunk transfers never queue behind the link's other users).
    pub fn new(link: &RedisLink, run: &RunId, settings: WeightSettings) -> Self {
        let link = link.fresh();
        Self {
            client: link.client().clone(),
            link,
            keys: Keys::new(run),
            run: run.clone(),
            settings: settings.sanitized(),
            codec: Codec::default(),
        }
    }

    /// The tunables in force (zero values raised to the least workable ones).
    pub fn settings(&self) -> &WeightSettings {
        &self.settings
    }

    /// The link commands go through (for health checks).
    pub fn link(&self) -> &RedisLink {
        &self.link
    }

    /// The run's key names.
    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    /// The newest published version, or `None` before the first publish.
    pub async fn latest_version(&self) -> Result<Option<PolicyVersion>> {
        let key = self.keys.weights_latest();
        let raw: Option<String> = self
            .link
            .call("get weights latest", Duration::ZERO, |mut c| {
                let key = &key;
                async move { redis::cmd("GET").arg(key).query_async(&mut c).await }
            })
            .await?;
        raw.map(|s| {
            s.trim().parse::<u64>().map(PolicyVersion).map_err(|_| ProtocolError::UnexpectedReply {
                op: "get weights latest",
                detail: format!("{key} holds {s:?}, not a version number"),
            })
        })
        .transpose()
    }

    /// The sorted set of published versions (member `"<version>:<chunks>"`, score the version)
    /// that tells the publisher which versions, and how many chunk keys, to expire.
    pub(super) fn versions_key(&self) -> String {
        self.keys.weights_versions()
    }

    /// Largest number of chunks moved per round trip.
    pub(super) fn batch_chunks(&self) -> usize {
        (BATCH_BYTES / self.settings.chunk_bytes).max(1) as usize
    }
}

/// Extra deadline for a command that moves `bytes` (at a pessimistic 50 MB/s).
pub(super) fn transfer_allowance(bytes: u64) -> Duration {
    Duration::from_millis(bytes / 50_000)
}
