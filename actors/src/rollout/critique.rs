//! Waiting for the critiques of a group's initial attempts (Reagent-C/U): the RRM worker
//! RPUSHes each attempt's Codec-encoded [`Verdict`] to `reagent:{run}:critique:<id>`; the slot
//! pops them with one BLPOP over every key still waiting, until all came or the deadline.
//!
//! ```text
//!  deadline = now + critique_wait
//!  loop: BLPOP critique:<id₁> … critique:<idₙ> (time left) ── nil ──► the rest timed out
//!          └─ [key, bytes] ─► decode Verdict ─► Judged(critique) │ Failed │ NotRequested
//! ```
//!
//! The BLPOP holds its connection while it blocks, so each slot has a link of its own.

use std::collections::HashMap;
use std::time::Duration;

use protocol::codec::Codec;
use protocol::keys::Keys;
use protocol::link::RedisLink;
use protocol::metrics::ACTOR_CRITIQUES;
use protocol::wire::{TrajectoryId, Verdict};
use tokio::time::Instant;

use crate::error::Result;

/// What came back for one initial attempt.
#[derive(Debug, Clone, PartialEq)]
pub enum Critique {
    /// The judge's critique: a refined attempt follows.
    Judged(String),
    /// The judge gave up (or the reply was unreadable): no refinement.
    Failed(String),
    /// Nothing came in time: no refinement.
    TimedOut,
    /// The RRM did not judge it (the run's feedback mode does not ask for it).
    NotRequested,
}

impl Critique {
    fn label(&self) -> &'static str {
        match self {
            Self::Judged(_) => "judged",
            Self::Failed(_) => "failed",
            Self::TimedOut => "timeout",
            Self::NotRequested => "not_requested",
        }
    }

    fn from_reply(bytes: &[u8], codec: &Codec) -> Self {
        match codec.decode::<Verdict>(bytes) {
            Ok(Verdict::Judged(j)) => Self::Judged(j.critique),
            Ok(Verdict::Failed { judge_id, reason, attempts }) => {
                Self::Failed(format!("{judge_id} gave up after {attempts} attempts: {reason}"))
            }
            Ok(Verdict::NotRequested) => Self::NotRequested,
            Err(e) => Self::Failed(format!("unreadable critique reply: {e}")),
        }
    }
}

/// Waits up to `wait` for the critiques of `ids`; every id gets an answer, `TimedOut` for those
/// that did not come. Errors only when Redis fails past its retries.
pub async fn await_critiques(
    link: &RedisLink,
    keys: &Keys,
    ids: &[TrajectoryId],
    wait: Duration,
) -> Result<HashMap<TrajectoryId, Critique>> {
    let codec = Codec::default();
    let deadline = Instant::now() + wait;
    let mut waiting: HashMap<String, TrajectoryId> = ids.iter().map(|id| (keys.critique_reply(*id), *id)).collect();
    let mut out = HashMap::with_capacity(ids.len());
    while !waiting.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        let names: Vec<String> = waiting.keys().cloned().collect();
        let names = &names;
        let popped: Option<(String, Vec<u8>)> = link
            .call("blpop critique replies", left, |mut c| async move {
                // Redis reads a timeout of 0 as "forever": never send less than a millisecond.
                let secs = deadline.saturating_duration_since(Instant::now()).as_secs_f64().max(0.001);
                redis::cmd("BLPOP").arg(names).arg(format!("{secs:.3}")).query_async(&mut c).await
            })
            .await?;
        let Some((key, bytes)) = popped else { break };
        if let Some(id) = waiting.remove(&key) {
            out.insert(id, Critique::from_reply(&bytes, &codec));
        }
    }
    out.extend(waiting.into_values().map(|id| (id, Critique::TimedOut)));
    for c in out.values() {
        ACTOR_CRITIQUES.with_label_values(&[c.label()]).inc();
    }
    Ok(out)
}
