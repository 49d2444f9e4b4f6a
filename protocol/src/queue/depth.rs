//! How full a stream is (for backpressure) and trimming of what every group acknowledged.

use std::sync::LazyLock;
use std::time::Duration;

use redis::{Script, Value};

use super::reply::{self, parse_id};
use crate::error::Result;
use crate::link::RedisLink;
use crate::metrics;

/// What one XINFO round trip says of a stream.
struct StreamInfo {
    len: u64,
    groups: Vec<reply::GroupInfo>,
    /// The id of the newest entry ever added (`None` when the stream does not exist yet).
    last_generated: Option<String>,
}

/// The stream's length, its consumer groups and its last generated id (none of either when the
/// stream does not exist yet).
async fn groups_of(link: &RedisLink, stream: &str) -> Result<StreamInfo> {
    let key = stream.to_string();
    let (len, info, stream_info): (u64, Value, Value) = link
        .call("xinfo groups", Duration::ZERO, |mut c| {
            let key = key.clone();
            async move {
                redis::pipe()
                    .cmd("XLEN")
                    .arg(&key)
                    .cmd("XINFO")
                    .arg("GROUPS")
                    .arg(&key)
                    .cmd("XINFO")
                    .arg("STREAM")
                    .arg(&key)
                    .query_async(&mut c)
                    .await
            }
        })
        .await
        .or_else(|e| match &e {
            // XINFO on a stream that does not exist yet.
            crate::ProtocolError::Redis { source, .. } if source.to_string().contains("no such key") => {
                Ok((0, Value::Array(vec![]), Value::Nil))
            }
            _ => Err(e),
        })?;
    let last_generated =
        if matches!(stream_info, Value::Nil) { None } else { reply::last_generated_id("xinfo stream", &stream_info)? };
    Ok(StreamInfo { len, groups: reply::groups("xinfo groups", &info)?, last_generated })
}

/// A group's lag as far as it can be trusted: 0 when the group has been delivered the newest
/// entry ever added, whatever Redis's lag counter says (after a restart from the append-only
/// file the counter was seen reporting 3,816 undelivered entries of a stream whose every entry
/// had been delivered, and producers waited at the high-water mark for good); otherwise the
/// counter, at most the stream's length; `None` when Redis cannot tell.
fn trusted_lag(g: &reply::GroupInfo, len: u64, last_generated: Option<&str>) -> Option<u64> {
    let caught_up = match (parse_id(&g.last_delivered_id), last_generated.and_then(parse_id)) {
        (Some(delivered), Some(newest)) => delivered >= newest,
        _ => false,
    };
    if caught_up {
        return Some(0);
    }
    g.lag.map(|lag| lag.min(len))
}

/// Each consumer group of `stream` with its lag as the queue trusts it (see `trusted_lag`):
/// entries not yet delivered to it, or `None` when Redis cannot tell. What `reagent status`
/// shows, so that an operator reads the figure backpressure acts on, not Redis's raw counter
/// (which, after a restart from the append-only file, can count thousands of entries in a
/// stream whose every entry was delivered).
pub async fn trusted_lags(link: &RedisLink, stream: &str) -> Result<Vec<(String, Option<u64>)>> {
    let StreamInfo { len, groups, last_generated } = groups_of(link, stream).await?;
    Ok(groups.iter().map(|g| (g.name.clone(), trusted_lag(g, len, last_generated.as_deref()))).collect())
}

/// Unfinished entries of `stream`: for each consumer group, entries not yet delivered (lag)
/// plus delivered but unacknowledged (pending); the largest over groups. Without groups, or
/// when Redis cannot tell a group's lag, the stream length (an upper bound) is used. Zero means
/// every group has acknowledged everything written.
pub async fn stream_depth(link: &RedisLink, stream: &str) -> Result<u64> {
    Ok(measure(link, stream).await?.depth)
}

/// The backlog of `stream`, what backpressure counts: for each consumer group, entries not yet
/// delivered to any of its consumers (its lag); the largest over groups. Entries a consumer
/// holds (delivered, not yet acknowledged) are not backlog: each consumer bounds those itself
/// (a batch being judged; the learner's updates until its next checkpoint), and counting them
/// would let a learner that acknowledges only at checkpoints stall its own producers. Without
/// groups the stream length is used; when Redis cannot tell a group's lag, the length minus
/// the group's pending entries (an upper bound).
pub async fn stream_backlog(link: &RedisLink, stream: &str) -> Result<u64> {
    Ok(measure(link, stream).await?.backlog)
}

/// Both counts of one measurement (each also set as its gauge).
struct Counts {
    depth: u64,
    backlog: u64,
}

async fn measure(link: &RedisLink, stream: &str) -> Result<Counts> {
    let StreamInfo { len, groups, last_generated } = groups_of(link, stream).await?;
    let newest = last_generated.as_deref();
    let largest = |f: &dyn Fn(&reply::GroupInfo) -> u64| groups.iter().map(f).max().unwrap_or(len);
    let counts = Counts {
        depth: largest(&|g| trusted_lag(g, len, newest).map_or(len, |lag| lag + g.pending)),
        backlog: largest(&|g| trusted_lag(g, len, newest).unwrap_or_else(|| len.saturating_sub(g.pending))),
    };
    let label = [metrics::stream_label(stream)];
    metrics::QUEUE_DEPTH.with_label_values(&label).set(counts.depth as i64);
    metrics::QUEUE_BACKLOG.with_label_values(&label).set(counts.backlog as i64);
    Ok(counts)
}

/// The Lua function `trim(key)` behind [`trim_acknowledged`], shared with the acknowledgement
/// script (`ack.rs`), which trims in the same round trip every `trim_every` acknowledgements.
/// For each group the bound is its oldest pending entry, or its last-delivered id when nothing
/// is pending; the stream is trimmed below the smallest bound (XTRIM MINID), so entries are
/// never trimmed before every group is done with them. Ids compare as decimal strings (length,
/// then text), exactly, whatever their size. Returns how many entries were removed.
pub(crate) const TRIM_LUA: &str = r#"
local function id_less(a, b)
  local am, as = string.match(a, '^(%d+)-(%d+)$')
  local bm, bs = string.match(b, '^(%d+)-(%d+)$')
  if #am ~= #bm then return #am < #bm end
  if am ~= bm then return am < bm end
  if #as ~= #bs then return #as < #bs end
  return as < bs
end
local function trim(key)
  if redis.call('XLEN', key) == 0 then return 0 end
  local floor = nil
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', key)) do
    local name, last
    for i = 1, #g, 2 do
      if g[i] == 'name' then name = g[i + 1] elseif g[i] == 'last-delivered-id' then last = g[i + 1] end
    end
    local summary = redis.call('XPENDING', key, name)
    local bound = last
    if summary[1] > 0 then bound = summary[2] end
    if not bound or not string.match(bound, '^%d+-%d+$') then return 0 end
    if not floor or id_less(bound, floor) then floor = bound end
  end
  if not floor or floor == '0-0' then return 0 end
  return redis.call('XTRIM', key, 'MINID', floor)
end
"#;

static TRIM: LazyLock<Script> =
    LazyLock::new(|| Script::new(&format!("{TRIM_LUA}\n-- KEYS[1] the stream\nreturn trim(KEYS[1])\n")));

/// The EVALSHA of the trim of `stream`, for a pipeline ([`super::pipelined`]); a NOSCRIPT
/// reply is answered by [`trim_acknowledged`], which loads the script.
pub(crate) fn trim_cmd(stream: &str) -> redis::Cmd {
    super::pipelined::evalsha(&TRIM, &[stream])
}

/// Trims entries of `stream` that every consumer group has acknowledged: those older than both
/// each group's oldest pending entry and its last-delivered id, in one server-side script (one
/// round trip, atomic). Entries are never trimmed before all groups are done with them; a
/// stream without groups is left alone. Returns how many were removed.
pub async fn trim_acknowledged(link: &RedisLink, stream: &str) -> Result<u64> {
    let key = stream.to_string();
    let trimmed: u64 = link
        .call("trim", Duration::ZERO, |mut c| {
            let key = key.clone();
            async move { TRIM.key(&key).invoke_async(&mut c).await }
        })
        .await?;
    metrics::QUEUE_TRIMMED.with_label_values(&[metrics::stream_label(stream)]).inc_by(trimmed);
    Ok(trimmed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(last_delivered: &str, lag: Option<u64>) -> reply::GroupInfo {
        reply::GroupInfo { name: "g".into(), pending: 5, last_delivered_id: last_delivered.into(), lag }
    }

    #[test]
    fn a_lag_that_contradicts_the_last_delivered_id_is_not_trusted() {
        // The soak's case: everything delivered, the counter still says 3,816.
        assert_eq!(trusted_lag(&group("1700-4", Some(3816)), 145, Some("1700-4")), Some(0));
        // Delivered past the newest id (it cannot be, but it means "caught up" all the same).
        assert_eq!(trusted_lag(&group("1800-0", Some(7)), 145, Some("1700-4")), Some(0));
        // Behind: the counter, at most the stream's length.
        assert_eq!(trusted_lag(&group("1600-0", Some(12)), 145, Some("1700-4")), Some(12));
        assert_eq!(trusted_lag(&group("1600-0", Some(3816)), 145, Some("1700-4")), Some(145));
        // Redis cannot tell (nil lag), or nothing to compare with: unknown.
        assert_eq!(trusted_lag(&group("1600-0", None), 145, Some("1700-4")), None);
        assert_eq!(trusted_lag(&group("0-0", Some(3)), 3, None), Some(3));
    }
}
