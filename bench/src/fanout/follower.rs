//! The hidden `reagent bench fanout-follower`: one weight reader, as an actor reads (a watcher
//! on its read server's notify channel, then `fetch_newer_than`, every chunk verified), through
//! `--read` (a replica) with `--primary` as the fallback. It reports on the primary when it is
//! ready and when it holds each version, with how many reads fell back (so a layout that was
//! secretly read from the primary is caught).

use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use protocol::config::ReagentConfig;
use protocol::link::{LinkSettings, RedisLink};
use protocol::metrics::WEIGHTS_READ_FALLBACKS;
use protocol::weights::{WeightSettings, WeightStore};
use protocol::wire::RunId;

use super::{hash_key, now_us, FanoutFollowerArgs, FOLLOWER_LIFETIME};

/// Runs one follower until its parent (the bench) is gone or [`FOLLOWER_LIFETIME`] passed.
pub async fn follower(config: &ReagentConfig, args: FanoutFollowerArgs) -> Result<()> {
    let started = Instant::now();
    let parent = std::os::unix::process::parent_id();
    let run = RunId::new(args.run.as_str())?;
    let settings = LinkSettings::from(&config.redis);
    let primary = RedisLink::connect(&args.primary, settings)?;
    let mut store = WeightStore::new(&primary, &run, WeightSettings::from(&config.weights));
    if args.read != args.primary {
        store = store.with_read_replica(&RedisLink::connect(&args.read, settings)?);
    }
    let mut watcher = store.subscribe(None).await;
    if !watcher.is_subscribed() {
        bail!("follower {}: no pub/sub subscription at {}", args.name, store.read_endpoint());
    }
    let report = |what: String, value: String| {
        let (link, key, name) = (primary.clone(), hash_key(&args.run, &what), args.name.clone());
        async move {
            link.call("hset", Duration::ZERO, |mut c| {
                let (key, name, value) = (&key, &name, &value);
                async move { redis::cmd("HSET").arg(key).arg(name).arg(value).query_async::<()>(&mut c).await }
            })
            .await
        }
    };
    report("ready".into(), now_us().to_string()).await?;
    let mut held = None;
    loop {
        if watcher.next_version(Duration::from_millis(500)).await?.is_some() {
            if let Some(set) = store.fetch_newer_than(held).await? {
                let at_us = now_us();
                held = Some(set.version());
                drop(set);
                let value = format!("{at_us} {}", WEIGHTS_READ_FALLBACKS.get());
                report(format!("held:{}", held.map_or(0, |v| v.0)), value).await?;
            }
        }
        if std::os::unix::process::parent_id() != parent || started.elapsed() > FOLLOWER_LIFETIME {
            return Ok(());
        }
    }
}
