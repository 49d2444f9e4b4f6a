//! One end-to-end measurement of Reagent's queue: producers send batches through
//! [`Producer::send_batch`], consumers of one group read them and acknowledge each batch with
//! the read of the next ([`Consumer::ack_and_next`], one round trip per batch); the rate is
//! messages over the time from the first send to the N-th acknowledgement.
//!
//! ```text
//!  producer 1..P ──send_batch(B)──► stream ──ack_and_next (COUNT B)──► consumer 1..C ──acks─┐
//!                                                                                          │
//!  clock: started before the first send ─────────────────────── stopped at the N-th ack ◄─┘
//! ```
//!
//! Every producer and consumer has a connection of its own; all of them run on one client
//! runtime ([`measure_on`]: one thread by default, as redis-benchmark). A measurement with no
//! acknowledgement for [`STALL`] fails rather than waiting forever. Messages carry fixed-size
//! byte strings or realistic trajectories ([`trajectory`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use cluster::progress::Progress;
use protocol::error::InvalidValue;
use protocol::link::RedisLink;
use protocol::queue::{Consumer, Producer, QueueSettings};
use protocol::wire::{QueueItem, Trajectory, Validate};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

mod trajectory;

pub use trajectory::Payload;
use trajectory::Sample;

/// The consumer group of the bench.
const GROUP: &str = "bench";
/// A measurement fails when no message is acknowledged for this long.
pub const STALL: Duration = Duration::from_secs(30);

/// The item the bench sends: a sequence number and an opaque payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchItem {
    /// Unique within one measurement; the item's id in the stream.
    pub seq: u64,
    /// The bytes carried, encoded as one byte string (a plain `Vec<u8>` is a sequence to
    /// serde, which bincode walks a byte at a time: a quarter of the bench's CPU at 4 KiB).
    #[serde(with = "byte_string")]
    pub payload: Vec<u8>,
}

/// `Vec<u8>` as a serde byte string: one length and a copy, instead of one call per byte.
mod byte_string {
    use serde::{de, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(bytes)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        struct Bytes;
        impl<'de> de::Visitor<'de> for Bytes {
            type Value = Vec<u8>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a byte string")
            }
            fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Vec<u8>, E> {
                Ok(v.to_vec())
            }
            fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
                Ok(v)
            }
        }
        d.deserialize_byte_buf(Bytes)
    }
}

impl QueueItem for BenchItem {
    fn item_id(&self) -> String {
        self.seq.to_string()
    }
}

impl Validate for BenchItem {
    fn validate(&self) -> Result<(), InvalidValue> {
        if self.payload.is_empty() {
            return Err(InvalidValue::new("payload", "at least one byte", "none"));
        }
        Ok(())
    }
}

/// What one measurement sends.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// Messages in all.
    pub messages: u64,
    /// What each message carries.
    pub payload: Payload,
    /// Concurrent producers.
    pub producers: u16,
    /// Concurrent consumers.
    pub consumers: u16,
    /// Messages per `send_batch`; also the consumers' read count.
    pub batch: u16,
    /// Queue settings (read count set to `batch`).
    pub settings: QueueSettings,
}

/// [`measure`] on a runtime of its own with `threads` worker threads (one: a current-thread
/// runtime, the shape of redis-benchmark's client), on a blocking thread of the caller's
/// runtime. The measurement opens its own connections there ([`RedisLink::fresh`]), so no
/// connection of the caller's runtime carries its traffic.
pub async fn measure_on(threads: u16, link: &RedisLink, plan: Plan, stream: &str, progress: &Progress) -> Result<f64> {
    let (link, stream, progress) = (link.fresh(), stream.to_string(), progress.clone());
    tokio::task::spawn_blocking(move || {
        let mut builder = if threads <= 1 {
            tokio::runtime::Builder::new_current_thread()
        } else {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(usize::from(threads));
            b
        };
        let runtime = builder.enable_all().build().context("building the bench's client runtime")?;
        runtime.block_on(measure(&link, plan, &stream, &progress))
    })
    .await
    .context("the bench's client thread panicked")?
}

/// Runs `plan` on a fresh stream `stream` (deleted afterwards); returns messages per second.
pub async fn measure(link: &RedisLink, plan: Plan, stream: &str, progress: &Progress) -> Result<f64> {
    let result = run(link, plan, stream, progress).await;
    let dead = protocol::keys::Keys::dead_letter(stream);
    link.call("unlink", Duration::ZERO, |mut c| {
        let (stream, dead) = (stream.to_string(), dead.clone());
        async move { redis::cmd("UNLINK").arg(&stream).arg(&dead).query_async::<u64>(&mut c).await }
    })
    .await
    .with_context(|| format!("deleting the bench stream {stream}"))?;
    result
}

async fn run(link: &RedisLink, plan: Plan, stream: &str, progress: &Progress) -> Result<f64> {
    match plan.payload {
        Payload::Bytes(_) => run_with::<BenchItem>(link, plan, stream, progress).await,
        Payload::Trajectory { .. } => run_with::<Trajectory>(link, plan, stream, progress).await,
    }
}

/// The bytes one message of `payload` takes in its stream entry's payload field (what the
/// raw XADD baseline sends for it).
pub fn encoded_len(payload: Payload, codec: &protocol::codec::Codec) -> Result<u64> {
    Ok(match payload {
        Payload::Bytes(_) => codec.encoded_len(&BenchItem::sample(payload))?,
        Payload::Trajectory { .. } => codec.encoded_len(&Trajectory::sample(payload))?,
    })
}

async fn run_with<T: Sample>(link: &RedisLink, plan: Plan, stream: &str, progress: &Progress) -> Result<f64> {
    let settings = QueueSettings { read_count: usize::from(plan.batch), ..plan.settings };
    let mut consumers = Vec::new();
    for i in 0..plan.consumers {
        consumers.push(Consumer::<T>::new(link, stream, GROUP, format!("bench-{i}"), settings).await?);
    }
    let mut producers = Vec::new();
    for _ in 0..plan.producers {
        producers.push(Producer::<T>::new(link.fresh(), stream, GROUP, settings).await?);
    }

    let (acked, mut acked_rx) = watch::channel(0u64);
    let acked = Arc::new(acked);
    let cancel = CancellationToken::new();
    let mut tasks: JoinSet<Result<()>> = JoinSet::new();
    let started = Instant::now();
    let share = plan.messages / u64::from(plan.producers);
    let mut first_seq = 0;
    for (i, producer) in producers.into_iter().enumerate() {
        let count = share + u64::from((i as u64) < plan.messages % u64::from(plan.producers));
        tasks.spawn(produce(producer, first_seq, count, plan));
        first_seq += count;
    }
    for consumer in consumers {
        tasks.spawn(consume(consumer, acked.clone(), cancel.clone(), progress.clone()));
    }

    let elapsed = loop {
        if *acked_rx.borrow_and_update() >= plan.messages {
            break started.elapsed();
        }
        tokio::select! {
            changed = tokio::time::timeout(STALL, acked_rx.changed()) => {
                if changed.is_err() {
                    cancel.cancel();
                    bail!("no message acknowledged for {STALL:?}: {} of {} done", *acked_rx.borrow(), plan.messages);
                }
            }
            Some(joined) = tasks.join_next() => {
                if let Err(e) = joined.map_err(|e| anyhow!("a bench task failed: {e}")).and_then(|r| r) {
                    cancel.cancel();
                    return Err(e);
                }
            }
        }
    };
    cancel.cancel();
    // Consumers stop at their next await; producers have finished.
    while let Some(joined) = tokio::time::timeout(STALL, tasks.join_next()).await.context("bench tasks did not stop")? {
        joined.map_err(|e| anyhow!("a bench task failed: {e}"))??;
    }
    let done = *acked_rx.borrow();
    if done != plan.messages {
        bail!("{done} messages acknowledged, expected {}: a message was delivered twice or lost", plan.messages);
    }
    Ok(plan.messages as f64 / elapsed.as_secs_f64())
}

/// Sends `count` items numbered from `first_seq`, `plan.batch` per pipeline.
async fn produce<T: Sample>(producer: Producer<T>, first_seq: u64, count: u64, plan: Plan) -> Result<()> {
    let mut batch = vec![T::sample(plan.payload); usize::from(plan.batch).min(count as usize)];
    let mut sent = 0;
    while sent < count {
        let n = (count - sent).min(batch.len() as u64) as usize;
        for (k, item) in batch[..n].iter_mut().enumerate() {
            item.number(first_seq + sent + k as u64);
        }
        producer.send_batch(&batch[..n]).await?;
        sent += n as u64;
    }
    Ok(())
}

/// Reads, acknowledges and counts until cancelled: each batch's acknowledgement travels with
/// the read of the next ([`Consumer::ack_and_next`]).
async fn consume<T: Sample>(
    mut consumer: Consumer<T>,
    acked: Arc<watch::Sender<u64>>,
    cancel: CancellationToken,
    progress: Progress,
) -> Result<()> {
    let mut ids: Vec<String> = Vec::new();
    loop {
        let (n, batch) = tokio::select! {
            _ = cancel.cancelled() => return Ok(()),
            next = consumer.ack_and_next(&ids) => next?,
        };
        if n > 0 {
            progress.inc(n);
            acked.send_modify(|total| *total += n);
        }
        ids = batch.into_iter().map(|d| d.entry_id).collect();
    }
}
