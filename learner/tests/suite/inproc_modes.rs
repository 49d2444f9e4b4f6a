//! The four feedback modes in the in-process trainer, run as the distributed roles run them with
//! the reference judge: outcome judges nothing; score mixes the judge's score into the reward
//! (so, on the same draws, its mean reward exceeds outcome's by 0.3 × the mean score, which is
//! positive for an SFT model's partly right attempts); critique and unified play a refined
//! attempt after every initial one, from the critique, in the same group.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use std::path::Path;

use learner::inproc::{self, InprocConfig, IterationStats};
use policy::LoadedModel;
use protocol::wire::FeedbackMode;
use tch::Device;

const SFT_FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/micro-math-sft");

fn one_iteration(mode: FeedbackMode) -> IterationStats {
    let model = LoadedModel::from_dir(Path::new(SFT_FIXTURE), Device::Cpu, false).unwrap();
    let mut cfg =
        InprocConfig { difficulty: 1, tasks_per_iteration: 4, group_size: 4, eval_tasks: 1, ..InprocConfig::default() };
    cfg.learner.feedback = mode;
    cfg.rollout.limits.max_turns = 6;
    let mut trainer = inproc::Trainer::new(model, cfg).unwrap();
    trainer.iteration().unwrap()
}

#[test]
fn every_mode_runs_with_the_reference_judge_and_refines_where_it_should() {
    let outcome = one_iteration(FeedbackMode::Outcome);
    let score = one_iteration(FeedbackMode::Score);
    let critique = one_iteration(FeedbackMode::Critique);
    let unified = one_iteration(FeedbackMode::Unified);
    assert_eq!((outcome.episodes, score.episodes), (16, 16), "one attempt per task and group member");
    assert_eq!((critique.episodes, unified.episodes), (32, 32), "a refined attempt after each initial one");
    assert!(outcome.refined_success_rate.is_none() && score.refined_success_rate.is_none());
    assert!(critique.refined_success_rate.is_some() && unified.refined_success_rate.is_some());
    // The same seed gives every mode the same initial draws.
    assert_eq!(outcome.success_rate, score.success_rate);
    assert_eq!(outcome.success_rate, critique.success_rate);
    assert!(
        score.mean_reward > outcome.mean_reward,
        "the score enters the reward: {} vs {}",
        score.mean_reward,
        outcome.mean_reward
    );
    assert!(outcome.mean_reward <= 1.0 && score.mean_reward <= 1.3);
    for s in [&outcome, &score, &critique, &unified] {
        assert!(s.updates >= 1 || s.trained_trajectories == 0, "{s:?}");
    }
}
