//! `reagent bench fanout`: how long until the last of N reader processes holds a new weight
//! version (fetched, every chunk verified), when they read (a) all from the primary Redis,
//! (b) through R replicas of it, followers split evenly, (c) through R replicas in a tree of
//! fan-out k (k = 1: a chain), beside one GET of the same bytes from the primary.
//!
//! ```text
//!  this process: primary redis-server (AOF off); SET/GET a blob of S MB × repeats (the GET)
//!  per layout:  FLUSHALL; replicas started one by one, each REPLICAOF its parent, link up
//!               (replicas: parent = primary; tree: replica i's parent = (i − 1) / k, 0 = primary)
//!               N × `reagent bench fanout-follower --read <its server>` ──► HSET ready
//!               per version v: t0 ─ publish v on the primary ─ wait until every follower
//!                 HSET held:v <µs> ─ latency = max µs − t0
//!               CPU time of the primary, the replicas and the followers over the versions
//!  report: median latency, its ratio to the GET, CPU seconds per version by part
//! ```
//!
//! On a machine with fewer cores than processes the layouts share the same cores: a replica
//! spends CPU receiving and re-sending the bytes that the primary no longer sends. The report
//! gives each part's CPU seconds per version and their sum over the cores (the least wall time
//! that much work can take here), so a layout's latency can be read against the work it did.

mod follower;
mod report;

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use protocol::config::ReagentConfig;
use protocol::link::{LinkSettings, RedisLink};
use protocol::redis_replica::{link_up, replicate};
use protocol::redis_server::{RedisServer, RedisServerOptions};
use protocol::weights::{NamedTensor, WeightSettings, WeightStore};
use protocol::wire::{DType, PolicyVersion, RunId};

use super::scale::process_ticks;
use cluster::launch::procs::RoleProcess;

pub use follower::follower;
use report::{load_average, report};

/// The longest one wait lasts (a replica's sync, followers ready, a version everywhere).
const WAIT: Duration = Duration::from_secs(180);
/// A follower leaves by itself after this long, in case the bench vanished without killing it.
const FOLLOWER_LIFETIME: Duration = Duration::from_secs(3600);
/// /proc's clock ticks per second (USER_HZ, 100 on Linux).
const USER_HZ: f64 = 100.0;

/// Options of `reagent bench fanout`.
#[derive(Debug, Clone, clap::Args)]
pub struct FanoutBenchArgs {
    /// Follower (reader) processes in every layout.
    #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub followers: u16,
    /// Replicas in layouts (b) and (c).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=16))]
    pub replicas: u16,
    /// Layout (c)'s fan-out: each server feeds at most this many replicas (1: a chain).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=16))]
    pub tree_k: u16,
    /// The version's size in MB (10^6 bytes of f32 weights).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=2000))]
    pub mb: u32,
    /// Versions published per layout, and GETs timed; medians are reported.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..=50))]
    pub repeats: u16,
}

/// Options of the hidden `reagent bench fanout-follower`.
#[derive(Debug, Clone, clap::Args)]
pub struct FanoutFollowerArgs {
    /// The primary (writes go there; reads fall back to it).
    #[arg(long, value_name = "URL")]
    pub primary: String,
    /// The server this follower reads from.
    #[arg(long, value_name = "URL")]
    pub read: String,
    /// The run id the versions are published under.
    #[arg(long, value_name = "ID")]
    pub run: String,
    /// This follower's name in the reports.
    #[arg(long, value_name = "NAME")]
    pub name: String,
}

fn now_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
}

/// The hash on the primary where followers report `what` (`ready`, `held:<v>`).
fn hash_key(run: &str, what: &str) -> String {
    format!("fanout:{run}:{what}")
}

/// One layout: the parent of each replica (0: the primary; i: replica i).
struct Layout {
    name: String,
    parents: Vec<usize>,
}

fn layouts(args: &FanoutBenchArgs) -> Vec<Layout> {
    let (r, k) = (usize::from(args.replicas), usize::from(args.tree_k));
    let shape = if k == 1 { "a chain".to_string() } else { format!("a tree, fan-out {k}") };
    vec![
        Layout { name: "(a) all from the primary".into(), parents: vec![] },
        Layout { name: format!("(b) {r} replicas of the primary"), parents: vec![0; r] },
        Layout { name: format!("(c) {r} replicas in {shape}"), parents: (1..=r).map(|i| (i - 1) / k).collect() },
    ]
}

/// One layout's results.
pub(super) struct Measured {
    pub(super) layout: String,
    /// Publish → last follower holds it, per version.
    pub(super) latencies: Vec<Duration>,
    /// The publish call alone, per version.
    pub(super) publishes: Vec<Duration>,
    /// CPU seconds per version: the primary, the replicas, the followers.
    pub(super) cpu: [f64; 3],
}

/// What every layout shares.
struct Bench {
    primary: RedisServer,
    link: RedisLink,
    settings: LinkSettings,
    config_path: PathBuf,
    dir: PathBuf,
    args: FanoutBenchArgs,
}

/// Runs `reagent bench fanout` and prints the report on stdout.
pub async fn bench(config: &ReagentConfig, args: FanoutBenchArgs) -> Result<()> {
    let dir = std::env::temp_dir().join(format!("reagent-bench-fanout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let primary = start_server(dir.join("primary"))?;
    let config_path = dir.join("config.toml");
    std::fs::write(&config_path, config.to_toml())?;
    let settings = LinkSettings::from(&config.redis);
    let link = RedisLink::connect(&primary.url(), settings)?;
    let bench = Bench { primary, link, settings, config_path, dir: dir.clone(), args: args.clone() };
    let load_before = load_average();
    let bytes = weights_bytes(args.mb);
    let gets = bench.gets(&bytes).await?;
    let mut rows = Vec::new();
    for layout in layouts(&args) {
        let row = bench.measure(&layout, &bytes, WeightSettings::from(&config.weights)).await;
        rows.push(row.with_context(|| format!("measuring layout {}; logs in {}", layout.name, dir.display()))?);
    }
    let load_after = load_average();
    drop(bench);
    let _ = std::fs::remove_dir_all(&dir);
    report(&args, &rows, &gets, [load_before, load_after]);
    Ok(())
}

fn start_server(dir: PathBuf) -> Result<RedisServer> {
    let options = RedisServerOptions { appendonly: false, dir: Some(dir), ..Default::default() };
    crate::private_redis(options).context("starting redis-server")
}

/// `mb` MB of random bytes (incompressible, like trained weights), a whole number of f32s.
fn weights_bytes(mb: u32) -> Vec<u8> {
    let len = (u64::from(mb) * 1_000_000 / 8) as usize;
    (0..len).flat_map(|_| rand::random::<u64>().to_le_bytes()).collect()
}

impl Bench {
    /// `repeats` GETs of a blob of the same bytes from the primary, alone.
    async fn gets(&self, bytes: &[u8]) -> Result<Vec<Duration>> {
        let key = "fanout:blob";
        self.link
            .call("set blob", Duration::from_secs(60), |mut c| async move {
                redis::cmd("SET").arg(key).arg(bytes).query_async::<()>(&mut c).await
            })
            .await?;
        let mut gets = Vec::new();
        for _ in 0..self.args.repeats {
            let started = Instant::now();
            let got: Vec<u8> = self
                .link
                .call("get blob", Duration::from_secs(60), |mut c| async move {
                    redis::cmd("GET").arg(key).query_async(&mut c).await
                })
                .await?;
            gets.push(started.elapsed());
            if got.len() != bytes.len() {
                bail!("GET returned {} bytes, not {}", got.len(), bytes.len());
            }
        }
        Ok(gets)
    }

    /// One layout: replicas up, followers ready, `repeats` versions timed.
    async fn measure(&self, layout: &Layout, bytes: &[u8], weights: WeightSettings) -> Result<Measured> {
        crate::queue::flushall(&self.link).await?;
        let replicas = self.replicas(layout).await?;
        let run = format!("fanout-{}", layout.name.get(1..2).unwrap_or("x"));
        let mut followers = self.spawn_followers(&run, &replicas)?;
        self.wait_all(&hash_key(&run, "ready"), &mut followers).await?;

        let store = WeightStore::new(&self.link, &RunId::new(run.as_str())?, weights);
        let mut data = bytes.to_vec();
        let pids = |f: &[RoleProcess]| -> Vec<u32> { f.iter().filter_map(RoleProcess::pid).collect() };
        let (follower_pids, replica_pids): (Vec<u32>, Vec<u32>) =
            (pids(&followers), replicas.iter().filter_map(RedisServer::pid).collect());
        let groups = [self.primary.pid().into_iter().collect::<Vec<_>>(), replica_pids, follower_pids];
        let before = groups.clone().map(|g| g.iter().map(|&p| process_ticks(p)).sum::<u64>());
        let (mut latencies, mut publishes) = (Vec::new(), Vec::new());
        for v in 1..=u64::from(self.args.repeats) {
            data[..8].copy_from_slice(&v.to_le_bytes());
            let tensor = NamedTensor { name: "w", shape: &[data.len() as i64 / 4], dtype: DType::F32, data: &data };
            let t0 = now_us();
            store.publish(PolicyVersion(v), &[tensor]).await?;
            publishes.push(Duration::from_micros(now_us().saturating_sub(t0)));
            let held = self.wait_all(&hash_key(&run, &format!("held:{v}")), &mut followers).await?;
            let last = last_held(&held, !replicas.is_empty())?;
            latencies.push(Duration::from_micros(last.saturating_sub(t0)));
        }
        let cpu = std::array::from_fn(|i| {
            let after: u64 = groups[i].iter().map(|&p| process_ticks(p)).sum();
            after.saturating_sub(before[i]) as f64 / USER_HZ / f64::from(self.args.repeats)
        });
        for f in &followers {
            f.terminate();
        }
        for f in &mut followers {
            f.stop(Duration::from_secs(5)).await;
        }
        Ok(Measured { layout: layout.name.clone(), latencies, publishes, cpu })
    }

    /// The followers, split evenly over the replicas (all on the primary without any).
    fn spawn_followers(&self, run: &str, replicas: &[RedisServer]) -> Result<Vec<RoleProcess>> {
        let primary = self.primary.url();
        (0..usize::from(self.args.followers))
            .map(|i| {
                let read = replicas.get(i % replicas.len().max(1)).map_or_else(|| primary.clone(), RedisServer::url);
                let name = format!("f{}", i + 1);
                let args =
                    ["bench", "fanout-follower", "--primary", &primary, "--read", &read, "--run", run, "--name", &name];
                RoleProcess::spawn(&format!("{run}-{name}"), &args, &self.config_path, &self.dir, &[])
            })
            .collect()
    }

    /// The layout's replicas, started in order (a parent before its children), each synced.
    async fn replicas(&self, layout: &Layout) -> Result<Vec<RedisServer>> {
        let mut servers: Vec<RedisServer> = Vec::new();
        for (i, &parent) in layout.parents.iter().enumerate() {
            let server = start_server(self.dir.join(format!("replica-{}", i + 1)))?;
            let port = if parent == 0 { self.primary.port() } else { servers[parent - 1].port() };
            let link = RedisLink::connect(&server.url(), self.settings)?;
            replicate(&link, "127.0.0.1", port, None).await?;
            let started = Instant::now();
            while !link_up(&link).await? {
                if started.elapsed() > WAIT {
                    bail!("replica {} did not sync with port {port} within {WAIT:?}", i + 1);
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            servers.push(server);
        }
        Ok(servers)
    }

    /// Waits until the hash `key` holds an entry from every follower; its entries.
    async fn wait_all(&self, key: &str, followers: &mut [RoleProcess]) -> Result<Vec<(String, String)>> {
        let started = Instant::now();
        loop {
            let entries: Vec<(String, String)> = self
                .link
                .call("hgetall", Duration::ZERO, |mut c| async move {
                    redis::cmd("HGETALL").arg(key).query_async(&mut c).await
                })
                .await?;
            if entries.len() >= followers.len() {
                return Ok(entries);
            }
            for f in followers.iter_mut() {
                if let Some(exit) = f.exited() {
                    exit?;
                    bail!("follower {} exited; see {}", f.name, f.log.display());
                }
            }
            if started.elapsed() > WAIT {
                bail!("{key}: {} of {} followers within {WAIT:?}", entries.len(), followers.len());
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
}

/// The latest time a follower reported holding the version; an error if a follower that should
/// read from a replica fell back to the primary (the layout would not be what was measured).
fn last_held(held: &[(String, String)], through_replicas: bool) -> Result<u64> {
    let mut last = 0;
    for (name, value) in held {
        let mut parts = value.split_whitespace().map(str::parse::<u64>);
        let (Some(Ok(at)), Some(Ok(fallbacks))) = (parts.next(), parts.next()) else {
            bail!("follower {name} reported {value:?}");
        };
        if fallbacks > 0 && through_replicas {
            bail!("follower {name} fell back to the primary {fallbacks} time(s): the layout was not measured");
        }
        last = last.max(at);
    }
    Ok(last)
}
