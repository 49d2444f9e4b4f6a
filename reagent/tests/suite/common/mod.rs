//! Shared pieces of the end-to-end tests: a job (its TOML file, run directory and Redis names)
//! whose roles run as separate `reagent` processes ([`procs`]), the cold-started model they
//! start from ([`sft`]), and readers of what the run leaves in Redis and on disk.

#![allow(dead_code, reason = "each test crate uses a different part of the shared helpers")]

pub mod learning;
pub mod procs;
pub mod sft;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use episode::{evaluate_greedy, evaluate_sampled, held_out_specs, PolicyRef, RolloutConfig};
use learner::checkpoint::{resolve_resume, CheckpointData, ResumeMode};
use learner::service::record::UpdateRecord;
use policy::ByteTokenizer;
use protocol::codec::Codec;
use protocol::keys::Keys;
use protocol::link::{LinkSettings, RedisLink};
use protocol::queue::{read_all, stream_depth};
use protocol::weights::{WeightSet, WeightSettings, WeightStore};
use protocol::wire::{RunId, ScoredTrajectory, TaskFamily, Trajectory, TrajectoryId};

pub use procs::Procs;

/// How long any one condition may take on two shared, loaded cores.
pub const PATIENCE: Duration = Duration::from_secs(240);

/// How long a role gets to leave after SIGTERM.
pub const LEAVE: Duration = Duration::from_secs(90);

/// The settings every test job shares: small groups and batches, short waits, a quick
/// reclaim of a dead consumer's entries, no trimming (so the streams can be read back whole),
/// no staleness drops (so every trajectory is trained, not only consumed), and a high-water mark
/// that keeps actors from running far ahead of the learner (a backlog of at most 32 undelivered
/// entries per stream: one update of e2e_train, four of the others). Actors' supervisors tolerate more
/// restarts than the default (5 within a minute, backoff from 100 ms): a slot restarts once per
/// failed connection while its env-worker is down, and a replacement env-worker can take more
/// than the default's three seconds to start on two loaded cores.
const BASE: &str = r#"
[redis]
retry_for_ms = 30000
[queue]
block_ms = 200
claim_idle_ms = 5000
trim_every = 1000000000
high_water_mark = 32
[weights]
poll_interval_ms = 200
[metrics]
listen = "127.0.0.1:0"
[learner]
checkpoint_every = 2
keep_checkpoints = 2
max_staleness = 1000000
[learner.service]
group_size = 4
groups_per_update = 2
max_wait_ms = 3000
[actor]
slots = 1
group_size = 4
device = "cpu"
system_prompt = "omit"
max_new_tokens = 48
critique_wait_ms = 5000
grace_s = 60
restart_max = 30
restart_backoff_min_ms = 50
restart_backoff_max_ms = 1000
[rrm]
batch_size = 8
"#;

/// Merges `over` into `base`, tables key by key.
fn merge(base: &mut toml::Table, over: toml::Table) {
    for (k, v) in over {
        match (base.get_mut(&k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge(b, o),
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
}

/// A free local TCP address (for an env-worker that must come back on the same one).
pub fn free_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

/// One run of a test job: its config file, run directory and Redis names.
pub struct Job {
    /// The run id.
    pub run: RunId,
    /// Its key names.
    pub keys: Keys,
    /// A link to the job's Redis, for the test's own reads.
    pub link: RedisLink,
    /// The job file every role reads.
    pub config: PathBuf,
    /// `<run.dir>/<run.id>`: metrics.jsonl, checkpoints.
    pub run_dir: PathBuf,
    /// The starting model (learner.model = actor.model).
    pub model: String,
}

impl Job {
    /// Writes `<root>/<run>.toml`: [`BASE`], then the run's id, directory, Redis, feedback
    /// mode and model, then `extra` (TOML) over all of it.
    pub fn new(root: &Path, redis_url: &str, run: &str, feedback: &str, model: &str, extra: &str) -> Self {
        let mut table: toml::Table = toml::from_str(BASE).unwrap();
        let runs = root.join("runs");
        let job = format!(
            "[run]\nid = {run:?}\ndir = {dir:?}\nfeedback = {feedback:?}\n[redis]\nurl = {redis_url:?}\n\
             [learner]\nmodel = {model:?}\n[actor]\nmodel = {model:?}\n",
            dir = runs.display().to_string(),
        );
        merge(&mut table, toml::from_str(&job).unwrap());
        merge(&mut table, toml::from_str(extra).expect("the test's extra settings are TOML"));
        let config = root.join(format!("{run}.toml"));
        let text = toml::to_string(&table).unwrap();
        protocol::config::ReagentConfig::from_toml_str(&text).expect("the test job is valid");
        std::fs::write(&config, text).unwrap();
        let settings = LinkSettings { retry_for: Duration::from_secs(30), ..LinkSettings::default() };
        let run_id = RunId::new(run).unwrap();
        Self {
            keys: Keys::new(&run_id),
            run: run_id,
            link: RedisLink::connect(redis_url, settings).unwrap(),
            config,
            run_dir: runs.join(run),
            model: model.to_string(),
        }
    }

    /// Role processes reading this job's file, logging under `<root>/logs-<run>`.
    pub fn procs(&self) -> Procs {
        let logs = self.config.with_file_name(format!("logs-{}", self.run));
        Procs::new(&self.config, &logs)
    }

    /// The weight store of the run.
    pub fn store(&self) -> WeightStore {
        WeightStore::new(&self.link, &self.run, WeightSettings::default())
    }

    /// The newest published policy version (None before the learner's first publish).
    pub async fn latest_version(&self) -> Option<u64> {
        self.store().latest_version().await.unwrap().map(|v| v.0)
    }

    /// The learner's update records so far (metrics.jsonl; a line being written is skipped).
    pub fn records(&self) -> Vec<UpdateRecord> {
        let text = std::fs::read_to_string(self.run_dir.join("metrics.jsonl")).unwrap_or_default();
        text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
    }

    async fn payloads(&self, stream: &str) -> Vec<Vec<u8>> {
        let entries = read_all(&self.link, stream).await.unwrap();
        entries.into_iter().map(|e| e.payload.unwrap_or_default()).collect()
    }

    /// Every entry of the rollouts stream, decoded and validated, in stream order.
    pub async fn rollouts(&self) -> Vec<Trajectory> {
        let codec = Codec::default();
        let raw = self.payloads(&self.keys.rollouts()).await;
        raw.iter().map(|p| codec.decode_valid(p).expect("a valid trajectory on the rollouts stream")).collect()
    }

    /// Every entry of the scored stream, decoded and validated, in stream order.
    pub async fn scored(&self) -> Vec<ScoredTrajectory> {
        let codec = Codec::default();
        let raw = self.payloads(&self.keys.scored()).await;
        raw.iter().map(|p| codec.decode_valid(p).expect("a valid scored trajectory")).collect()
    }

    /// Unconsumed entries of a stream (undelivered or unacknowledged, the most over its groups).
    pub async fn depth(&self, stream: &str) -> u64 {
        stream_depth(&self.link, stream).await.unwrap()
    }

    /// Entries of `stream` delivered to `consumer` of `group` and not acknowledged.
    pub async fn pending_of(&self, stream: &str, group: &str, consumer: &str) -> usize {
        let (key, group, consumer) = (stream.to_string(), group.to_string(), consumer.to_string());
        let rows: Vec<redis::Value> = self
            .link
            .call("xpending", Duration::ZERO, |mut c| {
                let (key, group, consumer) = (key.clone(), group.clone(), consumer.clone());
                async move {
                    redis::cmd("XPENDING")
                        .arg(&key)
                        .arg(&group)
                        .arg("-")
                        .arg("+")
                        .arg(100_000)
                        .arg(&consumer)
                        .query_async(&mut c)
                        .await
                }
            })
            .await
            .unwrap();
        rows.len()
    }

    /// Entries on the dead-letter streams of rollouts and scored.
    pub async fn dead_letters(&self) -> u64 {
        let mut n = 0;
        for stream in [self.keys.rollouts(), self.keys.scored()] {
            let key = Keys::dead_letter(&stream);
            n += self
                .link
                .call("xlen", Duration::ZERO, |mut c| {
                    let key = key.clone();
                    async move { redis::cmd("XLEN").arg(&key).query_async::<u64>(&mut c).await }
                })
                .await
                .unwrap();
        }
        n
    }

    /// The learner's newest intact checkpoint.
    pub fn final_checkpoint(&self) -> CheckpointData {
        let dir = self.run_dir.join("checkpoints");
        resolve_resume(&dir, &ResumeMode::Auto)
            .unwrap()
            .unwrap_or_else(|| panic!("no checkpoint in {}", dir.display()))
            .data
    }

    /// Success rate on `n` held-out difficulty-1 math tasks, each played `samples` times at
    /// `temperature` (0: greedy), of the starting model or of `weights` loaded into its
    /// architecture.
    pub fn success_rate(&self, weights: Option<&WeightSet>, n: usize, samples: usize, temperature: f64) -> f64 {
        let mut model = learner::role::load_model(&self.model, 0).unwrap();
        if let Some(set) = weights {
            policy::weights::import_weight_set(&mut model.vs, set).unwrap();
        }
        let specs = held_out_specs(TaskFamily::Math, 1, n);
        let rollout = RolloutConfig { temperature, ..learner::sft::compact_rollout() };
        let policy = PolicyRef { model: &model.model, tokenizer: &ByteTokenizer };
        let report = if temperature == 0.0 {
            evaluate_greedy(policy, &specs, &rollout)
        } else {
            evaluate_sampled(policy, &specs, samples, &rollout, 7)
        };
        report.unwrap().success_rate
    }
}

/// How many times each id occurs.
pub fn counts<'a>(ids: impl IntoIterator<Item = &'a TrajectoryId>) -> HashMap<TrajectoryId, usize> {
    let mut out = HashMap::new();
    for id in ids {
        *out.entry(*id).or_default() += 1;
    }
    out
}

/// A graceful end of a job: `actors` leave (SIGTERM), the RRM workers drain the rollouts
/// stream, the learner trains every scored trajectory, then `rest` leave and the learner last.
pub async fn end_gracefully(procs: &mut Procs, job: &Job, actors: &[&str], rest: &[&str]) {
    procs.stop_all(actors, LEAVE).await;
    procs
        .wait_until("the RRM workers drained rollouts", PATIENCE, || async {
            job.depth(&job.keys.rollouts()).await == 0
        })
        .await;
    let scored = counts(job.scored().await.iter().map(|s| &s.trajectory.id)).len();
    procs
        .wait_until("the learner trained every scored trajectory", PATIENCE, || async {
            job.records().iter().map(|r| r.trajectories).sum::<usize>() >= scored
        })
        .await;
    procs.stop_all(rest, LEAVE).await;
    procs.stop("learner", LEAVE).await;
}

/// What [`assert_each_trajectory_applied_once`] counted.
#[derive(Debug)]
pub struct Ledger {
    /// Distinct trajectories published.
    pub trajectories: usize,
    /// Updates in the durable history.
    pub updates: u64,
}

/// After every role has left gracefully: every trajectory an actor published reached the
/// scored stream exactly as often as it was published (each entry judged and forwarded once),
/// the learner's durable history trained each id exactly once and nothing else, no entry is
/// left unconsumed or dead-lettered.
pub async fn assert_each_trajectory_applied_once(job: &Job) -> Ledger {
    let rollouts = job.rollouts().await;
    let scored = job.scored().await;
    let published = counts(rollouts.iter().map(|t| &t.id));
    let forwarded = counts(scored.iter().map(|s| &s.trajectory.id));
    assert!(!published.is_empty(), "nothing was published");
    assert_eq!(forwarded, published, "every rollouts entry is forwarded to scored exactly once");
    let by_id: HashMap<TrajectoryId, &Trajectory> = rollouts.iter().map(|t| (t.id, t)).collect();
    for s in &scored {
        assert_eq!(&s.trajectory, by_id[&s.trajectory.id], "the scored entry carries the trajectory unchanged");
    }

    let data = job.final_checkpoint();
    let history = &data.consumption.history;
    let trained = counts(history.iter().flat_map(|r| &r.trained));
    let dropped: Vec<_> = history.iter().flat_map(|r| &r.dropped).collect();
    assert!(dropped.is_empty(), "nothing is stale with max_staleness this high: {} dropped", dropped.len());
    let twice: Vec<_> = trained.iter().filter(|(_, &n)| n > 1).collect();
    assert!(twice.is_empty(), "trained more than once: {twice:?}");
    let missing: Vec<_> = published.keys().filter(|id| !trained.contains_key(id)).collect();
    assert!(missing.is_empty(), "{} published trajectories never trained, e.g. {:?}", missing.len(), missing.first());
    assert_eq!(trained.len(), published.len(), "the learner trained only published trajectories");
    assert_eq!(
        history.iter().map(|r| r.step).collect::<Vec<_>>(),
        (1..=data.step).collect::<Vec<_>>(),
        "one history record per update"
    );

    assert_eq!(job.depth(&job.keys.rollouts()).await, 0, "rollouts left unconsumed");
    assert_eq!(job.depth(&job.keys.scored()).await, 0, "scored entries left unconsumed or unacknowledged");
    assert_eq!(job.dead_letters().await, 0, "nothing is dead-lettered");
    Ledger { trajectories: published.len(), updates: data.step }
}
