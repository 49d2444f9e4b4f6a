//! Which deliveries count as failed: an in-progress marker per entry, and a failure count.
//!
//! Redis counts every XCLAIM as a delivery, including the one by which a restarted consumer
//! takes back the entries it held — processed ones too (the learner holds applied entries until
//! a checkpoint). Counting those would dead-letter healthy entries after `max_deliveries`
//! restarts. So the queue keeps its own count of *failed* deliveries instead:
//!
//! ```text
//!  <stream>:progress:<group>  hash  entry id → consumer   processing under way (marked on
//!                                                         delivery, or by Consumer::begin)
//!  <stream>:failures:<group>  hash  entry id → count      deliveries that failed or were cut
//!                                                         short
//!
//!  delivered ──(marker set)──► processing ──Consumer::finish──► held (marker cleared)
//!       │                          │ consumer dies / gives up         │ consumer dies
//!       ▼                          ▼                                  ▼
//!   XCLAIM by a recovery or a reclaim, in one script: marker present → failures + 1;
//!   absent → unchanged. failures ≥ max_deliveries → dead-lettered.
//! ```
//!
//! Acknowledging, forwarding and dead-lettering an entry delete both fields. A consumer that
//! dies between reading an entry and marking it (one round trip) is not charged for it: it
//! had not started.

use std::collections::HashMap;
use std::sync::LazyLock;

use redis::{Script, Value};

use super::reply::{self, RawEntry};
use crate::error::{ProtocolError, Result};

/// The hash of entries whose processing is under way, per stream and group.
pub(crate) fn progress_key(stream: &str, group: &str) -> String {
    format!("{stream}:progress:{group}")
}

/// The hash of failed-delivery counts, per stream and group.
pub(crate) fn failures_key(stream: &str, group: &str) -> String {
    format!("{stream}:failures:{group}")
}

static CLAIM_COUNTED: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
-- KEYS[1] stream, KEYS[2] progress hash, KEYS[3] failures hash
-- ARGV: group, consumer, min idle ms, then entry ids
local group, consumer = ARGV[1], ARGV[2]
local claimed = redis.call('XCLAIM', KEYS[1], group, consumer, ARGV[3], unpack(ARGV, 4))
local counts = {}
for _, e in ipairs(claimed) do
  if e then
    local id = e[1]
    local failed
    if redis.call('HEXISTS', KEYS[2], id) == 1 then
      failed = redis.call('HINCRBY', KEYS[3], id, 1)
    else
      failed = tonumber(redis.call('HGET', KEYS[3], id) or '0')
    end
    redis.call('HSET', KEYS[2], id, consumer)
    counts[#counts + 1] = id
    counts[#counts + 1] = failed
  end
end
return {claimed, counts}
"#,
    )
});

static FINISH_OWNED: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
-- KEYS[1] progress hash; ARGV: consumer, then entry ids. Clears only this consumer's markers.
for i = 2, #ARGV do
  if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[1] then redis.call('HDEL', KEYS[1], ARGV[i]) end
end
return 0
"#,
    )
});

/// XCLAIMs `ids` for `consumer` (those still idle `min_idle_ms`) and counts a failed delivery
/// for each one whose marker shows it was in progress; marks them in progress for `consumer`.
/// Returns the claimed entries and each one's failed deliveries so far.
pub(crate) async fn claim_counted(
    conn: &mut redis::aio::MultiplexedConnection,
    (stream, group, consumer): (&str, &str, &str),
    min_idle_ms: u64,
    ids: &[String],
) -> redis::RedisResult<Value> {
    let mut inv = CLAIM_COUNTED.prepare_invoke();
    inv.key(stream).key(progress_key(stream, group)).key(failures_key(stream, group));
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

/// Marks `ids` in progress for `consumer`, or clears `consumer`'s markers of them (another
/// consumer's are left alone).
pub(crate) async fn mark(
    conn: &mut redis::aio::MultiplexedConnection,
    (stream, group, consumer): (&str, &str, &str),
    ids: &[String],
    in_progress: bool,
) -> redis::RedisResult<()> {
    if in_progress {
        let mut cmd = redis::cmd("HSET");
        cmd.arg(progress_key(stream, group));
        for id in ids {
            cmd.arg(id).arg(consumer);
        }
        return cmd.query_async(conn).await;
    }
    let mut inv = FINISH_OWNED.prepare_invoke();
    inv.key(progress_key(stream, group)).arg(consumer).arg(ids);
    inv.invoke_async(conn).await
}

/// Acknowledges `ids` and forgets their marker and failure count, atomically; returns how many
/// were still pending.
pub(crate) async fn ack(
    conn: &mut redis::aio::MultiplexedConnection,
    (stream, group): (&str, &str),
    ids: &[String],
) -> redis::RedisResult<u64> {
    let (acked, _, _): (u64, u64, u64) = redis::pipe()
        .atomic()
        .cmd("XACK")
        .arg(stream)
        .arg(group)
        .arg(ids)
        .cmd("HDEL")
        .arg(progress_key(stream, group))
        .arg(ids)
        .cmd("HDEL")
        .arg(failures_key(stream, group))
        .arg(ids)
        .query_async(conn)
        .await?;
    Ok(acked)
}
