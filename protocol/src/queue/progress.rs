//! Which deliveries count as failed: a "held" marker per entry, and a failure count.
//!
//! Redis counts every XCLAIM as a delivery, including the one by which a restarted consumer
//! takes back the entries it held — processed ones too (the learner holds applied entries until
//! a checkpoint). Counting those would dead-letter healthy entries after `max_deliveries`
//! restarts. So the queue keeps its own count of *failed* deliveries instead. A delivered entry
//! is in progress until its consumer says otherwise, so delivery itself writes nothing (reading
//! stays one plain XREADGROUP, pipelined with the previous acknowledgement); what is marked is
//! the opposite, an entry its consumer holds while not processing it:
//!
//! ```text
//!  <stream>:held:<group>      hash  entry id → consumer   delivered, not being processed
//!                                                         (set by Consumer::finish, cleared
//!                                                         by Consumer::begin and by a claim)
//!  <stream>:failures:<group>  hash  entry id → count      deliveries that failed or were cut
//!                                                         short
//!
//!  delivered = processing ──Consumer::finish──► held (marker set) ──Consumer::begin──► processing
//!       │ consumer dies / gives up                 │ consumer dies
//!       ▼                                          ▼
//!   XCLAIM by a recovery or a reclaim, in one script: marker absent → failures + 1;
//!   present → unchanged; the marker is cleared (the claimer is processing it now).
//!   failures ≥ max_deliveries → dead-lettered.
//! ```
//!
//! Acknowledging, forwarding and dead-lettering an entry delete both fields. An entry whose
//! delivery reply was lost (its consumer died before it arrived, or the reply timed out) is
//! charged one failure when it is reclaimed: from Redis's side it was delivered.

use std::collections::HashMap;
use std::sync::LazyLock;

use redis::{Script, Value};

use super::reply::{self, RawEntry};
use crate::error::{ProtocolError, Result};

/// The hash of entries held but not being processed, per stream and group.
pub(crate) fn held_key(stream: &str, group: &str) -> String {
    format!("{stream}:held:{group}")
}

/// The hash of failed-delivery counts, per stream and group.
pub(crate) fn failures_key(stream: &str, group: &str) -> String {
    format!("{stream}:failures:{group}")
}

static CLAIM_COUNTED: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
-- KEYS[1] stream, KEYS[2] held hash, KEYS[3] failures hash
-- ARGV: group, consumer, min idle ms, then entry ids
local group, consumer = ARGV[1], ARGV[2]
local claimed = redis.call('XCLAIM', KEYS[1], group, consumer, ARGV[3], unpack(ARGV, 4))
local counts = {}
for _, e in ipairs(claimed) do
  if e then
    local id = e[1]
    local failed
    if redis.call('HEXISTS', KEYS[2], id) == 1 then
      failed = tonumber(redis.call('HGET', KEYS[3], id) or '0')
      redis.call('HDEL', KEYS[2], id)
    else
      failed = redis.call('HINCRBY', KEYS[3], id, 1)
    end
    counts[#counts + 1] = id
    counts[#counts + 1] = failed
  end
end
return {claimed, counts}
"#,
    )
});

static HOLD_OWNED: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
-- KEYS[1] stream, KEYS[2] held hash; ARGV: group, consumer, then entry ids. Marks held only
-- the entries still pending for this consumer (one reclaimed by another is being processed
-- there).
local group, consumer = ARGV[1], ARGV[2]
for i = 3, #ARGV do
  if #redis.call('XPENDING', KEYS[1], group, ARGV[i], ARGV[i], 1, consumer) == 1 then
    redis.call('HSET', KEYS[2], ARGV[i], consumer)
  end
end
return 0
"#,
    )
});

static RELEASE_OWNED: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
-- KEYS[1] held hash; ARGV: consumer, then entry ids. Clears only this consumer's markers.
for i = 2, #ARGV do
  if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[1] then redis.call('HDEL', KEYS[1], ARGV[i]) end
end
return 0
"#,
    )
});

/// XCLAIMs `ids` for `consumer` (those still idle `min_idle_ms`) and counts a failed delivery
/// for each one that was not held (so was in progress); clears their held markers, since the
/// claimer is processing them now. Returns the claimed entries and each one's failed
/// deliveries so far.
pub(crate) async fn claim_counted(
    conn: &mut redis::aio::MultiplexedConnection,
    (stream, group, consumer): (&str, &str, &str),
    min_idle_ms: u64,
    ids: &[String],
) -> redis::RedisResult<Value> {
    let mut inv = CLAIM_COUNTED.prepare_invoke();
    inv.key(stream).key(held_key(stream, group)).key(failures_key(stream, group));
    inv.arg(group).arg(consumer).arg(min_idle_ms).arg(ids);
    inv.invoke_async(conn).await
}

/// Splits [`claim_counted`]'s reply into the entries and their failure counts.
pub(crate) fn parse_claim(v: Value) -> Result<(Vec<RawEntry>, HashMap<String, u64>)> {
    let odd = |detail: String| ProtocolError::UnexpectedReply { op: "claim", detail };
    let Value::Array(parts) = v else { return Err(odd(format!("expected a pair, got {v:?}"))) };
    let Ok([claimed, counts]) = <[Value; 2]>::try_from(parts) else { return Err(odd("reply of wrong shape".into())) };
    let entries = reply::entries("claim", claimed)?;
    let flat = match counts {
        Value::Array(items) => items,
        Value::Nil => Vec::new(),
        other => return Err(odd(format!("expected counts, got {other:?}"))),
    };
    let mut failures = HashMap::with_capacity(flat.len() / 2);
    for pair in flat.chunks(2) {
        let [id, n] = pair else { return Err(odd("odd number of count items".into())) };
        let n = match n {
            Value::Int(i) => u64::try_from(*i).map_err(|_| odd(format!("negative count {i}")))?,
            other => return Err(odd(format!("expected a count, got {other:?}"))),
        };
        failures.insert(reply::text("claim", id)?, n);
    }
    Ok((entries, failures))
}

/// Marks `ids` in progress for `consumer` (clears its held markers of them), or held (sets
/// them, for those still pending for `consumer`). Another consumer's markers and entries are
/// left alone.
pub(crate) async fn mark(
    conn: &mut redis::aio::MultiplexedConnection,
    (stream, group, consumer): (&str, &str, &str),
    ids: &[String],
    in_progress: bool,
) -> redis::RedisResult<()> {
    if in_progress {
        let mut inv = RELEASE_OWNED.prepare_invoke();
        inv.key(held_key(stream, group)).arg(consumer).arg(ids);
        return inv.invoke_async(conn).await;
    }
    let mut inv = HOLD_OWNED.prepare_invoke();
    inv.key(stream).key(held_key(stream, group)).arg(group).arg(consumer).arg(ids);
    inv.invoke_async(conn).await
}
