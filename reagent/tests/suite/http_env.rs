//! Training against an environment written in another language: the example Python server
//! (`examples/http_env/server.py`, the HTTP environment protocol) serves `http` tasks to an
//! actor, the RRM worker's reference judge asks the server's `verify`, and the learner trains —
//! all `reagent` processes over one redis-server, the shared token on every request.
//!
//! ```text
//!  server.py ◄── open/step/close ── actor ──► rollouts ──► rrm (verify + replay on server.py)
//!                                                          └──► scored ──► learner ─► updates
//!  then: actor leaves ─► rrm drains ─► learner trains the rest ─► everyone leaves
//! ```
//!
//! Every trajectory is applied exactly once, every one is an `http` task the server posed, and
//! every verdict is the reference judge's. A second job whose server serves no `verify` has its
//! RRM worker refuse to start, naming `rrm.judge`.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use std::time::Duration;

use crate::common::*;
use protocol::redis_server::{RedisServer, RedisServerOptions};
use protocol::wire::{Episode, Role, TaskFamily, Verdict};
use testkit::PythonEnvServer;

const TOKEN: &str = "a-test-token-for-the-http-env";
const UPDATES: usize = 3;

/// Short episodes of the untrained `micro` model: mechanics, not learning.
fn extra(url: &str) -> String {
    format!(
        "[actor]\nfamily = \"http\"\nenv_workers = [{url:?}]\nmax_turns = 3\nmax_new_tokens = 24\n\
         [learner.service]\ngroups_per_update = 1\nmax_wait_ms = 2000\n"
    )
}

fn token() -> Vec<(&'static str, String)> {
    vec![("REAGENT_ENV_TOKEN", TOKEN.to_string())]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actors_rrm_and_learner_train_against_a_python_environment_server() {
    let tmp = tempfile::tempdir().unwrap();
    let redis = RedisServer::start(RedisServerOptions::default()).expect("redis-server starts (run `make setup`)");
    let server = PythonEnvServer::start(&[], Some(TOKEN));
    let job = Job::new(tmp.path(), &redis.url(), "http", "score", "micro", &extra(server.url()));
    let mut procs = job.procs();

    procs.start("learner", &["learner"], &[]);
    procs.wait_until("version 0 published", PATIENCE, || async { job.latest_version().await.is_some() }).await;
    procs.start("rrm", &["rrm"], &token());
    procs.start("actor", &["actor"], &token());
    procs.wait_until(&format!("{UPDATES} updates"), PATIENCE, || async { job.records().len() >= UPDATES }).await;

    end_gracefully(&mut procs, &job, &["actor"], &["rrm"]).await;

    let ledger = assert_each_trajectory_applied_once(&job).await;
    for t in job.rollouts().await {
        assert_eq!(t.task.family, TaskFamily::Http, "{:?}", t.task);
        let Episode::Text(turns) = &t.episode else { panic!("a text episode") };
        let question = &turns.iter().find(|t| t.role == Role::User).expect("the task").text;
        assert!(question.starts_with("Convert ") || question.starts_with("How much is "), "{question:?}");
        assert!(turns.iter().filter(|t| t.role == Role::Agent).count() <= 3, "actor.max_turns = 3 holds");
    }
    for s in job.scored().await {
        let Verdict::Judged(j) = &s.verdict else { panic!("every http trajectory is judged: {:?}", s.verdict) };
        assert_eq!(j.judge_id, "reference");
        assert!((0.0..=1.0).contains(&j.score), "{j:?}");
    }
    eprintln!("{} trajectories, {} updates", ledger.trajectories, ledger.updates);
}

#[tokio::test]
async fn the_reference_judge_refuses_a_server_without_verify_naming_the_keys() {
    let tmp = tempfile::tempdir().unwrap();
    let redis = RedisServer::start(RedisServerOptions::default()).expect("redis-server starts (run `make setup`)");
    let server = PythonEnvServer::start(&["--no-verify"], Some(TOKEN));
    let job = Job::new(tmp.path(), &redis.url(), "noverify", "unified", "micro", &extra(server.url()));
    let mut rrm = tokio::process::Command::new(env!("CARGO_BIN_EXE_reagent"));
    rrm.args(["rrm", "--config"]).arg(&job.config).envs(token()).kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(60), rrm.output()).await.expect("rrm exits").unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the worker must refuse: {stderr}");
    for says in ["rrm.judge", "verify", "run.feedback", server.url()] {
        assert!(stderr.contains(says), "the refusal names {says:?}: {stderr}");
    }
}
