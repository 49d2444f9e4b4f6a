//! The [`WeightStore`] handle: a shared Redis link for commands, links of their own for the
//! parallel chunk reads, a client for the watchers' pub/sub connections (the same again for a
//! read replica, see [`super::route`]), the run's key names and the `[weights]` tunables; and
//! how chunks are grouped into the units one command moves.

use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use super::route::{ReadLinks, Replica};
use super::WeightSettings;
use crate::codec::Codec;
use crate::error::{ProtocolError, Result};
use crate::keys::Keys;
use crate::link::{LinkSettings, RedisLink};
use crate::wire::{PolicyVersion, RunId};

/// Bytes one unit of chunk writes or reads moves in one command at most (one chunk if larger):
/// large enough that per-command costs vanish, small enough that units spread over connections.
pub(super) const UNIT_BYTES: u64 = 4 << 20;

/// Reads and writes one run's policy weights; cheap to clone (clones share the connection).
#[derive(Clone)]
pub struct WeightStore {
    /// The primary's command link: every write, and reads while no replica serves them.
    pub(super) link: RedisLink,
    /// Reads from the primary: `link`, one link per parallel chunk reader (each its own
    /// connection, made on first use), and the client for pub/sub.
    pub(super) primary: Arc<ReadLinks>,
    /// Reads from `weights.read_url`, when set.
    pub(super) replica: Option<Arc<Replica>>,
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
        let settings = settings.sanitized();
        let primary = ReadLinks::new(link, settings.fetch_connections);
        Self {
            link: primary.link.clone(),
            primary: Arc::new(primary),
            replica: None,
            keys: Keys::new(run),
            run: run.clone(),
            settings,
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
            .read(|links| {
                let key = &key;
                async move {
                    links
                        .link
                        .call("get weights latest", Duration::ZERO, |mut c| async move {
                            redis::cmd("GET").arg(key).query_async(&mut c).await
                        })
                        .await
                }
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
}

/// The units `chunks` chunks of `chunk_bytes` are moved in: consecutive chunks, up to
/// [`UNIT_BYTES`] together (one chunk per unit when chunks are that large).
pub(super) fn units(chunks: usize, chunk_bytes: u64) -> impl Iterator<Item = Range<usize>> {
    let per_unit = (UNIT_BYTES / chunk_bytes.max(1)).max(1) as usize;
    (0..chunks).step_by(per_unit).map(move |first| first..chunks.min(first + per_unit))
}

/// The result of a transfer task; a task that panicked or was cancelled is an error.
pub(super) fn joined<T>(done: std::result::Result<Result<T>, tokio::task::JoinError>) -> Result<T> {
    done.map_err(|e| ProtocolError::Io { what: "a weights transfer task".into(), source: std::io::Error::other(e) })?
}

/// Extra deadline for a command that moves `bytes` (at a pessimistic 50 MB/s).
pub(super) fn transfer_allowance(bytes: u64) -> Duration {
    Duration::from_millis(bytes / 50_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_group_small_chunks_and_keep_large_ones_apart() {
        let small: Vec<_> = units(10, UNIT_BYTES / 4).collect();
        assert_eq!(small, [0..4, 4..8, 8..10]);
        let large: Vec<_> = units(3, UNIT_BYTES * 2).collect();
        assert_eq!(large, [0..1, 1..2, 2..3]);
        assert_eq!(units(0, 1).count(), 0);
        let one: Vec<_> = units(5, 0).collect();
        assert_eq!((one.len(), &one[0]), (1, &(0..5)), "a zero chunk size is treated as 1");
    }
}
