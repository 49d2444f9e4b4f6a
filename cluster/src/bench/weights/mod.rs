//! `reagent bench weights`: weight-sync latency, from the learner's commit to every actor
//! process serving the new version, beside one Redis GET of the same number of bytes from the
//! same server (the issue's goal: ≤ 2× that GET at 100 MB).
//!
//! ```text
//!  leader (this process)                         followers: N × `reagent bench weights-follower`
//!  private redis-server (AOF off)                    PolicyActor + WeightSync under a supervisor,
//!  per size S MB: a model config of ≈ S MB f32       as actors::role wires them; the same model
//!     spawn N followers ──────────────────────────►  config, fresh weights, serving version 0
//!     wait for HLEN bench:ready = N  ◄────────────── HSET bench:ready <name>
//!     per repeat v = 1..=R:
//!       t_commit = wall clock                        every 1 ms: a new swap counted?
//!       WeightStore::publish(v, tensors)  ──────►    WeightWatcher notices v (pub/sub), fetches,
//!       t_published                                  verifies every chunk's sha256, swaps
//!       wait for HLEN bench:swapped:v = N ◄───────── serves v: HSET bench:swapped:v <name> <µs>
//!       latency(v) = max over followers(µs) − t_commit
//!       then, uncontended: fetch(v) alone, import into a model alone (where the time goes)
//!     stop the followers; SET a blob of the same bytes once, GET it R times (median)
//!  report per size: bytes, publish, sync latency (median/min/max), GET, ratio = sync / GET
//! ```
//!
//! All processes share this host's wall clock (`SystemTime`, microseconds), so the follower's
//! timestamps and the leader's commit time compare directly. "Commit" is the call of
//! `publish`: writing the chunks, the manifest, moving `latest` and the pub/sub notification
//! are all inside the latency, as they are for the learner.

mod follower;
mod leader;
mod results;

pub use follower::follower;
use leader::Leader;
use results::*;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use actors::config::DeviceChoice;
use actors::handle::Handle;
use actors::inference::worker::ModelSpec;
use actors::inference::{PolicyActor, PolicyArgs, PolicyMsg};
use actors::stats::Stats;
use actors::supervisor::{Child, ChildSpec, RestartPolicy, Supervised, SupervisorArgs};
use actors::weight_sync::{WeightSync, WeightSyncArgs};
use anyhow::{anyhow, bail, Context, Result};
use policy::weights::OwnedTensor;
use policy::{ByteTokenizer, LoadedModel, ModelConfig, SamplingParams};
use protocol::config::ReagentConfig;
use protocol::keys::Keys;
use protocol::link::{LinkSettings, RedisLink};
use protocol::metrics::ACTOR_WEIGHT_SYNC_SECONDS;
use protocol::redis_server::{RedisServer, RedisServerOptions};
use protocol::weights::{WeightSettings, WeightStore};
use protocol::wire::{PolicyVersion, RunId};
use tch::Device;
use tokio_util::sync::CancellationToken;

use super::report::median;
use crate::cli::{WeightsBenchArgs, WeightsFollowerArgs};
use crate::launch::procs::RoleProcess;

/// Bytes in the sizes' MB.
const MB: f64 = 1e6;
/// The longest any one wait lasts: followers ready, every follower swapped one version.
const WAIT: Duration = Duration::from_secs(120);
/// How often a follower checks its weight-sync actor's swap counter.
const VERSION_POLL: Duration = Duration::from_millis(1);
/// A follower leaves by itself after this long, in case its leader vanished without killing it.
const FOLLOWER_LIFETIME: Duration = Duration::from_secs(3600);

fn now_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
}

/// Runs `reagent bench weights` and prints the report on stdout.
pub async fn bench(config: &ReagentConfig, args: WeightsBenchArgs) -> Result<()> {
    let dir = std::env::temp_dir().join(format!("reagent-bench-weights-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let options = RedisServerOptions { appendonly: false, dir: Some(dir.join("redis")), ..Default::default() };
    let server =
        tokio::task::spawn_blocking(move || RedisServer::start(options)).await.context("starting redis-server")??;
    let config_path = dir.join("config.toml");
    std::fs::write(&config_path, config.to_toml())?;
    let settings = LinkSettings::from(&config.redis);
    let mut leader = Leader {
        link: RedisLink::connect(&server.url(), settings)?,
        url: server.url(),
        settings,
        weights: WeightSettings::from(&config.weights),
        config_path,
        dir: dir.clone(),
        followers: Vec::new(),
    };
    let mut rows = Vec::new();
    let mut outcome = Ok(());
    for &mb in &args.sizes {
        match leader.size(mb, args.followers, args.repeats).await {
            Ok(row) => rows.push(row),
            Err(e) => {
                outcome = Err(e.context(format!("measuring {mb} MB")));
                break;
            }
        }
    }
    leader.stop_followers().await;
    drop(leader);
    drop(server);
    if outcome.is_ok() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    outcome?;

    println!("command: {}", super::command_line());
    let cpu = super::cpu_model().map(|c| format!(" ({c})")).unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    println!("machine: {cores} cores{cpu}");
    println!(
        "setup: private redis-server (append-only file off) over loopback TCP; {} follower processes, each a \
         policy actor + weight-sync actor on the CPU; chunks of {} bytes; {} version(s) per size, medians",
        args.followers, config.weights.chunk_bytes, args.repeats
    );
    println!(
        "sync latency: wall clock from the call of WeightStore::publish to the last follower serving the version; \
         GET: one GET of a blob of the same bytes from the same server (median of {})",
        args.repeats
    );
    println!();
    print!("{}", table(&rows, args.followers));
    println!();
    match rows.iter().find(|r| r.mb == 100) {
        Some(r) if r.ratio() <= 2.0 => println!("goal ≤ 2× GET at 100 MB: met ({:.2}×)", r.ratio()),
        Some(r) => println!("goal ≤ 2× GET at 100 MB: not met ({:.2}×)", r.ratio()),
        None => println!("goal ≤ 2× GET at 100 MB: not measured (no 100 MB size)"),
    }
    Ok(())
}
