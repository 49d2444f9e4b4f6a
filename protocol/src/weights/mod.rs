//! The weight store: the learner publishes versioned policy weights to Redis; actors fetch the
//! newest version, verify every byte, and learn of new versions by notification or polling.
//!
//! ```text
//!  publish(v, tensors)                                     fetch / fetch_latest / fetch_newer_than
//!   1 ZADD  weights:versions  "v:n"   (so old versions, even half-written ones, get expired)
//!   2 SET   weights:vN:chunk:i   ×n   (each chunk copied      GET  weights:latest
//!           once and hashed as it is copied; 4 units in flight)
//!   3 SET   weights:vN:manifest       (chunk hashes + root)  ──►  GET  weights:vN:manifest, check root
//!   4 latest := max(latest, v)        (Lua, atomic)                MGET weights:vN:chunk:i over
//!   5 PUBLISH weights:notify "v"      (only if v is the latest)      fetch_connections links at once,
//!   6 EXPIRE versions below the newest keep_versions                 each chunk's hash checked  
//!           (grace: expire_grace_s)                                  by the reader that got it
//!
//!  WeightWatcher::next_version(timeout): GET latest ─ newer? ─► Some(v)
//!                     ▲                     │ no
//!                     └── pub/sub message, or poll_interval elapsed, or timeout ─► None
//! ```
//!
//! Chunks are written before the manifest and the manifest before `latest`, so whoever can read
//! `latest` finds the whole version. A superseded version expires only after a grace period, so
//! a fetch that started before it was superseded can finish; if it did not, `fetch_latest`
//! retries once with the new latest. A manifest whose chunk list fails its root, or a chunk that
//! is missing or fails its hash, is a
//! [`ProtocolError::CorruptWeights`](crate::ProtocolError::CorruptWeights) naming the version
//! and the chunk.

mod assemble;
mod fetch;
mod layout;
mod manifest;
mod publish;
mod route;
mod store;
mod watcher;

use std::time::Duration;

pub use assemble::WeightSet;
pub use layout::{chunk_count, chunk_range};
pub use store::WeightStore;
pub use watcher::WeightWatcher;

use crate::config::WeightsConfig;
use crate::wire::DType;

/// Tunables of the weight store (from `[weights]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WeightSettings {
    /// Chunk size of published weights, in bytes (at least 1).
    pub chunk_bytes: u64,
    /// How many of the newest versions are kept without an expiry (at least 1).
    pub keep_versions: u64,
    /// How long a superseded version stays readable, so fetches in progress can finish.
    pub expire_grace: Duration,
    /// How often a watcher checks `latest` in case a notification was missed.
    pub poll_interval: Duration,
    /// The element type the publisher writes (`weights.dtype`).
    pub dtype: crate::config::Precision,
    /// Connections a fetch reads chunks over in parallel (at least 1).
    pub fetch_connections: usize,
}

/// Parallel chunk readers per fetch: enough to keep Redis sending while a reader checks a
/// chunk's hash, few enough not to crowd a small machine.
pub const DEFAULT_FETCH_CONNECTIONS: usize = 4;

impl From<&WeightsConfig> for WeightSettings {
    fn from(w: &WeightsConfig) -> Self {
        Self {
            chunk_bytes: w.chunk_bytes,
            keep_versions: w.keep_versions,
            expire_grace: Duration::from_secs(w.expire_grace_s),
            poll_interval: Duration::from_millis(w.poll_interval_ms),
            dtype: w.dtype,
            fetch_connections: DEFAULT_FETCH_CONNECTIONS,
        }
    }
}

impl Default for WeightSettings {
    fn default() -> Self {
        Self {
            chunk_bytes: 4 << 20,
            keep_versions: 3,
            expire_grace: Duration::from_secs(120),
            poll_interval: Duration::from_secs(2),
            dtype: crate::config::Precision::Auto,
            fetch_connections: DEFAULT_FETCH_CONNECTIONS,
        }
    }
}

impl WeightSettings {
    /// The settings with zero values raised to the least workable ones.
    fn sanitized(self) -> Self {
        Self {
            chunk_bytes: self.chunk_bytes.max(1),
            keep_versions: self.keep_versions.max(1),
            expire_grace: self.expire_grace.max(Duration::from_secs(1)),
            poll_interval: self.poll_interval.max(Duration::from_millis(1)),
            dtype: self.dtype,
            fetch_connections: self.fetch_connections.max(1),
        }
    }
}

/// One tensor to publish: its name, shape, element type and little-endian bytes (borrowed, so
/// a learner publishing a large model does not copy it first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NamedTensor<'a> {
    /// The state-dict name; unique within a version.
    pub name: &'a str,
    /// The shape; its product times the dtype size must equal `data.len()`.
    pub shape: &'a [i64],
    /// The element type.
    pub dtype: DType,
    /// The bytes, little-endian, row-major.
    pub data: &'a [u8],
}
