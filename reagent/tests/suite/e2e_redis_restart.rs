//! Every role process rides out a Redis restart: a learner, an RRM worker and an actor, each a
//! `reagent` process (`score` mode), against a redis-server with its append-only file on
//! (`appendfsync always`: an acknowledged write is on disk), which crashes mid-run (SIGKILL)
//! and comes back on the same port and directory after an outage. The library's reconnects
//! are tested in `protocol`; this is the roles' loops around them (the actor's publisher and
//! weight watcher, the RRM worker's and the learner's consumers, the learner's publishes).
//!
//! ```text
//!  learner · rrm · actor up ── 2 updates ──► SIGKILL redis ── down OUTAGE ──► redis again (AOF)
//!      no role exits; the actor generates with a version published after the restart, the
//!      RRM worker forwards it, the learner trains 2 more updates
//!  ── actor leaves, rrm drains, learner trains the rest, rrm and learner leave (SIGTERM)
//!  then: every published id forwarded once and trained exactly once; nothing left, nothing
//!        dead-lettered (a restart is not a failed delivery)
//! ```
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use std::time::{Duration, Instant};

use crate::common::sft::sft_model;
use crate::common::*;
use protocol::redis_server::{RedisServer, RedisServerOptions};

/// How long Redis stays down: longer than a few of every role's retries (backoff from 100 ms)
/// and far shorter than their retry window (redis.retry_for_ms = 30 s in the test jobs).
const OUTAGE: Duration = Duration::from_secs(3);

/// One group per update, so updates come quickly after the restart.
const EXTRA: &str = "[learner.service]\ngroups_per_update = 1\nmax_wait_ms = 2000\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_role_process_rides_out_a_redis_restart() {
    let model = tokio::task::spawn_blocking(sft_model).await.unwrap().display().to_string();
    let started = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    let mut redis = RedisServer::start(RedisServerOptions::default()).expect("redis-server starts (run `make setup`)");
    let job = Job::new(tmp.path(), &redis.url(), "restart", "score", &model, EXTRA);
    let mut procs = job.procs();
    procs.start("learner", &["learner"], &[]);
    procs.wait_until("version 0 published", PATIENCE, || async { job.latest_version().await.is_some() }).await;
    procs.start("rrm", &["rrm"], &[]);
    procs.start("actor", &["actor"], &[]);
    procs.wait_until("two updates", PATIENCE, || async { job.records().len() >= 2 }).await;

    // The crash: the server dies mid-run, stays down, and comes back with its append-only file.
    let before = job.latest_version().await.expect("a version before the crash");
    redis.kill();
    let down = Instant::now();
    // The outage itself is the fault injected, not a wait for a condition.
    tokio::time::sleep(OUTAGE).await;
    redis.restart().expect("redis-server restarts on its port and directory");
    eprintln!("redis down {:.1?} at version {before}, back after {:.0?}", down.elapsed(), started.elapsed());
    assert!(
        job.latest_version().await.is_some_and(|v| v >= before),
        "the append-only file kept the published versions"
    );

    // Every role goes on (wait_until fails as soon as one exits): the actor generates with a
    // version that did not exist before the crash, the RRM worker forwards that trajectory, and
    // the learner trains two more updates.
    procs
        .wait_until("a post-restart version's trajectory scored and two more updates", PATIENCE, || async {
            let newer = job.latest_version().await.is_some_and(|v| v >= before + 2);
            newer && job.scored().await.iter().any(|s| s.trajectory.policy_version.0 > before)
        })
        .await;
    eprintln!("training went on to version {:?}; {:.0?}", job.latest_version().await, started.elapsed());

    // A graceful end; then count by id.
    end_gracefully(&mut procs, &job, &["actor"], &["rrm"]).await;
    let ledger = assert_each_trajectory_applied_once(&job).await;
    let data = job.final_checkpoint();
    assert!(data.policy_version.0 >= before + 2, "version {} after {before} at the crash", data.policy_version.0);
    eprintln!(
        "{} trajectories, {} updates, all applied once across the restart; {:.0?}",
        ledger.trajectories,
        ledger.updates,
        started.elapsed()
    );
}
