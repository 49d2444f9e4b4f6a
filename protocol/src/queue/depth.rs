//! How full a stream is (for backpressure) and trimming of what every group acknowledged.

use std::time::Duration;

use redis::Value;

use super::reply::{self, parse_id};
use crate::error::Result;
use crate::link::RedisLink;
use crate::metrics;

/// The stream's length and its consumer groups (none when the stream does not exist yet).
async fn groups_of(link: &RedisLink, stream: &str) -> Result<(u64, Vec<reply::GroupInfo>)> {
    let key = stream.to_string();
    let (len, info): (u64, Value) = link
        .call("xinfo groups", Duration::ZERO, |mut c| {
            let key = key.clone();
            async move { redis::pipe().cmd("XLEN").arg(&key).cmd("XINFO").arg("GROUPS").arg(&key).query_async(&mut c).await }
        })
        .await
        .or_else(|e| match &e {
            // XINFO on a stream that does not exist yet.
            crate::ProtocolError::Redis { source, .. } if source.to_string().contains("no such key") => Ok((0, Value::Array(vec![]))),
            _ => Err(e),
        })?;
    Ok((len, reply::groups("xinfo groups", &info)?))
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
    let (len, groups) = groups_of(link, stream).await?;
    let largest = |f: &dyn Fn(&reply::GroupInfo) -> u64| groups.iter().map(f).max().unwrap_or(len);
    let counts = Counts {
        depth: largest(&|g| g.lag.map_or(len, |lag| lag + g.pending)),
        backlog: largest(&|g| g.lag.unwrap_or_else(|| len.saturating_sub(g.pending))),
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
