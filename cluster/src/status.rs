//! `reagent status`: a run's state read from Redis — the newest policy version, each stream's
//! length, consumer groups (pending, lag), dead letters, and the consumers of each group with
//! how long each has been idle (a live worker reads every `queue.block_ms`). The lag is the one
//! backpressure trusts (`protocol::queue::trusted_lags`): 0 once a group was delivered the newest
//! entry, whatever Redis's counter says after a restart; `unknown` when Redis cannot tell.
//!
//! ```text
//!  run default   feedback unified   policy version 42
//!  rollouts      length 12   dead letters 0
//!    group rrm       pending 4   lag 0   consumers: rrm-host-1 (idle 0.2 s, 4 pending)
//!  scored        …
//! ```

use std::time::Duration;

use anyhow::Result;
use protocol::config::ReagentConfig;
use protocol::keys::Keys;
use protocol::link::RedisLink;
use protocol::weights::WeightStore;
use protocol::wire::RunId;
use redis::streams::{StreamInfoConsumersReply, StreamInfoGroupsReply};

/// XLEN of `key` (0 for a missing key).
pub(crate) async fn xlen(link: &RedisLink, key: &str) -> Result<u64> {
    let key = key.to_string();
    Ok(link
        .call("xlen", Duration::ZERO, |mut c| {
            let key = key.clone();
            async move { redis::cmd("XLEN").arg(&key).query_async(&mut c).await }
        })
        .await?)
}

async fn groups(link: &RedisLink, key: &str) -> Result<StreamInfoGroupsReply> {
    let key = key.to_string();
    let reply = link
        .call("xinfo groups", Duration::ZERO, |mut c| {
            let key = key.clone();
            async move { redis::cmd("XINFO").arg("GROUPS").arg(&key).query_async(&mut c).await }
        })
        .await;
    match reply {
        Ok(r) => Ok(r),
        Err(e) if e.to_string().contains("no such key") => Ok(StreamInfoGroupsReply::default()),
        Err(e) => Err(e.into()),
    }
}

async fn consumers(link: &RedisLink, key: &str, group: &str) -> Result<StreamInfoConsumersReply> {
    let (key, group) = (key.to_string(), group.to_string());
    Ok(link
        .call("xinfo consumers", Duration::ZERO, |mut c| {
            let (key, group) = (key.clone(), group.clone());
            async move { redis::cmd("XINFO").arg("CONSUMERS").arg(&key).arg(&group).query_async(&mut c).await }
        })
        .await?)
}

/// Prints the run's state; the text is also returned (for tests).
pub async fn run(cfg: &ReagentConfig) -> Result<String> {
    let link = RedisLink::from_config(&cfg.redis)?;
    let run = RunId::new(cfg.run.id.clone())
        .map_err(|e| anyhow::anyhow!("run.id: expected {}, found {}", e.expected, e.found))?;
    let keys = Keys::new(&run);
    let mut out = String::new();
    let store = WeightStore::new(&link, &run, (&cfg.weights).into());
    let version = match store.latest_version().await? {
        Some(v) => v.0.to_string(),
        None => "none published yet".into(),
    };
    out.push_str(&format!("run {}   feedback {}   policy version {version}\n", cfg.run.id, cfg.run.feedback));
    for (name, key) in [("rollouts", keys.rollouts()), ("scored", keys.scored())] {
        let dead = Keys::dead_letter(&key);
        out.push_str(&format!(
            "{name:<10} length {:<6} dead letters {}\n",
            xlen(&link, &key).await?,
            xlen(&link, &dead).await?
        ));
        let lags = protocol::queue::trusted_lags(&link, &key).await?;
        for g in groups(&link, &key).await?.groups {
            // The lag the queue trusts (Redis's own counter can be wrong after a restart).
            let lag = lags.iter().find(|(name, _)| *name == g.name).and_then(|(_, lag)| *lag);
            let members = consumers(&link, &key, &g.name).await?;
            let listed: Vec<String> = members
                .consumers
                .iter()
                .map(|c| format!("{} (idle {:.1} s, {} pending)", c.name, c.idle as f64 / 1000.0, c.pending))
                .collect();
            out.push_str(&format!(
                "  group {:<8} pending {:<5} lag {:<6} consumers: {}\n",
                g.name,
                g.pending,
                lag.map_or("unknown".into(), |l| l.to_string()),
                if listed.is_empty() { "none".into() } else { listed.join(", ") }
            ));
        }
    }
    print!("{out}");
    Ok(out)
}
