//! Critique replies: the verdict of an initial attempt, sent back to the actor that refines it.
//!
//! ```text
//!  MULTI  DEL reagent:{run}:critique:<id>          a redelivered trajectory replaces, never doubles
//!         RPUSH reagent:{run}:critique:<id> <Codec-encoded Verdict>
//!         EXPIRE reagent:{run}:critique:<id> <critique_reply_ttl_s>
//!  EXEC                                           ──► the actor BLPOPs it with a deadline
//! ```
//!
//! Written before the trajectory is forwarded, so a crash between the two leaves the entry
//! pending (to be judged and replied again), never a forwarded trajectory without its reply.

use std::time::Duration;

use protocol::codec::Codec;
use protocol::keys::Keys;
use protocol::link::RedisLink;
use protocol::wire::{TrajectoryId, Verdict};

use crate::error::RrmError;
use crate::metrics;

/// Pushes each `(id, verdict)` to its reply key with an expiry of `ttl`, all in one transaction.
pub async fn push(
    link: &RedisLink,
    keys: &Keys,
    replies: &[(TrajectoryId, &Verdict)],
    ttl: Duration,
) -> Result<(), RrmError> {
    if replies.is_empty() {
        return Ok(());
    }
    let codec = Codec::default();
    let encoded = replies
        .iter()
        .map(|(id, v)| Ok((keys.critique_reply(*id), codec.encode(v)?)))
        .collect::<Result<Vec<_>, protocol::error::CodecError>>()
        .map_err(protocol::ProtocolError::from)?;
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
    metrics::CRITIQUE_REPLIES.inc_by(replies.len() as u64);
    Ok(())
}
