//! Reading a stream's entries in place (XRANGE, paged), without a consumer group: for
//! observers — `reagent status`-like tools, benchmarks and tests — that must not take or
//! acknowledge anything.

use std::time::Duration;

use super::reply::{self, RawEntry};
use super::{FIELD_ID, FIELD_PAYLOAD};
use crate::error::Result;
use crate::link::RedisLink;

/// Entries per XRANGE page.
const PAGE: usize = 512;

/// One entry as stored: its stream id and the queue's two fields (absent when the entry lacks
/// them).
#[derive(Debug, Clone, PartialEq)]
pub struct StreamEntry {
    /// The stream id (`<ms>-<seq>`).
    pub stream_id: String,
    /// Field `id`: the item's application id.
    pub id: Option<String>,
    /// Field `p`: the codec payload.
    pub payload: Option<Vec<u8>>,
}

impl StreamEntry {
    /// The millisecond part of the stream id.
    pub fn ms(&self) -> u64 {
        self.stream_id.split('-').next().and_then(|m| m.parse().ok()).unwrap_or(0)
    }

    fn from_raw(e: RawEntry) -> Self {
        let id = e.field(FIELD_ID).map(|b| String::from_utf8_lossy(b).into_owned());
        let payload = e.field(FIELD_PAYLOAD).map(<[u8]>::to_vec);
        Self { stream_id: e.id, id, payload }
    }
}

/// Every entry of `stream` from `from` to `to` (XRANGE bounds: `-`, `+`, an id, or `(id` for
/// exclusive), oldest first, read in pages. A stream that does not exist reads as empty.
pub async fn read_range(link: &RedisLink, stream: &str, from: &str, to: &str) -> Result<Vec<StreamEntry>> {
    let mut out = Vec::new();
    let mut start = from.to_string();
    loop {
        let (key, a, b) = (stream.to_string(), start.clone(), to.to_string());
        let v: redis::Value = link
            .call("xrange", Duration::ZERO, |mut c| {
                let mut cmd = redis::cmd("XRANGE");
                cmd.arg(&key).arg(&a).arg(&b).arg("COUNT").arg(PAGE);
                async move { cmd.query_async(&mut c).await }
            })
            .await?;
        let page = reply::entries("xrange", v)?;
        let full = page.len() == PAGE;
        let Some(last) = page.last() else { return Ok(out) };
        start = format!("({}", last.id);
        out.extend(page.into_iter().map(StreamEntry::from_raw));
        if !full {
            return Ok(out);
        }
    }
}

/// Every entry of `stream`, oldest first.
pub async fn read_all(link: &RedisLink, stream: &str) -> Result<Vec<StreamEntry>> {
    read_range(link, stream, "-", "+").await
}
