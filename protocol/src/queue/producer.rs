//! The typed producer: encodes each item straight into its XADD, waits at the high-water
//! mark, and writes a batch as one pipeline.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redis::RedisWrite;

use super::{depth::stream_backlog, ensure_group, QueueSettings, FIELD_ID, FIELD_PAYLOAD};
use crate::codec::Codec;
use crate::error::{ProtocolError, Result};
use crate::link::RedisLink;
use crate::metrics;
use crate::wire::QueueItem;

/// How stale the backlog estimate may get before a write re-measures it.
pub const REMEASURE_EVERY: Duration = Duration::from_millis(200);

/// Writes items of type `T` to one stream. Shareable across tasks (`&self` methods).
///
/// Backpressure: the producer keeps an estimate of the stream's backlog — entries not yet
/// delivered to a consumer ([`stream_backlog`]; last measured backlog plus what it wrote
/// since). Below the high-water mark it writes without asking, re-measuring at least every
/// `REMEASURE_EVERY` (200 ms) so that other producers' writes are seen; at the mark it
/// measures, and waits (polling with backoff, up to `backpressure_timeout`) until consumers
/// have taken entries. With P producers the backlog can overshoot the mark by at most what they
/// write within one re-measure interval. What consumers hold unacknowledged is bounded by each
/// consumer (its batch; the learner's updates until a checkpoint), so the stream's length
/// stays below the mark plus those.
#[derive(Debug)]
pub struct Producer<T> {
    link: RedisLink,
    stream: String,
    settings: QueueSettings,
    codec: Codec,
    estimate: AtomicU64,
    /// When the backlog was last measured, in milliseconds since `born`.
    measured_at_ms: AtomicU64,
    born: Instant,
    _item: PhantomData<fn(T)>,
}

impl<T: QueueItem> Producer<T> {
    /// A producer for `stream`, whose consumers read as `group` (created here if missing, so
    /// entries written before any consumer starts are kept for it).
    pub async fn new(link: RedisLink, stream: impl Into<String>, group: &str, settings: QueueSettings) -> Result<Self> {
        let stream = stream.into();
        ensure_group(&link, &stream, group).await?;
        let backlog = stream_backlog(&link, &stream).await?;
        Ok(Self {
            link,
            stream,
            codec: Codec::new(settings.max_payload_bytes),
            settings,
            estimate: AtomicU64::new(backlog),
            measured_at_ms: AtomicU64::new(0),
            born: Instant::now(),
            _item: PhantomData,
        })
    }

    /// The stream key.
    pub fn stream(&self) -> &str {
        &self.stream
    }

    /// The link (for callers that share it).
    pub fn link(&self) -> &RedisLink {
        &self.link
    }

    /// Encodes one item into its entry fields; refuses oversize items with a codec error.
    pub fn encode(&self, item: &T) -> Result<Vec<(String, Vec<u8>)>> {
        let payload = self.codec.encode(item)?;
        Ok(vec![(FIELD_ID.to_string(), item.item_id().into_bytes()), (FIELD_PAYLOAD.to_string(), payload)])
    }

    /// Writes one item; returns its stream id.
    pub async fn send(&self, item: &T) -> Result<String> {
        let mut ids = self.send_batch(std::slice::from_ref(item)).await?;
        ids.pop().ok_or_else(|| ProtocolError::UnexpectedReply { op: "xadd", detail: "no id returned".into() })
    }

    /// Writes items in one pipeline, after waiting for room; returns their stream ids in order.
    /// Nothing is written if any item fails to encode.
    pub async fn send_batch(&self, items: &[T]) -> Result<Vec<String>> {
        if items.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for item in items {
            pipe.add_command(self.xadd(item)?);
        }
        self.admit(items.len() as u64).await?;
        let pipe = &pipe;
        let ids: Vec<String> =
            self.link.call("xadd", Duration::ZERO, |mut c| async move { pipe.query_async(&mut c).await }).await?;
        metrics::QUEUE_PRODUCED.with_label_values(&[metrics::stream_label(&self.stream)]).inc_by(ids.len() as u64);
        Ok(ids)
    }

    /// The XADD of one item, its payload encoded straight into the command's argument (one
    /// copy of the payload fewer than encoding it into a buffer of its own first); refuses
    /// oversize items with a codec error.
    fn xadd(&self, item: &T) -> Result<redis::Cmd> {
        let len = self.codec.encoded_len(item)? as usize;
        let id = item.item_id();
        let mut cmd = redis::Cmd::with_capacity(7, 16 + self.stream.len() + id.len() + len);
        cmd.arg("XADD").arg(&self.stream).arg("*").arg(FIELD_ID).arg(id).arg(FIELD_PAYLOAD);
        self.codec.encode_into(item, cmd.writer_for_next_arg())?;
        Ok(cmd)
    }

    /// The backlog now: entries not yet delivered to a consumer (measured, not estimated).
    pub async fn backlog(&self) -> Result<u64> {
        let d = stream_backlog(&self.link, &self.stream).await?;
        self.estimate.store(d, Ordering::Relaxed);
        self.measured_at_ms.store(self.born.elapsed().as_millis() as u64, Ordering::Relaxed);
        Ok(d)
    }

    /// Waits until `n` more entries fit under the high-water mark (a batch larger than the mark
    /// is let through once the backlog is empty), or errors after `backpressure_timeout`.
    pub(crate) async fn admit(&self, n: u64) -> Result<()> {
        let hwm = self.settings.high_water_mark;
        let age =
            self.born.elapsed().saturating_sub(Duration::from_millis(self.measured_at_ms.load(Ordering::Relaxed)));
        if age >= REMEASURE_EVERY {
            self.backlog().await?;
        }
        if self.estimate.load(Ordering::Relaxed) + n <= hwm {
            self.estimate.fetch_add(n, Ordering::Relaxed);
            return Ok(());
        }
        let label = metrics::stream_label(&self.stream).to_string();
        let started = Instant::now();
        let mut pause = Duration::from_millis(5);
        let mut waited = false;
        loop {
            let backlog = self.backlog().await?;
            if backlog + n <= hwm || backlog == 0 {
                self.estimate.fetch_add(n, Ordering::Relaxed);
                if waited {
                    metrics::QUEUE_BACKPRESSURE_SECONDS
                        .with_label_values(&[&label])
                        .inc_by(started.elapsed().as_secs_f64());
                    tracing::debug!(stream = %self.stream, backlog, waited = ?started.elapsed(), "backpressure released");
                }
                return Ok(());
            }
            if !waited {
                waited = true;
                metrics::QUEUE_BACKPRESSURE_WAITS.with_label_values(&[&label]).inc();
                tracing::debug!(stream = %self.stream, backlog, high_water_mark = hwm, "waiting at the high-water mark");
            }
            if started.elapsed() >= self.settings.backpressure_timeout {
                metrics::QUEUE_BACKPRESSURE_SECONDS
                    .with_label_values(&[&label])
                    .inc_by(started.elapsed().as_secs_f64());
                return Err(ProtocolError::Backpressure {
                    stream: self.stream.clone(),
                    backlog,
                    high_water_mark: hwm,
                    waited: started.elapsed(),
                });
            }
            let left = self.settings.backpressure_timeout.saturating_sub(started.elapsed());
            tokio::time::sleep(pause.min(left)).await;
            pause = (pause * 2).min(Duration::from_millis(250));
        }
    }
}
