//! Durable typed queues over Redis Streams with consumer groups.
//!
//! ```text
//!  Producer<T> ──XADD (pipelined, waits at the high-water mark)──► stream ──XREADGROUP──► Consumer<T>
//!                                                                   │  pending entries list
//!        dead consumer's entries ◄── XPENDING IDLE + XCLAIM ────────┤  (delivered, unacked)
//!                                                                   │
//!   Consumer::ack ──[XACK; markers; trim every trim_every] in one script──►
//!   Consumer::ack_and_next ──that script + XREADGROUP, pipelined: one round trip per batch──►
//!   Consumer::forward ──[XADD next; XACK] in one script──► next stream
//!   Consumer::forward_and_next ──that script + XREADGROUP, pipelined: one round trip per batch──►
//!   undecodable / failed too often ──[XADD :dead; XACK] in one script──► <stream>:dead
//! ```
//!
//! A delivery counts as failed only when the entry was in progress when its consumer died or
//! gave up on it (see `progress.rs`): a restarted consumer taking back entries it had processed
//! and holds for a checkpoint is not charged for them. Delivery writes nothing besides the
//! XREADGROUP itself; what a consumer marks is the entries it holds without processing them.
//!
//! Delivery is at-least-once; the learner applies each trajectory once, by id. An entry leaves
//! the pending list only by being acknowledged, forwarded or dead-lettered, and only entries
//! every group has acknowledged are ever trimmed, so nothing unconsumed is lost to trimming.
//!
//! Entry layout: field `id` holds the item's application id (a trajectory id), field `p` the
//! codec payload (format-version byte + bincode).

mod ack;
mod consumer;
mod dead;
mod depth;
mod pipelined;
mod producer;
mod progress;
mod range;
mod reply;
mod scripts;

use std::time::Duration;

pub use consumer::{Consumer, Delivery};
pub use dead::{dead_letter, purge_dead_letters, read_dead_letters, replay_dead_letters, DeadLetter};
pub use depth::{stream_backlog, stream_depth, trim_acknowledged, trusted_lags};
pub use producer::Producer;
pub use range::{read_all, read_range, StreamEntry};

use crate::config::QueueConfig;
use crate::error::{ProtocolError, Result};
use crate::link::RedisLink;

/// The stream field holding the application id.
pub const FIELD_ID: &str = "id";
/// The stream field holding the payload.
pub const FIELD_PAYLOAD: &str = "p";

/// Tunables of producers and consumers (from `[queue]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueSettings {
    /// Largest payload, version byte included.
    pub max_payload_bytes: u64,
    /// Producers wait while the stream's backlog (entries not yet delivered to a consumer) is
    /// above this.
    pub high_water_mark: u64,
    /// How long a producer waits at the mark before erroring.
    pub backpressure_timeout: Duration,
    /// Entries per read.
    pub read_count: usize,
    /// How long a read blocks.
    pub block: Duration,
    /// Pending entries idle longer than this are reclaimed.
    pub claim_idle: Duration,
    /// Failed deliveries (processing failed, or was under way when its consumer died) after
    /// which an entry is dead-lettered.
    pub max_deliveries: u64,
    /// Trim acknowledged entries after this many acknowledgements.
    pub trim_every: u64,
    /// About how many newest entries a dead-letter stream keeps (approximate MAXLEN).
    pub dead_letter_maxlen: u64,
    /// The most payload bytes a dead letter keeps; a larger payload is replaced by its size and
    /// SHA-1 (0: no limit).
    pub dead_letter_max_payload_bytes: u64,
}

impl From<&QueueConfig> for QueueSettings {
    fn from(q: &QueueConfig) -> Self {
        Self {
            max_payload_bytes: q.max_payload_bytes,
            high_water_mark: q.high_water_mark,
            backpressure_timeout: Duration::from_millis(q.backpressure_timeout_ms),
            read_count: q.read_count,
            block: Duration::from_millis(q.block_ms),
            claim_idle: Duration::from_millis(q.claim_idle_ms),
            max_deliveries: q.max_deliveries,
            trim_every: q.trim_every,
            dead_letter_maxlen: q.dead_letter_maxlen,
            dead_letter_max_payload_bytes: q.dead_letter_max_payload_bytes,
        }
    }
}

/// Library defaults, for tools and tests that build settings by hand. The roles read `[queue]`
/// from the job's configuration instead, whose high-water mark (config/default.toml: 32) is
/// sized to keep policy lag low; this one (10 000) only bounds memory.
impl Default for QueueSettings {
    fn default() -> Self {
        Self {
            max_payload_bytes: crate::codec::DEFAULT_MAX_BYTES,
            high_water_mark: 10_000,
            backpressure_timeout: Duration::from_secs(300),
            read_count: 64,
            block: Duration::from_millis(500),
            claim_idle: Duration::from_secs(30),
            max_deliveries: 5,
            trim_every: 256,
            dead_letter_maxlen: 10_000,
            dead_letter_max_payload_bytes: 256 << 10,
        }
    }
}

/// Creates consumer group `group` on `stream` (and the stream) at its beginning, if missing.
/// Producers call it too, so entries written before any consumer starts are not skipped.
pub async fn ensure_group(link: &RedisLink, stream: &str, group: &str) -> Result<()> {
    let res = link
        .call("xgroup create", Duration::ZERO, |mut c| {
            let (stream, group) = (stream.to_string(), group.to_string());
            async move {
                redis::cmd("XGROUP")
                    .arg("CREATE")
                    .arg(&stream)
                    .arg(&group)
                    .arg("0")
                    .arg("MKSTREAM")
                    .query_async::<()>(&mut c)
                    .await
            }
        })
        .await;
    match res {
        Err(ProtocolError::Redis { ref source, .. }) if source.code() == Some("BUSYGROUP") => Ok(()),
        other => other,
    }
}
