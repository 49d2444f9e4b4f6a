//! The whole system as separate OS processes against one redis-server: a learner, two actor
//! processes playing their episodes on an env-worker, an RRM worker, all `reagent` roles
//! started from the cold-started micro model, in `score` mode (Reagent-R).
//!
//! ```text
//!  phase 1  learner · env-worker · rrm-1 · actor-1 · actor-2              a few updates
//!  phase 2  SIGKILL actor-1, rrm-1, env-worker (at once)
//!           env-worker again on the same address · rrm-2 (another consumer name: it
//!           reclaims what rrm-1 held) · actor-3                           training goes on
//!  phase 3  actors leave (SIGTERM) ─► rrm drains ─► learner trains what is left
//!           ─► rrm, env-worker leave ─► learner leaves (SIGTERM: final checkpoint)
//! ```
//!
//! Then, counted by trajectory id: every published trajectory was judged and forwarded once and
//! is in the final checkpoint's history exactly once; the policy version advanced through the
//! kills. And the run learned, by a property of its own data ([`crate::common::learning`]): the final
//! weights raised the log-probs of the trajectories that solved their task relative to their
//! failed groupmates, with z ≥ [`MIN_Z`] over the groups and [`CONTROL_MARGIN`] above a random
//! change of the weights of the same size. From the measured runs (trained z mean 10.8, sd 0.7;
//! random controls mean 0.5, sd 1.0; see `crate::common::learning`): a working learner fails with
//! probability ≈ Φ(−8), far below 1 %; a learner that moves at random passes with ≈ Φ(−4.5)
//! ≈ 3·10⁻⁶ (≈ 0.1 % even if its spread were 1.5× the controls'); one that does not update
//! (z = 0), updates with the wrong sign (z ≈ −11) or ignores the rewards (z ~ N(0, 1)) fails.
//!
//! Held-out success (greedy on 256 tasks, sampled at T = 0.7 on 256 × 4, the same seeds before
//! and after) is printed but not asserted. Over fourteen runs the sampled rise was +2.7 to +7.7
//! points; with the evaluation's own noise (≈ 2 points of standard error for a paired difference
//! of 1,024 samples) a threshold that a random-walking learner crosses with ≤ 1 % probability
//! would fail a working run several percent of the time, and a 99 %/99 % design needs several
//! times the samples and the run. That claim is measured where it has the budget: `reagent
//! experiment modes` reports each arm's held-out rise with a bootstrap interval over seeds.
//!
//! The learning settings are the ones under which that rise was steady: groups of 8 at
//! temperature 0.7, 4 groups (32 trajectories) per update, ~100 updates, lr 1e-4 and Dr. GRPO
//! (advantages mean-centred, not divided by the group's std). With the default lr 3e-4 (policy
//! lag ~3.6) the same budget moved held-out success anywhere from −5 to +5 points; with std
//! normalisation in score mode, the reference judge's small process-score differences decide the
//! advantages of every group whose outcomes tie, and success did not rise at all.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use std::collections::BTreeSet;
use std::time::Instant;

use crate::common::sft::sft_model;
use crate::common::*;
use protocol::redis_server::{RedisServer, RedisServerOptions};
use protocol::weights::WeightSet;
use protocol::wire::Verdict;

/// Updates before the kills, and versions published after them before the actors leave.
const UPDATES_BEFORE_KILL: usize = 4;
const VERSIONS_AFTER_KILL: u64 = 100;

/// Held-out tasks of the greedy evaluation; tasks and samples of each of the sampled one.
const GREEDY_TASKS: usize = 256;
const SAMPLED_TASKS: (usize, usize) = (256, 4);
/// The sampling temperature of actors, learner and the sampled evaluation.
const TEMPERATURE: f64 = 0.7;
/// The learning check's threshold on z (see the module header; measured runs: 9.7 to 11.6).
const MIN_Z: f64 = 5.0;
/// How far above the random control's z the trained z must be.
const CONTROL_MARGIN: f64 = 3.0;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn separate_processes_train_apply_each_trajectory_once_and_survive_kills() {
    let model = tokio::task::spawn_blocking(sft_model).await.unwrap();
    let started = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    let redis = RedisServer::start(RedisServerOptions::default()).expect("redis-server starts (run `make setup`)");
    let env_addr = free_addr();
    let extra = format!(
        "[actor]\nslots = 2\nenv_workers = [{env_addr:?}]\ngroup_size = 8\ntemperature = {TEMPERATURE}\n\
         [learner]\nlr = 1e-4\ngrpo_std_normalize = false\n\
         [learner.service]\ngroup_size = 8\ntemperature = {TEMPERATURE}\ngroups_per_update = 4\n"
    );
    let job = Job::new(tmp.path(), &redis.url(), "e2e", "score", &model.display().to_string(), &extra);
    let mut procs = job.procs();

    // Phase 1: the learner first (it publishes version 0), then the rest.
    procs.start("learner", &["learner"], &[]);
    procs.wait_until("version 0 published", PATIENCE, || async { job.latest_version().await.is_some() }).await;
    procs.start_env_worker("env-worker", &env_addr).await;
    procs.start("rrm-1", &["rrm"], &[("REAGENT__RRM__CONSUMER", "rrm-1".into())]);
    for actor in ["actor-1", "actor-2"] {
        procs.start(actor, &["actor"], &[("REAGENT__ACTOR__ID", actor.into())]);
    }
    procs
        .wait_until("updates before the kills", PATIENCE, || async { job.records().len() >= UPDATES_BEFORE_KILL })
        .await;

    // Phase 2: three processes die at once, mid-run; replacements join.
    procs.kill("actor-1");
    procs.kill("rrm-1");
    procs.kill("env-worker");
    let at_kill = job.latest_version().await.unwrap();
    let held = job.pending_of(&job.keys.rollouts(), "rrm", "rrm-1").await;
    eprintln!("phase 1: version {at_kill}; rrm-1 died holding {held} entries; {:.0?}", started.elapsed());
    procs.start_env_worker("env-worker", &env_addr).await;
    procs.start("rrm-2", &["rrm"], &[("REAGENT__RRM__CONSUMER", "rrm-2".into())]);
    procs.start("actor-3", &["actor"], &[("REAGENT__ACTOR__ID", "actor-3".into())]);
    let target = at_kill + VERSIONS_AFTER_KILL;
    procs
        .wait_until(&format!("version {target}"), PATIENCE, || async {
            job.latest_version().await.is_some_and(|v| v >= target)
        })
        .await;
    eprintln!("phase 2: version {target}; {:.0?}", started.elapsed());

    // Phase 3: a graceful end; everything published is judged and trained before the learner leaves.
    end_gracefully(&mut procs, &job, &["actor-2", "actor-3"], &["rrm-2", "env-worker"]).await;
    assert_eq!(job.pending_of(&job.keys.rollouts(), "rrm", "rrm-1").await, 0, "rrm-1's entries were reclaimed");

    let ledger = assert_each_trajectory_applied_once(&job).await;
    let (records, data, rollouts) = (job.records(), job.final_checkpoint(), job.rollouts().await);
    assert_eq!(ledger.updates as usize, records.len(), "one metrics.jsonl line per update");
    assert_eq!(data.policy_version.0, data.step, "a version per update (publish_every = 1)");
    assert_eq!(job.latest_version().await, Some(data.policy_version.0), "the final version is published");
    assert!(job.scored().await.iter().all(|s| matches!(s.verdict, Verdict::Judged(_))), "score mode judges all");
    let actors: BTreeSet<&str> = rollouts.iter().map(|t| t.actor_id.0.as_str()).collect();
    assert_eq!(actors, BTreeSet::from(["actor-1", "actor-2", "actor-3"]), "every actor process published");
    assert!(
        rollouts.iter().any(|t| t.actor_id.0 == "actor-2" && t.policy_version.0 > at_kill + 1),
        "the surviving actor rode out the env-worker's death"
    );

    // Learning: the cold start against the newest weights on the same held-out tasks.
    let weights = job.store().fetch_latest().await.unwrap();
    let final_weights = weights.clone();
    let eval = move |w: Option<&WeightSet>| {
        (job.success_rate(w, GREEDY_TASKS, 1, 0.0), job.success_rate(w, SAMPLED_TASKS.0, SAMPLED_TASKS.1, TEMPERATURE))
    };
    let (before, after) = tokio::task::spawn_blocking(move || (eval(None), eval(Some(&weights)))).await.unwrap();
    let lag = records.iter().map(|r| r.policy_lag_mean).sum::<f64>() / records.len() as f64;
    eprintln!(
        "{} trajectories, {} updates (mean policy lag {lag:.1}), {:.0?}: greedy success {:.3} → {:.3}, \
         sampled (T = {TEMPERATURE}) {:.3} → {:.3}",
        ledger.trajectories,
        ledger.updates,
        started.elapsed(),
        before.0,
        after.0,
        before.1,
        after.1
    );
    assert!(before.0 > 0.3 && (0.0..=1.0).contains(&after.0), "the evaluation ran: {before:?} → {after:?}");

    // Learning, as a property of the run's own trajectories (module header).
    let model = model.display().to_string();
    let check = tokio::task::spawn_blocking(move || {
        crate::common::learning::learning_check(&model, &rollouts, &final_weights, 1)
    })
    .await
    .unwrap();
    eprintln!("learning check: {check:?}; {:.0?}", started.elapsed());
    assert!(check.trained.groups >= 100, "enough contested groups to test: {check:?}");
    assert!(
        check.trained.z >= MIN_Z && check.random.iter().all(|r| check.trained.z >= r.z + CONTROL_MARGIN),
        "the updates should raise the log-probs of the trajectories that solved their task relative to their \
         groupmates (z ≥ {MIN_Z}, and {CONTROL_MARGIN} above a random change of the same size): {check:?}"
    );
}
