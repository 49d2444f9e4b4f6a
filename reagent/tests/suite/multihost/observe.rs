//! What the test reads to judge a run: the streams (XRANGE, payloads decoded with the codec),
//! consumer-group state (XINFO GROUPS), the newest policy version, and the learner's
//! checkpoint ledger (which update trained which trajectory).

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use protocol::codec::Codec;
use protocol::link::RedisLink;
use serde::de::DeserializeOwned;

/// One stream entry: its stream id (milliseconds first), its `id` field, its decoded payload.
pub struct Entry<T> {
    /// The Redis stream id, `<ms>-<seq>`.
    pub stream_id: String,
    /// The application id (a trajectory id).
    pub id: String,
    /// The decoded payload.
    pub item: T,
}

impl<T> Entry<T> {
    /// When Redis appended it (ms since the epoch).
    pub fn at_ms(&self) -> u64 {
        self.stream_id.split('-').next().and_then(|m| m.parse().ok()).unwrap_or(0)
    }
}

/// A stream read incrementally: every entry so far, oldest first (nothing is trimmed in these
/// tests, so reading on from the last id seen misses nothing).
pub struct Tail<T> {
    stream: String,
    after: String,
    /// The entries read so far.
    pub entries: Vec<Entry<T>>,
}

impl<T: DeserializeOwned> Tail<T> {
    /// A reader of `stream` from its beginning.
    pub fn new(stream: String) -> Self {
        Self { stream, after: "-".into(), entries: Vec::new() }
    }

    /// Reads what was appended since the last call, in pages; panics on an undecodable payload.
    pub async fn update(&mut self, link: &RedisLink) -> &[Entry<T>] {
        let codec = Codec::new(64 << 20);
        let first_new = self.entries.len();
        let page = protocol::queue::read_range(link, &self.stream, &self.after, "+").await.unwrap();
        if let Some(last) = page.last() {
            self.after = format!("({}", last.stream_id);
        }
        for e in page {
            let payload = e.payload.unwrap_or_else(|| panic!("{} entry {} has no payload", self.stream, e.stream_id));
            let item =
                codec.decode(&payload).unwrap_or_else(|err| panic!("{} entry {}: {err}", self.stream, e.stream_id));
            self.entries.push(Entry { stream_id: e.stream_id, id: e.id.unwrap_or_default(), item });
        }
        &self.entries[first_new..]
    }
}

/// How many entries `stream` holds (XLEN; 0 when it does not exist).
pub async fn stream_len(link: &RedisLink, stream: &str) -> u64 {
    let key = stream.to_string();
    link.call("xlen", Duration::ZERO, |mut c| {
        let key = key.clone();
        async move { redis::cmd("XLEN").arg(key).query_async(&mut c).await }
    })
    .await
    .unwrap()
}

/// A consumer group's pending entries (delivered, unacknowledged) and lag (not yet delivered).
pub async fn group_state(link: &RedisLink, stream: &str, group: &str) -> (u64, u64) {
    let key = stream.to_string();
    let groups: Vec<HashMap<String, redis::Value>> = link
        .call("xinfo", Duration::ZERO, |mut c| {
            let key = key.clone();
            async move { redis::cmd("XINFO").arg("GROUPS").arg(key).query_async(&mut c).await }
        })
        .await
        .unwrap_or_default();
    let int = |g: &HashMap<String, redis::Value>, k: &str| match g.get(k) {
        Some(v) => redis::from_redis_value_ref::<u64>(v).unwrap_or(u64::MAX),
        None => u64::MAX,
    };
    groups
        .iter()
        .find(|g| g.get("name").and_then(|n| redis::from_redis_value_ref::<String>(n).ok()).as_deref() == Some(group))
        .map_or((0, u64::MAX), |g| (int(g, "pending"), int(g, "lag")))
}

/// The learner's ledger in its newest checkpoint: (trajectory id, trained?) per consumed
/// trajectory, in order, and the checkpoint's step and policy version.
pub struct Ledger {
    /// Every consumed trajectory id with whether it was trained (else dropped as stale).
    pub consumed: Vec<(String, bool)>,
    /// The checkpoint's step.
    pub step: u64,
    /// Its policy version.
    pub version: u64,
}

/// Reads `state.json` of the newest `step-*` checkpoint under `dir`.
pub fn newest_ledger(dir: &Path) -> Ledger {
    let newest = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading checkpoints {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("step-")))
        .max()
        .unwrap_or_else(|| panic!("no checkpoint in {}", dir.display()));
    let state: serde_json::Value = serde_json::from_slice(&std::fs::read(newest.join("state.json")).unwrap()).unwrap();
    let ids = |v: &serde_json::Value| -> Vec<String> {
        v.as_array().map(|a| a.iter().filter_map(|s| s.as_str().map(String::from)).collect()).unwrap_or_default()
    };
    let mut consumed = Vec::new();
    for record in state["consumption"]["history"].as_array().expect("state.json has consumption.history") {
        consumed.extend(ids(&record["trained"]).into_iter().map(|id| (id, true)));
        consumed.extend(ids(&record["dropped"]).into_iter().map(|id| (id, false)));
    }
    let known: std::collections::HashSet<&String> = consumed.iter().map(|(id, _)| id).collect();
    for id in ids(&state["consumption"]["applied_since_ack"]) {
        assert!(known.contains(&id), "applied_since_ack names {id}, which no history record holds");
    }
    Ledger {
        consumed,
        step: state["step"].as_u64().unwrap_or(0),
        version: state["policy_version"].as_u64().unwrap_or(0),
    }
}
