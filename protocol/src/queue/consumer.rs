//! The consumer-group consumer: reads in batches, reclaims a dead consumer's entries,
//! acknowledges, forwards atomically, and dead-letters what cannot be processed.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::time::{Duration, Instant};

use redis::{Cmd, Value};

use super::ack;
use super::dead::{read_dead_letters, DeadLetter};
use super::progress;
use super::reply::{self, PendingRow, RawEntry};
use super::scripts::{keep_owned, move_cmd, move_owned, Move};
use super::{ensure_group, pipelined, QueueSettings, FIELD_ID, FIELD_PAYLOAD};
use crate::codec::Codec;
use crate::error::{CodecError, ProtocolError, Result};
use crate::keys::Keys;
use crate::link::RedisLink;
use crate::metrics;
use crate::wire::QueueItem;

mod forward;

/// One delivered item. Acknowledge it, forward it, or dead-letter it; an entry left alone is
/// redelivered (to this or another consumer) after the idle timeout.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery<T> {
    /// The entry's stream id (what `ack` takes).
    pub entry_id: String,
    /// The item's application id (a trajectory id).
    pub item_id: String,
    /// How many times this entry has been delivered, this time included (Redis's count: a
    /// restarted consumer taking its entries back counts too).
    pub deliveries: u64,
    /// How many earlier deliveries failed or were cut short while the entry was in progress
    /// (what `max_deliveries` limits).
    pub failures: u64,
    /// The decoded item.
    pub item: T,
}

/// Reads items of type `T` from one stream as one consumer of a group.
#[derive(Debug)]
pub struct Consumer<T> {
    link: RedisLink,
    stream: String,
    dead: String,
    group: String,
    name: String,
    settings: QueueSettings,
    codec: Codec,
    recovered: bool,
    /// The last own pending entry taken back while recovering: each is returned once, even
    /// if the caller holds it unacknowledged (the learner does, until a checkpoint).
    recovery_cursor: Option<String>,
    last_reclaim: Option<Instant>,
    acks_since_trim: u64,
    /// Entries a read delivered while the acknowledgement sent with it failed: returned by the
    /// next call instead of being left to the idle timeout.
    unreturned: Vec<RawEntry>,
    _item: PhantomData<fn() -> T>,
}

/// Entries whose lease [`Consumer::keep`] renews per round trip.
const KEEP_BATCH: usize = 512;

fn reason_kind(e: &CodecError) -> &'static str {
    match e {
        CodecError::Empty => "empty",
        CodecError::UnknownVersion { .. } => "format_version",
        CodecError::TooLarge { .. } => "too_large",
        CodecError::Expands { .. } => "expands",
        CodecError::Malformed(_) => "malformed",
        CodecError::Invalid(_) => "invalid",
    }
}

impl<T: QueueItem> Consumer<T> {
    /// Joins `group` on `stream` as `name`, on a connection of its own (blocking reads must not
    /// stall other users of `link`). Names must be unique among live consumers; a restarted
    /// process that reuses its name first takes back the entries it held.
    pub async fn new(
        link: &RedisLink,
        stream: impl Into<String>,
        group: &str,
        name: impl Into<String>,
        settings: QueueSettings,
    ) -> Result<Self> {
        let stream = stream.into();
        let link = link.fresh();
        ensure_group(&link, &stream, group).await?;
        Ok(Self {
            dead: Keys::dead_letter(&stream),
            link,
            stream,
            group: group.into(),
            name: name.into(),
            codec: Codec::new(settings.max_payload_bytes),
            settings,
            recovered: false,
            recovery_cursor: None,
            last_reclaim: None,
            acks_since_trim: 0,
            unreturned: Vec::new(),
            _item: PhantomData,
        })
    }

    /// This consumer's name in the group.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The stream key.
    pub fn stream(&self) -> &str {
        &self.stream
    }

    /// The dead-letter stream key.
    pub fn dead_letter_stream(&self) -> &str {
        &self.dead
    }

    /// The next batch: first this consumer's own unacknowledged entries (after a restart; each
    /// returned once, in id order), then entries idle past `claim_idle` in other consumers'
    /// hands (or in its own: see [`Consumer::keep`]), then new entries (blocking up to `block`).
    /// Entries that cannot be decoded go to the dead-letter stream and are not returned; the
    /// batch may therefore be empty. Every returned entry is in progress: until
    /// [`Consumer::finish`] (or an ack, forward or dead-letter), a crash or a give-up counts as
    /// a failed delivery of it.
    pub async fn next_batch(&mut self) -> Result<Vec<Delivery<T>>> {
        self.next_after(false).await
    }

    /// [`Consumer::ack`] of `entry_ids`, then [`Consumer::next_batch`], in one round trip when
    /// the next batch is new entries (the acknowledgement and the read are pipelined; the
    /// acknowledgement runs first on the server). Returns how many were still pending, and the
    /// batch. A consumer that acknowledges each batch before reading the next waits one round
    /// trip per batch instead of two. With entries to acknowledge the read does not block: the
    /// batch is empty when nothing new was there, and the next call (with nothing to
    /// acknowledge) waits for entries.
    pub async fn ack_and_next(&mut self, entry_ids: &[String]) -> Result<(u64, Vec<Delivery<T>>)> {
        if entry_ids.is_empty() || self.settles_alone() {
            let acked = self.ack(entry_ids).await?;
            return Ok((acked, self.next_after(!entry_ids.is_empty()).await?));
        }
        let trim = self.trim_due(entry_ids.len());
        let ack = ack::ack_cmd((&self.stream, &self.group), entry_ids, trim);
        let (replies, raw) = self.read_after(vec![ack], false).await?;
        let done = match replies.into_iter().next().map(|v| v.extract_error()) {
            Some(Ok(v)) => ack::parse(&v)?,
            // Not acknowledged (NOSCRIPT after a server restart, or a failure of its own): once
            // more on its own, and should that fail too, the entries read are kept for the next
            // call rather than left to the idle timeout.
            failed => {
                if let Some(Err(e)) = &failed {
                    if e.code() != Some("NOSCRIPT") {
                        tracing::debug!(stream = %self.stream, error = %e, "pipelined acknowledgement failed; sending it alone");
                    }
                }
                match self.ack_script(entry_ids, trim).await {
                    Ok(done) => done,
                    Err(e) => {
                        self.unreturned = raw;
                        return Err(e);
                    }
                }
            }
        };
        let acked = self.count_acks(done, trim);
        Ok((acked, self.decode_all(raw, &HashMap::new(), &HashMap::new()).await?))
    }

    /// Whether a batch's settling (acknowledgement, forward) must go alone rather than with the
    /// next read: entries from a failed call are waiting to be returned, or the next batch is
    /// taken back (a recovery, or a reclaim that is due) rather than read.
    fn settles_alone(&self) -> bool {
        !self.unreturned.is_empty() || !self.recovered || self.reclaim_due()
    }

    fn reclaim_due(&self) -> bool {
        let every = (self.settings.claim_idle / 4).max(Duration::from_millis(10));
        self.last_reclaim.is_none_or(|t| t.elapsed() >= every)
    }

    /// The next batch once the previous one is settled: entries a failed call left, else own
    /// or idle entries taken back, else new entries (blocking unless `settled`: the outcome of
    /// a settling that came with this call is not held back by a wait for entries).
    async fn next_after(&mut self, settled: bool) -> Result<Vec<Delivery<T>>> {
        if !self.unreturned.is_empty() {
            let raw = std::mem::take(&mut self.unreturned);
            return self.decode_all(raw, &HashMap::new(), &HashMap::new()).await;
        }
        let reclaim_due = self.reclaim_due();
        if !self.recovered || reclaim_due {
            if let Some(batch) = self.take_back(reclaim_due).await? {
                return Ok(batch);
            }
        }
        let raw = self.read_after(Vec::new(), !settled).await?.1;
        self.decode_all(raw, &HashMap::new(), &HashMap::new()).await
    }

    /// Own entries back after a restart, then (when `reclaim`) other consumers' idle ones;
    /// `None` when there were none.
    async fn take_back(&mut self, reclaim: bool) -> Result<Option<Vec<Delivery<T>>>> {
        if !self.recovered {
            let start = self.recovery_cursor.as_ref().map_or_else(|| "-".to_string(), |id| format!("({id}"));
            let rows = self.pending_rows(Duration::ZERO, Some(self.name.clone()), &start).await?;
            match rows.last() {
                None => self.recovered = true,
                Some(last) => {
                    self.recovery_cursor = Some(last.id.clone());
                    return Ok(Some(self.claim(rows, Duration::ZERO).await?));
                }
            }
        }
        if reclaim {
            self.last_reclaim = Some(Instant::now());
            let rows = self.pending_rows(self.settings.claim_idle, None, "-").await?;
            if !rows.is_empty() {
                let claimed = self.claim(rows, self.settings.claim_idle).await?;
                metrics::QUEUE_RECLAIMED
                    .with_label_values(&[metrics::stream_label(&self.stream)])
                    .inc_by(claimed.len() as u64);
                if !claimed.is_empty() {
                    return Ok(Some(claimed));
                }
            }
        }
        Ok(None)
    }

    /// Marks entries this consumer holds as in progress again (the learner does before an
    /// update): from here until [`Consumer::finish`], a crash counts as a failed delivery.
    pub async fn begin(&self, entry_ids: &[String]) -> Result<()> {
        self.mark(entry_ids, true).await
    }

    /// Says that processing of entries this consumer holds is over for now — done, or not
    /// started (waiting in a batch) — though they stay unacknowledged: a restart that takes
    /// them back does not count against them.
    pub async fn finish(&self, entry_ids: &[String]) -> Result<()> {
        self.mark(entry_ids, false).await
    }

    async fn mark(&self, entry_ids: &[String], in_progress: bool) -> Result<()> {
        if entry_ids.is_empty() {
            return Ok(());
        }
        let (stream, group, name) = (self.stream.clone(), self.group.clone(), self.name.clone());
        let op = if in_progress { "mark in progress" } else { "clear in progress" };
        self.link
            .call(op, Duration::ZERO, |mut c| {
                let (stream, group, name) = (stream.clone(), group.clone(), name.clone());
                async move { progress::mark(&mut c, (&stream, &group, &name), entry_ids, in_progress).await }
            })
            .await
    }

    /// Sends `before` (settling commands: their replies are returned as values, errors
    /// included) and reads new entries with one XREADGROUP (blocking up to `block` when
    /// `wait`), in one round trip ([`pipelined`]).
    async fn read_after(&mut self, before: Vec<Cmd>, wait: bool) -> Result<(Vec<Value>, Vec<RawEntry>)> {
        let (settled, read) = match self.pipelined_read(before, wait).await? {
            // The group vanished (a Redis that lost its data, or a deleted stream): recreate it
            // and read again rather than failing the role.
            (settled, Value::ServerError(e)) if e.code() == "NOGROUP" => {
                tracing::warn!(stream = %self.stream, group = %self.group, "consumer group missing; recreating it");
                ensure_group(&self.link, &self.stream, &self.group).await?;
                let (_, read) = self.pipelined_read(Vec::new(), wait).await?;
                (settled, read)
            }
            other => other,
        };
        let read = read.extract_error().map_err(|source| self.redis_error("xreadgroup", source))?;
        Ok((settled, reply::read_reply("xreadgroup", read)?))
    }

    /// The pipeline of `before` and the read, which blocks only when `wait`. Callers wait only
    /// when nothing is being settled, so that a settling's outcome is never held back by a wait
    /// for entries.
    async fn pipelined_read(&self, before: Vec<Cmd>, wait: bool) -> Result<(Vec<Value>, Value)> {
        let count = self.settings.read_count;
        let block = if wait { self.settings.block } else { Duration::ZERO };
        let mut read = redis::cmd("XREADGROUP");
        read.arg("GROUP").arg(&self.group).arg(&self.name).arg("COUNT").arg(count);
        if !block.is_zero() {
            read.arg("BLOCK").arg(block.as_millis() as u64);
        }
        read.arg("STREAMS").arg(&self.stream).arg(">");
        let pipe = &pipelined::settle_then_read(before, read);
        self.link
            .call("xreadgroup", block, |mut c| async move {
                let (settled, read) = pipelined::query(&mut c, pipe).await?;
                // A pipeline's replies come back as values, errors included; the read's error
                // is made the call's, so that the link retries a passing one (LOADING while a
                // restarted server reads its append-only file: found by the kill soak, where
                // an RRM worker died of it) as it retries any command. The settling commands in
                // the same pipeline were refused alike, or are idempotent (an acknowledgement;
                // a forward skips entries no longer this consumer's). NOGROUP stays a value:
                // the caller recreates the group.
                match read {
                    Value::ServerError(e) if e.code() != "NOGROUP" => Err(e.into()),
                    read => Ok((settled, read)),
                }
            })
            .await
    }

    fn redis_error(&self, op: &'static str, source: redis::RedisError) -> ProtocolError {
        ProtocolError::Redis { endpoint: self.link.endpoint().to_string(), op, source }
    }

    /// Whether acknowledging `n` more entries is due to trim the stream.
    fn trim_due(&self, n: usize) -> bool {
        n > 0 && self.acks_since_trim + n as u64 >= self.settings.trim_every
    }

    /// Counts what an acknowledgement did (metrics, the trim clock); returns the acknowledged.
    fn count_acks(&mut self, done: ack::Acked, trimmed: bool) -> u64 {
        let label = [metrics::stream_label(&self.stream)];
        metrics::QUEUE_ACKED.with_label_values(&label).inc_by(done.acked);
        if trimmed {
            self.acks_since_trim = 0;
            metrics::QUEUE_TRIMMED.with_label_values(&label).inc_by(done.trimmed);
        } else {
            self.acks_since_trim += done.acked;
        }
        done.acked
    }

    /// The acknowledgement script alone (loaded first if the server lacks it).
    async fn ack_script(&self, entry_ids: &[String], trim: bool) -> Result<ack::Acked> {
        let (stream, group) = (self.stream.as_str(), self.group.as_str());
        let v: Value =
            self.link
                .call("xack", Duration::ZERO, |mut c| async move {
                    ack::ack(&mut c, (stream, group), entry_ids, trim).await
                })
                .await?;
        ack::parse(&v)
    }

    /// Acknowledges entries; returns how many were still pending. Every `trim_every`
    /// acknowledgements, the same round trip trims the entries all groups have acknowledged.
    pub async fn ack(&mut self, entry_ids: &[String]) -> Result<u64> {
        if entry_ids.is_empty() {
            return Ok(0);
        }
        let trim = self.trim_due(entry_ids.len());
        let done = self.ack_script(entry_ids, trim).await?;
        Ok(self.count_acks(done, trim))
    }

    /// Tells the group that this consumer still holds `entry_ids`, unacknowledged on purpose:
    /// each one still pending for this consumer has its idle time reset (XCLAIM … JUSTID, which
    /// leaves the delivery count alone), so it is neither reclaimed nor dead-lettered. For a
    /// consumer that holds entries longer than `claim_idle` by design — the learner holds them
    /// until a checkpoint covers their update — call it more often than `claim_idle`. Returns
    /// the ids that were still this consumer's; the others were acknowledged, reclaimed by
    /// another consumer or dead-lettered meanwhile, and are left alone.
    pub async fn keep(&mut self, entry_ids: &[String]) -> Result<Vec<String>> {
        let mut kept = Vec::with_capacity(entry_ids.len());
        for chunk in entry_ids.chunks(KEEP_BATCH) {
            let (stream, group, name) = (self.stream.clone(), self.group.clone(), self.name.clone());
            let ids: Vec<String> = self
                .link
                .call("keep owned", Duration::ZERO, |mut c| {
                    let (stream, group, name) = (stream.clone(), group.clone(), name.clone());
                    async move { keep_owned(&mut c, &stream, &group, &name, chunk).await }
                })
                .await?;
            kept.extend(ids);
        }
        Ok(kept)
    }

    /// Moves an entry this consumer holds to the dead-letter stream with `reason` (and its
    /// original bytes), acknowledging it, atomically. Returns whether it was still ours.
    pub async fn dead_letter(&mut self, entry_id: &str, deliveries: u64, reason: &str) -> Result<bool> {
        let moved =
            self.dead_letter_many(&[(entry_id.to_string(), deliveries, 0, reason.to_string())], "rejected").await?;
        Ok(!moved.is_empty())
    }

    /// Entries of the dead-letter stream, oldest first (for tools, tests and operators).
    pub async fn dead_letters(&self, count: usize) -> Result<Vec<DeadLetter>> {
        read_dead_letters(&self.link, &self.dead, count).await
    }

    /// Runs the move script, loading it first if the server lacks it; returns the source ids
    /// moved (those still this consumer's).
    async fn run_moves(&self, destination: &str, caps: (u64, u64), moves: &[Move]) -> Result<Vec<String>> {
        let cmd = &move_cmd(&self.stream, destination, (&self.group, &self.name), caps, moves);
        self.link.call("move owned", Duration::ZERO, |mut c| async move { move_owned(&mut c, cmd).await }).await
    }

    /// Dead-letters `(entry id, deliveries, failures, reason)`s this consumer holds.
    async fn dead_letter_many(&mut self, entries: &[(String, u64, u64, String)], kind: &str) -> Result<Vec<String>> {
        let moves: Vec<Move> = entries
            .iter()
            .map(|(id, deliveries, failures, reason)| {
                tracing::warn!(stream = %self.stream, entry = %id, deliveries, reason = %reason, "entry moved to the dead-letter stream");
                Move {
                    source_id: id.clone(),
                    keep_original: true,
                    fields: vec![
                        ("source_id".into(), id.clone().into_bytes()),
                        ("reason".into(), reason.clone().into_bytes()),
                        ("deliveries".into(), deliveries.to_string().into_bytes()),
                        ("failures".into(), failures.to_string().into_bytes()),
                        ("consumer".into(), self.name.clone().into_bytes()),
                        ("group".into(), self.group.clone().into_bytes()),
                        ("at_ms".into(), crate::clock::unix_ms().to_string().into_bytes()),
                    ],
                }
            })
            .collect();
        let dead = self.dead.clone();
        let moved = self
            .run_moves(&dead, (self.settings.dead_letter_maxlen, self.settings.dead_letter_max_payload_bytes), &moves)
            .await?;
        let label = metrics::stream_label(&self.stream);
        metrics::QUEUE_DEAD_LETTERED.with_label_values(&[label, kind]).inc_by(moved.len() as u64);
        metrics::QUEUE_ACKED.with_label_values(&[label]).inc_by(moved.len() as u64);
        Ok(moved)
    }

    /// Pending entries idle at least `idle` from stream id `start` on (`(id` for after `id`),
    /// optionally only those of one consumer.
    async fn pending_rows(&self, idle: Duration, owner: Option<String>, start: &str) -> Result<Vec<PendingRow>> {
        let (stream, group, count) = (self.stream.clone(), self.group.clone(), self.settings.read_count);
        let v: Value = self
            .link
            .call("xpending", Duration::ZERO, |mut c| {
                let mut cmd = redis::cmd("XPENDING");
                cmd.arg(&stream).arg(&group).arg("IDLE").arg(idle.as_millis() as u64).arg(start).arg("+").arg(count);
                if let Some(o) = &owner {
                    cmd.arg(o);
                }
                async move { cmd.query_async(&mut c).await }
            })
            .await?;
        reply::pending_rows("xpending", &v)
    }

    /// Claims `rows` for this consumer (only those still idle `min_idle`), counting a failed
    /// delivery for each one that was in progress; dead-letters those that failed
    /// `max_deliveries` times and decodes the rest.
    async fn claim(&mut self, rows: Vec<PendingRow>, min_idle: Duration) -> Result<Vec<Delivery<T>>> {
        let ids: Vec<String> = rows.iter().map(|r| r.id.clone()).collect();
        let (stream, group, name) = (self.stream.clone(), self.group.clone(), self.name.clone());
        let idle_ms = min_idle.as_millis() as u64;
        let v: Value = self
            .link
            .call("xclaim", Duration::ZERO, |mut c| {
                let (stream, group, name, ids) = (stream.clone(), group.clone(), name.clone(), ids.clone());
                async move { progress::claim_counted(&mut c, (&stream, &group, &name), idle_ms, &ids).await }
            })
            .await?;
        let (claimed, failures) = progress::parse_claim(v)?;
        // XCLAIM counted one more delivery for each claimed entry.
        let counts: HashMap<String, (u64, String)> =
            rows.into_iter().map(|r| (r.id, (r.deliveries + 1, r.consumer))).collect();
        let failed = |id: &str| failures.get(id).copied().unwrap_or(0);
        let (exhausted, fresh): (Vec<RawEntry>, Vec<RawEntry>) =
            claimed.into_iter().partition(|e| failed(&e.id) >= self.settings.max_deliveries);
        if !exhausted.is_empty() {
            let doomed: Vec<(String, u64, u64, String)> = exhausted
                .iter()
                .map(|e| {
                    let (d, holder) = counts.get(&e.id).cloned().unwrap_or_default();
                    let f = failed(&e.id);
                    let reason = format!(
                        "failed {f} times: not acknowledged after {} deliveries, in progress when its consumer \
                         died or gave up (last held by {holder})",
                        d.saturating_sub(1)
                    );
                    (e.id.clone(), d.saturating_sub(1), f, reason)
                })
                .collect();
            self.dead_letter_many(&doomed, "max_deliveries").await?;
        }
        let deliveries = counts.into_iter().map(|(id, (d, _))| (id, d)).collect();
        self.decode_all(fresh, &deliveries, &failures).await
    }

    /// Decodes raw entries; the undecodable go to the dead-letter stream with the reason.
    async fn decode_all(
        &mut self,
        raw: Vec<RawEntry>,
        deliveries: &HashMap<String, u64>,
        failures: &HashMap<String, u64>,
    ) -> Result<Vec<Delivery<T>>> {
        let mut out = Vec::with_capacity(raw.len());
        let mut poison: Vec<(String, u64, String, &'static str)> = Vec::new();
        for e in raw {
            let count = deliveries.get(&e.id).copied().unwrap_or(1);
            let failed = failures.get(&e.id).copied().unwrap_or(0);
            let item_id = e.field(FIELD_ID).map(|b| String::from_utf8_lossy(b).into_owned()).unwrap_or_default();
            let Some(payload) = e.field(FIELD_PAYLOAD) else {
                poison.push((e.id, count, format!("entry has no `{FIELD_PAYLOAD}` payload field"), "missing_payload"));
                continue;
            };
            match self.codec.decode_valid::<T>(payload) {
                Ok(item) => {
                    tracing::trace!(stream = %self.stream, entry = %e.id, item_id = %item_id, "delivered");
                    out.push(Delivery { entry_id: e.id, item_id, deliveries: count, failures: failed, item });
                }
                Err(err) => poison.push((e.id, count, err.to_string(), reason_kind(&err))),
            }
        }
        metrics::QUEUE_DELIVERED.with_label_values(&[metrics::stream_label(&self.stream)]).inc_by(out.len() as u64);
        for (id, count, reason, kind) in poison {
            self.dead_letter_many(&[(id, count, 0, reason)], kind).await?;
        }
        Ok(out)
    }
}
