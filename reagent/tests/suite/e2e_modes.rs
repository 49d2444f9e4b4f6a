//! Every feedback mode end to end with separate processes (a learner, an actor, an RRM worker
//! per mode, four runs side by side on one redis-server): what the RRM attaches, whether refined
//! attempts follow and carry the critique of the attempt they refine, and that the learner
//! trains on the result. Mechanics, not learning: a few updates per mode.
//!
//! | mode | attempts | verdicts on the scored stream |
//! |---|---|---|
//! | outcome  | initial            | NotRequested |
//! | critique | initial + refined  | initial Judged, refined NotRequested |
//! | score    | initial            | Judged |
//! | unified  | initial + refined  | Judged |
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use std::collections::HashMap;

use crate::common::sft::sft_model;
use crate::common::*;
use protocol::redis_server::{RedisServer, RedisServerOptions};
use protocol::wire::{Attempt, Episode, FeedbackMode, Role, ScoredTrajectory, TrajectoryId, Verdict};

const MODES: [FeedbackMode; 4] =
    [FeedbackMode::Outcome, FeedbackMode::Critique, FeedbackMode::Score, FeedbackMode::Unified];

/// One group per update, so the first update comes after the first group.
const EXTRA: &str = "[learner.service]\ngroups_per_update = 1\nmax_wait_ms = 2000\n";

/// Whether the run of `mode` has shown what it should: two updates, one of them on refined
/// attempts where the mode refines.
async fn done(job: &Job, mode: FeedbackMode) -> bool {
    let records = job.records();
    records.len() >= 2 && (!mode.refines() || records.iter().any(|r| r.refined_success_rate.is_some()))
}

/// The text of the first user or tool turn of a trajectory.
fn first_prompt(t: &protocol::wire::Trajectory) -> &str {
    let Episode::Text(turns) = &t.episode else { panic!("a text episode") };
    &turns.iter().find(|t| matches!(t.role, Role::User | Role::Tool)).expect("a user turn").text
}

fn check_verdicts(mode: FeedbackMode, scored: &[ScoredTrajectory]) {
    for s in scored {
        let refined = matches!(s.trajectory.attempt, Attempt::Refined { .. });
        assert!(mode.refines() || !refined, "{mode}: no refined attempts in a mode that does not refine");
        let judged = matches!(s.verdict, Verdict::Judged(_));
        let want_judged = match mode {
            FeedbackMode::Outcome => false,
            FeedbackMode::Critique => !refined,
            FeedbackMode::Score | FeedbackMode::Unified => true,
        };
        assert_eq!(judged, want_judged, "{mode}: verdict of a {:?} attempt: {:?}", s.trajectory.attempt, s.verdict);
        if !want_judged {
            assert_eq!(s.verdict, Verdict::NotRequested, "{mode}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_feedback_mode_runs_end_to_end() {
    let model = tokio::task::spawn_blocking(sft_model).await.unwrap().display().to_string();
    let tmp = tempfile::tempdir().unwrap();
    let redis = RedisServer::start(RedisServerOptions::default()).expect("redis-server starts (run `make setup`)");
    let jobs: Vec<Job> =
        MODES.iter().map(|m| Job::new(tmp.path(), &redis.url(), m.as_str(), m.as_str(), &model, EXTRA)).collect();
    let mut procs: Vec<Procs> = jobs.iter().map(Job::procs).collect();
    for p in &mut procs {
        p.start("learner", &["learner"], &[]);
    }
    for (job, p) in jobs.iter().zip(&mut procs) {
        p.wait_until("version 0 published", PATIENCE, || async { job.latest_version().await.is_some() }).await;
        p.start("rrm", &["rrm"], &[]);
        p.start("actor", &["actor"], &[]);
    }
    for ((job, p), mode) in jobs.iter().zip(&mut procs).zip(MODES) {
        p.wait_until(&format!("{mode}: updates"), PATIENCE, || done(job, mode)).await;
    }

    for ((job, p), mode) in jobs.iter().zip(&mut procs).zip(MODES) {
        let rollouts = job.rollouts().await;
        let refined: Vec<_> = rollouts.iter().filter(|t| matches!(t.attempt, Attempt::Refined { .. })).collect();
        assert_eq!(!refined.is_empty(), mode.refines(), "{mode}: refined attempts follow only where the mode refines");
        // The initial attempts refined are on the scored stream by now (their critique came
        // from the worker before it forwarded them); wait for it rather than assume it.
        let of: Vec<TrajectoryId> = refined
            .iter()
            .filter_map(|t| if let Attempt::Refined { of } = t.attempt { Some(of) } else { None })
            .collect();
        p.wait_until(&format!("{mode}: refined attempts' initial attempts scored"), PATIENCE, || async {
            let scored = job.scored().await;
            of.iter().all(|id| scored.iter().any(|s| s.trajectory.id == *id))
        })
        .await;
        let scored = job.scored().await;
        check_verdicts(mode, &scored);
        let verdicts: HashMap<TrajectoryId, &Verdict> = scored.iter().map(|s| (s.trajectory.id, &s.verdict)).collect();
        for r in &refined {
            let Attempt::Refined { of } = r.attempt else { unreachable!() };
            let first = rollouts.iter().find(|t| t.id == of).expect("the refined attempt's initial attempt");
            assert_eq!((first.attempt, first.group_id, first.task), (Attempt::Initial, r.group_id, r.task));
            let Verdict::Judged(j) = verdicts[&of] else { panic!("{mode}: refined after a {:?}", verdicts[&of]) };
            assert!(!j.critique.trim().is_empty(), "{mode}: an empty critique");
            let prompt = first_prompt(r);
            assert!(
                prompt.contains(j.critique.trim()),
                "{mode}: the critique {:?} is not in the prompt {prompt:?}",
                j.critique
            );
            assert!(!first_prompt(first).contains(j.critique.trim()), "{mode}: the initial prompt has no critique");
        }

        let records = job.records();
        assert!(records.iter().all(|r| r.trajectories > 0 && r.loss.is_finite()), "{mode}: {records:?}");
        let scored_updates = records.iter().filter(|r| r.score_mean.is_some()).count();
        match mode {
            FeedbackMode::Outcome => assert_eq!(scored_updates, 0, "{mode}: no RRM score in outcome mode"),
            _ => assert!(scored_updates > 0, "{mode}: updates on judged trajectories record their mean score"),
        }
        eprintln!(
            "{mode}: {} trajectories ({} refined), {} scored, {} updates",
            rollouts.len(),
            refined.len(),
            scored.len(),
            records.len()
        );
    }
}
