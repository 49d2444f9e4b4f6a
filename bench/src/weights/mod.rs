//! `reagent bench weights`: weight-sync latency, from the learner's commit to every actor
//! process serving the new version, beside one Redis GET of the same number of bytes from the
//! same server, for each size and each number of followers (`--followers 1,4`). The goal at
//! 100 MB: one follower ≤ 2× that GET; N followers ≤ 2× plus the fair share of the machine that
//! the N − 1 further copies of the bytes take ([`results::bound_in_gets`]).
//!
//! ```text
//!  leader (this process)                         followers: N × `reagent bench weights-follower`
//!  private redis-server (AOF off)                    PolicyActor + WeightSync under a supervisor,
//!  per size S MB and follower count N: a model config of ≈ S MB f32 (published as weights.dtype)       as actors::role wires them; the same model
//!     spawn N followers ──────────────────────────►  config, fresh weights, serving version 0
//!     wait for HLEN bench:ready = N  ◄────────────── HSET bench:ready <name>
//!     per repeat v = 1..=R:
//!       t_commit = wall clock                        every 1 ms: a new swap counted?
//!       WeightStore::publish(v, tensors)  ──────►    WeightWatcher notices v (pub/sub), fetches,
//!       t_published                                  verifies every chunk's hash, swaps  
//!       wait for HLEN bench:swapped:v = N ◄───────── serves v: HSET bench:swapped:v <name> <µs>
//!       latency(v) = max over followers(µs) − t_commit
//!       then, uncontended: fetch(v) alone, import into a model alone (where the time goes)
//!     stop the followers; SET a blob of the same bytes once, GET it R times (median), with the
//!       CPU time the server and this process spent on the GETs
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
use policy::device::precision_kind;
use policy::weights::OwnedTensor;
use policy::{ByteTokenizer, LoadedModel, ModelConfig, SamplingParams};
use protocol::config::{Precision, ReagentConfig};
use protocol::keys::Keys;
use protocol::link::{LinkSettings, RedisLink};
use protocol::metrics::ACTOR_WEIGHT_SYNC_SECONDS;
use protocol::redis_server::{RedisServer, RedisServerOptions};
use protocol::weights::{WeightSettings, WeightStore};
use protocol::wire::{PolicyVersion, RunId};
use tch::Device;
use tokio_util::sync::CancellationToken;

use super::report::median;
use clap::Args;
use cluster::launch::procs::RoleProcess;

/// Options of `reagent bench weights`.
#[derive(Debug, Clone, Args)]
pub struct WeightsBenchArgs {
    /// Policy sizes in MB (10^6 bytes of f32 weights), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,10,100", value_name = "MB,…", value_parser = clap::value_parser!(u32).range(1..=4000))]
    pub sizes: Vec<u32>,

    /// Follower (actor) processes that must all swap each version; several counts
    /// (comma-separated) are measured one after the other in the same run.
    #[arg(long, value_delimiter = ',', default_value = "1,4", value_name = "N,…", value_parser = clap::value_parser!(u16).range(1..=64))]
    pub followers: Vec<u16>,

    /// Versions published per size (and GETs timed); the median is reported.
    #[arg(long, default_value_t = 3, value_name = "R", value_parser = clap::value_parser!(u16).range(1..=100))]
    pub repeats: u16,
}

/// Options of the hidden `reagent bench weights-follower`.
#[derive(Debug, Clone, Args)]
pub struct WeightsFollowerArgs {
    /// The bench's Redis.
    #[arg(long, value_name = "URL")]
    pub redis: String,

    /// The run id the weights are published under.
    #[arg(long, value_name = "ID")]
    pub run: String,

    /// This follower's name in the reports.
    #[arg(long, value_name = "NAME")]
    pub name: String,

    /// The policy size in MB.
    #[arg(long, value_name = "MB")]
    pub mb: u32,
}

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

/// Connections each fetch reads chunks over (the store's default; not a config key).
fn leader_fetch_connections(config: &ReagentConfig) -> usize {
    WeightSettings::from(&config.weights).fetch_connections
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
        redis_pid: server.pid(),
        config_path,
        dir: dir.clone(),
        followers: Vec::new(),
    };
    let mut rows = Vec::new();
    let mut outcome = Ok(());
    'sizes: for &mb in &args.sizes {
        for &n in &args.followers {
            match leader.size(mb, n, args.repeats).await {
                Ok(row) => rows.push(row),
                Err(e) => {
                    outcome = Err(e.context(format!("measuring {mb} MB with {n} followers")));
                    break 'sizes;
                }
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
    let followers: Vec<String> = args.followers.iter().map(u16::to_string).collect();
    println!(
        "setup: private redis-server (append-only file off) over loopback TCP; {} follower processes, each a \
         policy actor + weight-sync actor on the CPU; weights.dtype {:?} (published as it resolves on the CPU); \
         chunks of {} bytes, read over {} connections per fetch; {} version(s) per size, medians",
        followers.join(" then "),
        config.weights.dtype,
        config.weights.chunk_bytes,
        leader_fetch_connections(config),
        args.repeats
    );
    println!(
        "sync latency: wall clock from the call of WeightStore::publish to the last follower serving the version; \
         GET: one GET of a blob of the same bytes from the same server (median of {})",
        args.repeats
    );
    println!(
        "goal (GETs): 2 for one follower; each further follower adds its copy's CPU time (GET CPU: the server's \
         and the client's CPU per GET) shared over the {cores} cores: 2 + (followers − 1) × GET CPU / {cores} / GET"
    );
    println!();
    print!("{}", table(&rows, cores));
    println!();
    if !rows.iter().any(|r| r.mb == 100) {
        println!("goal at 100 MB: not measured (no 100 MB size)");
    }
    for r in rows.iter().filter(|r| r.mb == 100) {
        let met = if r.ratio() <= r.bound(cores) { "met" } else { "not met" };
        println!(
            "goal at 100 MB with {} follower(s) ≤ {:.2}× GET: {met} ({:.2}×)",
            r.followers,
            r.bound(cores),
            r.ratio()
        );
    }
    Ok(())
}
