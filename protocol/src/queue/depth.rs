//! How full a stream is (for backpressure) and trimming of what every group acknowledged.

use std::time::Duration;

use redis::Value;

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

/// Trims entries of `stream` that every consumer group has acknowledged: those older than both
/// each group's oldest pending entry and its last-delivered id. Entries are never trimmed
/// before all groups are done with them. Returns how many were removed.
pub async fn trim_acknowledged(link: &RedisLink, stream: &str) -> Result<u64> {
    let key = stream.to_string();
    let info: Value = link
        .call("xinfo groups", Duration::ZERO, |mut c| {
            let key = key.clone();
            async move { redis::cmd("XINFO").arg("GROUPS").arg(&key).query_async(&mut c).await }
        })
        .await?;
    let groups = reply::groups("xinfo groups", &info)?;
    if groups.is_empty() {
        return Ok(0);
    }
    let mut floor: Option<(u64, u64)> = None;
    for g in &groups {
        let summary: Value = link
            .call("xpending", Duration::ZERO, |mut c| {
                let (key, name) = (key.clone(), g.name.clone());
                async move { redis::cmd("XPENDING").arg(&key).arg(&name).query_async(&mut c).await }
            })
            .await?;
        // Pending entries are protected; so is everything after the last delivered id.
        let bound = match reply::pending_min("xpending", &summary)? {
            Some(min_pending) => parse_id(&min_pending),
            None => parse_id(&g.last_delivered_id),
        };
        let Some(bound) = bound else { return Ok(0) };
        floor = Some(floor.map_or(bound, |f| f.min(bound)));
    }
    let Some((ms, seq)) = floor else { return Ok(0) };
    if (ms, seq) == (0, 0) {
        return Ok(0);
    }
    let minid = format!("{ms}-{seq}");
    let trimmed: u64 = link
        .call("xtrim", Duration::ZERO, |mut c| {
            let (key, minid) = (key.clone(), minid.clone());
            async move { redis::cmd("XTRIM").arg(&key).arg("MINID").arg(&minid).query_async(&mut c).await }
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
