//! Forwarding: a consumer writes what it made of its entries to the next stream and
//! acknowledges them in one atomic script ([`Consumer::forward`]), or does that and reads its
//! next batch in one round trip ([`Consumer::forward_and_next`]).
//!
//! ```text
//!  forward_and_next:  ─► EVALSHA move (per entry still ours: XADD next; XACK; HDEL markers) ┐ one
//!                     ─► [EVALSHA trim, every trim_every acknowledgements]                  │ round
//!                     ─► XREADGROUP … STREAMS s >  (no BLOCK)                               ┘ trip
//!                     ◄─ [moved ids, [trimmed], entries]
//! ```
//!
//! Exactly once: the move script skips an entry that is no longer pending for this consumer
//! (reclaimed by another, or already moved), so sending it again — after NOSCRIPT, or when the
//! link retries the whole pipeline because the read was refused or the reply was lost — never
//! forwards an entry twice. Entries of the pipelined read are in progress as any delivery is:
//! a consumer that dies before forwarding them is charged a failed delivery of each.

use std::collections::HashMap;

use redis::Value;

use super::Consumer;
use crate::error::{ProtocolError, Result};
use crate::metrics;
use crate::queue::depth::{trim_acknowledged, trim_cmd};
use crate::queue::reply;
use crate::queue::scripts::{move_cmd, Move};
use crate::queue::{Delivery, Producer};
use crate::wire::QueueItem;

/// The moves of `items`: each encoded for `next`'s stream, its source entry acknowledged.
fn moves_of<U: QueueItem>(next: &Producer<U>, items: &[(String, U)]) -> Result<Vec<Move>> {
    items
        .iter()
        .map(|(id, item)| Ok(Move { source_id: id.clone(), keep_original: false, fields: next.encode(item)? }))
        .collect()
}

/// The move script's reply: the source ids it moved.
fn moved_ids(v: Value) -> Result<Vec<String>> {
    match v {
        Value::Array(items) => items.iter().map(|i| reply::text("move owned", i)).collect(),
        Value::Nil => Ok(Vec::new()),
        other => Err(ProtocolError::UnexpectedReply {
            op: "move owned",
            detail: format!("expected the moved entry ids, got {other:?}"),
        }),
    }
}

impl<T: QueueItem> Consumer<T> {
    /// Writes `items` to `next`'s stream and acknowledges their source entries in one atomic
    /// step, after waiting for room below `next`'s high-water mark. An entry that is no longer
    /// this consumer's (reclaimed by another after the idle timeout) is skipped, so it is
    /// forwarded once. Returns the source entry ids that were forwarded.
    pub async fn forward<U: QueueItem>(&mut self, next: &Producer<U>, items: &[(String, U)]) -> Result<Vec<String>> {
        if items.is_empty() {
            return Ok(Vec::new());
        }
        let moves = moves_of(next, items)?;
        next.admit(moves.len() as u64).await?;
        let moved = self.run_moves(next.stream(), (0, 0), &moves).await?;
        self.count_forwarded(next, moves.len(), &moved);
        self.note_acks(moved.len() as u64).await;
        Ok(moved)
    }

    /// [`Consumer::forward`] of `items`, then [`Consumer::next_batch`], in one round trip when
    /// the next batch is new entries: the forward script (and the trim, when due) and the read
    /// are pipelined, and Redis runs the forward first. Returns the source entry ids forwarded
    /// and the next batch. Same guarantees as `forward` then `next_batch`: each entry forwarded
    /// once, markers and failure counts deleted with its acknowledgement, undecodable entries
    /// of the batch dead-lettered. With items to forward the read does not block (the batch is
    /// empty when nothing new was there; the next call, with nothing to forward, waits).
    pub async fn forward_and_next<U: QueueItem>(
        &mut self,
        next: &Producer<U>,
        items: &[(String, U)],
    ) -> Result<(Vec<String>, Vec<Delivery<T>>)> {
        if items.is_empty() || self.settles_alone() {
            let moved = self.forward(next, items).await?;
            return Ok((moved, self.next_after(!items.is_empty()).await?));
        }
        let moves = moves_of(next, items)?;
        next.admit(moves.len() as u64).await?;
        let trim = self.trim_due(moves.len());
        let mut before = vec![move_cmd(&self.stream, next.stream(), (&self.group, &self.name), (0, 0), &moves)];
        if trim {
            before.push(trim_cmd(&self.stream));
        }
        let (replies, raw) = self.read_after(before, false).await?;
        let mut replies = replies.into_iter();
        let moved = match self.settle_moves(next.stream(), &moves, replies.next()).await {
            Ok(moved) => moved,
            Err(e) => {
                // Not forwarded, as far as this call knows: the entries read are kept for the
                // next call rather than left to the idle timeout.
                self.unreturned = raw;
                return Err(e);
            }
        };
        self.count_forwarded(next, moves.len(), &moved);
        if trim {
            self.note_trim(replies.next()).await;
        } else {
            self.acks_since_trim += moved.len() as u64;
        }
        Ok((moved, self.decode_all(raw, &HashMap::new(), &HashMap::new()).await?))
    }

    /// What the pipelined move did; when it failed (NOSCRIPT from a server that lost its
    /// scripts, or a failure of its own), the move once more on its own.
    async fn settle_moves(&self, destination: &str, moves: &[Move], reply: Option<Value>) -> Result<Vec<String>> {
        match reply.map(|v| v.extract_error()) {
            Some(Ok(v)) => moved_ids(v),
            failed => {
                if let Some(Err(e)) = &failed {
                    if e.code() != Some("NOSCRIPT") {
                        tracing::debug!(stream = %self.stream, error = %e, "pipelined forward failed; sending it alone");
                    }
                }
                self.run_moves(destination, (0, 0), moves).await
            }
        }
    }

    /// Metrics of a forward of `asked` entries of which `moved` were still this consumer's.
    fn count_forwarded<U: QueueItem>(&self, next: &Producer<U>, asked: usize, moved: &[String]) {
        if moved.len() < asked {
            tracing::warn!(stream = %self.stream, consumer = %self.name, skipped = asked - moved.len(), "entries were reclaimed by another consumer; not forwarded twice");
        }
        let label = metrics::stream_label(&self.stream);
        metrics::QUEUE_FORWARDED.with_label_values(&[label]).inc_by(moved.len() as u64);
        metrics::QUEUE_PRODUCED.with_label_values(&[metrics::stream_label(next.stream())]).inc_by(moved.len() as u64);
        metrics::QUEUE_ACKED.with_label_values(&[label]).inc_by(moved.len() as u64);
    }

    /// The pipelined trim's outcome; a failed one (NOSCRIPT) is sent alone, which loads it.
    async fn note_trim(&mut self, reply: Option<Value>) {
        self.acks_since_trim = 0;
        match reply.map(|v| v.extract_error()) {
            Some(Ok(Value::Int(n))) => {
                let label = [metrics::stream_label(&self.stream)];
                metrics::QUEUE_TRIMMED.with_label_values(&label).inc_by(u64::try_from(n).unwrap_or(0));
            }
            _ => {
                if let Err(e) = trim_acknowledged(&self.link, &self.stream).await {
                    tracing::warn!(stream = %self.stream, error = %e, "trimming acknowledged entries failed; will retry later");
                }
            }
        }
    }

    async fn note_acks(&mut self, n: u64) {
        self.acks_since_trim += n;
        if self.acks_since_trim >= self.settings.trim_every {
            self.acks_since_trim = 0;
            if let Err(e) = trim_acknowledged(&self.link, &self.stream).await {
                tracing::warn!(stream = %self.stream, error = %e, "trimming acknowledged entries failed; will retry later");
            }
        }
    }
}
