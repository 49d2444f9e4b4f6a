//! The critique-reply channel (Reagent-C/U): the RRM worker sends the [`Verdict`] of each initial
//! attempt back to the actor that waits to refine it. Writer and reader live here side by side,
//! so the key, the encoding, the expiry and the deadline are one contract, not a convention
//! between two crates.
//!
//! ```text
//!  rrm-worker  send():   MULTI  DEL   reagent:{run}:critique:<id>   a redelivered trajectory replaces,
//!                               RPUSH reagent:{run}:critique:<id> <Codec(Verdict)>     never doubles
//!                               EXPIRE reagent:{run}:critique:<id> <ttl, ≥ 1 s>
//!                        EXEC
//!  actor       receive(): deadline = now + wait
//!                        loop: BLPOP critique:<id₁> … critique:<idₙ> (time left)
//!                                ├─ nil ─────────────► the rest: Reply::TimedOut
//!                                └─ [key, bytes] ────► Reply::Came(Verdict) │ Reply::Unreadable(why)
//! ```
//!
//! A BLPOP holds its connection while it blocks, so each waiting caller needs a link of its own
//! ([`RedisLink::fresh`]). Replies expire after the TTL, so a refined attempt that never comes
//! (its actor died) leaves nothing behind.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

use crate::codec::Codec;
use crate::error::{ProtocolError, Result};
use crate::keys::Keys;
use crate::link::RedisLink;
use crate::wire::{TrajectoryId, Verdict};

/// What came back for one initial attempt.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// The RRM worker's verdict (judged, failed, or not requested).
    Came(Verdict),
    /// A reply came but did not decode: names why.
    Unreadable(String),
    /// Nothing came before the deadline.
    TimedOut,
}

/// Sends each `(id, verdict)` to its reply key with an expiry of `ttl` (at least a second), all
/// in one transaction. Returns how many were sent.
pub async fn send(link: &RedisLink, keys: &Keys, replies: &[(TrajectoryId, &Verdict)], ttl: Duration) -> Result<usize> {
    if replies.is_empty() {
        return Ok(0);
    }
    let codec = Codec::default();
    let encoded = replies
        .iter()
        .map(|(id, v)| Ok((keys.critique_reply(*id), codec.encode(v)?)))
        .collect::<Result<Vec<_>, crate::error::CodecError>>()
        .map_err(ProtocolError::from)?;
    let ttl_s = ttl.as_secs().max(1);
    link.call("critique reply", Duration::ZERO, |mut c| {
        let mut pipe = redis::pipe();
        pipe.atomic();
        for (key, payload) in &encoded {
            pipe.cmd("DEL").arg(key).ignore();
            pipe.cmd("RPUSH").arg(key).arg(payload.as_slice()).ignore();
            pipe.cmd("EXPIRE").arg(key).arg(ttl_s).ignore();
        }
        async move { pipe.query_async::<()>(&mut c).await }
    })
    .await?;
    Ok(replies.len())
}

/// Waits up to `wait` for the replies of `ids`; every id gets an answer ([`Reply::TimedOut`] for
/// those that did not come in time). Errors only when Redis fails past its retries.
pub async fn receive(
    link: &RedisLink,
    keys: &Keys,
    ids: &[TrajectoryId],
    wait: Duration,
) -> Result<HashMap<TrajectoryId, Reply>> {
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
            let reply = match codec.decode::<Verdict>(&bytes) {
                Ok(v) => Reply::Came(v),
                Err(e) => Reply::Unreadable(e.to_string()),
            };
            out.insert(id, reply);
        }
    }
    out.extend(waiting.into_values().map(|id| (id, Reply::TimedOut)));
    Ok(out)
}
