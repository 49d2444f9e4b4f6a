//! The kill soak (issue 13): a learner, an RRM worker and two actors as `reagent` processes on
//! one redis-server (append-only file, `appendfsync always`), while every few seconds a random
//! one of them — or the Redis server — is SIGKILLed and started again (Redis on its port and
//! directory, from its append-only file). After every restart, training must advance (the
//! learner applies updates it had not applied when the victim died); at the end, after a
//! graceful drain, every published trajectory was forwarded once and trained exactly once, and
//! nothing was dead-lettered (restarts are not failed deliveries).
//!
//! ```text
//!  learner · rrm · actor-1 · actor-2 up ─► first update
//!  until the soak's time is up, in rounds that each kill every role and Redis once, in a
//!  random order:  SIGKILL the victim ─ start it again ─ wait: 2 more updates ─ a random
//!                 1–3 s of quiet (the next fault's timing)
//!  actors leave ─► rrm drains ─► learner trains the rest ─► rrm, learner leave (SIGTERM)
//! ```
//!
//! The suite's run lasts [`DEFAULT_SOAK`] of faults, at least one full round (the whole test
//! well under a minute); a long
//! soak is the same test with `REAGENT_SOAK_SECONDS` set, e.g.
//! `REAGENT_SOAK_SECONDS=600 cargo nextest run -p reagent --test suite -E 'test(/^e2e_soak::/)' --no-capture`.
//! `REAGENT_SOAK_SEED` repeats a run's sequence of victims (the seed is printed).
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use std::time::{Duration, Instant};

use crate::common::sft::sft_model;
use crate::common::*;
use learner::rng::SampleRng;
use protocol::redis_server::{RedisServer, RedisServerOptions};

/// How long faults are injected in the suite's run.
const DEFAULT_SOAK: Duration = Duration::from_secs(20);

/// One group per update, so updates come quickly; a checkpoint after each, so that an empty
/// scored stream means everything was trained and is durable (a learner killed between an
/// update and its checkpoint still dies holding applied, unacknowledged entries).
const EXTRA: &str = "[learner]\ncheckpoint_every = 1\n[learner.service]\ngroups_per_update = 1\nmax_wait_ms = 2000\n";

/// A role process: its name, its `reagent` arguments, and one environment variable it starts with.
type Role = (&'static str, &'static [&'static str], Option<(&'static str, &'static str)>);

/// The role processes.
const ROLES: [Role; 4] = [
    ("learner", &["learner"], None),
    ("rrm", &["rrm"], Some(("REAGENT__RRM__CONSUMER", "rrm-1"))),
    ("actor-1", &["actor"], Some(("REAGENT__ACTOR__ID", "actor-1"))),
    ("actor-2", &["actor"], Some(("REAGENT__ACTOR__ID", "actor-2"))),
];

fn start(procs: &mut Procs, which: usize) {
    let (name, args, env) = ROLES[which];
    let env: Vec<(&str, String)> = env.map(|(k, v)| (k, v.to_string())).into_iter().collect();
    procs.start(name, args, &env);
}

/// `0..n` in a random order: each round of faults kills every role and Redis once.
fn shuffled(rng: &mut SampleRng, n: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        v.swap(i, rng.below(i + 1));
    }
    v
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn training_survives_random_kills_of_every_role_and_of_redis() {
    let soak = Duration::from_secs(env_or("REAGENT_SOAK_SECONDS", DEFAULT_SOAK.as_secs()));
    let seed = env_or("REAGENT_SOAK_SEED", std::process::id() as u64);
    let mut rng = SampleRng::new(seed);
    let model = tokio::task::spawn_blocking(sft_model).await.unwrap().display().to_string();
    let started = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    let mut redis = RedisServer::start(RedisServerOptions::default()).expect("redis-server starts (run `make setup`)");
    let job = Job::new(tmp.path(), &redis.url(), "soak", "score", &model, EXTRA);
    let mut procs = job.procs();
    start(&mut procs, 0);
    procs.wait_until("version 0 published", PATIENCE, || async { job.latest_version().await.is_some() }).await;
    (1..ROLES.len()).for_each(|i| start(&mut procs, i));
    procs.wait_until("the first update", PATIENCE, || async { !job.records().is_empty() }).await;

    let mut kills: Vec<&str> = Vec::new();
    let mut round: Vec<usize> = Vec::new();
    let soak_started = Instant::now();
    while soak_started.elapsed() < soak || kills.len() <= ROLES.len() {
        if round.is_empty() {
            round = shuffled(&mut rng, ROLES.len() + 1);
        }
        let victim = round.pop().unwrap_or_default();
        let updates = job.records().len();
        if victim == ROLES.len() {
            redis.kill();
            // The outage is the fault injected, not a wait for a condition.
            tokio::time::sleep(Duration::from_millis(200 + rng.below(1500) as u64)).await;
            redis.restart().expect("redis-server restarts on its port and directory");
            kills.push("redis");
        } else {
            procs.kill(ROLES[victim].0);
            start(&mut procs, victim);
            kills.push(ROLES[victim].0);
        }
        let what = format!("two updates after kill {} ({})", kills.len(), kills.last().copied().unwrap_or_default());
        procs.wait_until(&what, PATIENCE, || async { job.records().len() >= updates + 2 }).await;
        eprintln!(
            "kill {:>2} {:<8} at {updates:>3} updates: training went on ({:.0?})",
            kills.len(),
            kills.last().copied().unwrap_or_default(),
            started.elapsed()
        );
        // Quiet before the next fault: its timing is part of what is injected.
        tokio::time::sleep(Duration::from_millis(1000 + rng.below(2000) as u64)).await;
    }

    // A graceful end; then count by id.
    procs.stop_all(&["actor-1", "actor-2"], LEAVE).await;
    procs
        .wait_until("the RRM worker drained rollouts", PATIENCE, || async {
            job.depth(&job.keys.rollouts()).await == 0
        })
        .await;
    procs
        .wait_until("the learner trained and checkpointed every scored trajectory", PATIENCE, || async {
            job.depth(&job.keys.scored()).await == 0
        })
        .await;
    procs.stop("rrm", LEAVE).await;
    procs.stop("learner", LEAVE).await;
    let ledger = assert_each_trajectory_applied_once(&job).await;
    eprintln!(
        "soak seed {seed}: {} kills ({kills:?}) in {soak:?}; {} trajectories, {} durable updates, each applied \
         once; {:.0?} in all",
        kills.len(),
        ledger.trajectories,
        ledger.updates,
        started.elapsed()
    );
}
