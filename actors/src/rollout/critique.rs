//! Waiting for the critiques of a group's initial attempts (Reagent-C/U) on the critique-reply
//! channel of [`protocol::critique`], and what each reply means for the slot: a critique to
//! refine with, or a reason not to refine.
//!
//! ```text
//!  protocol::critique::receive(ids, critique_wait) ─► Reply::Came(Judged)  ─► Judged(critique)
//!                                                     Reply::Came(Failed)  ─► Failed(reason)
//!                                                     Unreadable           ─► Failed(reason)
//!                                                     TimedOut             ─► TimedOut
//! ```
//!
//! The BLPOP holds its connection while it blocks, so each slot has a link of its own.

use std::collections::HashMap;
use std::time::Duration;

use protocol::critique::Reply;
use protocol::keys::Keys;
use protocol::link::RedisLink;
use protocol::metrics::ACTOR_CRITIQUES;
use protocol::wire::{TrajectoryId, Verdict};

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

    fn from_reply(reply: Reply) -> Self {
        match reply {
            Reply::Came(Verdict::Judged(j)) => Self::Judged(j.critique),
            Reply::Came(Verdict::Failed { judge_id, reason, attempts }) => {
                Self::Failed(format!("{judge_id} gave up after {attempts} attempts: {reason}"))
            }
            Reply::Came(Verdict::NotRequested) => Self::NotRequested,
            Reply::Unreadable(e) => Self::Failed(format!("unreadable critique reply: {e}")),
            Reply::TimedOut => Self::TimedOut,
        }
    }
}

/// Waits up to `wait` for the critiques of `ids` on the critique-reply channel
/// ([`protocol::critique::receive`]); every id gets an answer, `TimedOut` for those that did not
/// come. Errors only when Redis fails past its retries.
pub async fn await_critiques(
    link: &RedisLink,
    keys: &Keys,
    ids: &[TrajectoryId],
    wait: Duration,
) -> Result<HashMap<TrajectoryId, Critique>> {
    let replies = protocol::critique::receive(link, keys, ids, wait).await?;
    let out: HashMap<TrajectoryId, Critique> =
        replies.into_iter().map(|(id, r)| (id, Critique::from_reply(r))).collect();
    for c in out.values() {
        ACTOR_CRITIQUES.with_label_values(&[c.label()]).inc();
    }
    Ok(out)
}
