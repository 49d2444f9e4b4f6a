//! Evaluation on fixed held-out tasks: the success rates SFT and RL report — greedy (each task
//! once at temperature 0) and sampled (each task several times at the rollout temperature, from a
//! fixed sampler seed, so that two models are compared on the same random draws).
//!
//! Held-out seeds start at [`HELD_OUT_SEED_BASE`] (2⁴⁰); training draws its seeds below it,
//! so no evaluated task is ever trained on.

use std::time::{Duration, Instant};

use env_workers::action::{self, Action};
use policy::Sampler;
use protocol::wire::{ActorId, GroupId, PolicyVersion, RunId, TaskFamily, TaskSpec};
use serde::Serialize;

use super::{run_episodes, EpisodeTask, PolicyRef, RolloutConfig, TrajectoryMeta};
use crate::error::Result;

/// The first held-out seed; training seeds are below it.
pub const HELD_OUT_SEED_BASE: u64 = 1 << 40;

/// The `n` held-out tasks of `family` at `difficulty`: seeds `HELD_OUT_SEED_BASE + 0..n`.
pub fn held_out_specs(family: TaskFamily, difficulty: u32, n: usize) -> Vec<TaskSpec> {
    (0..n as u64).map(|i| TaskSpec { family, seed: HELD_OUT_SEED_BASE + i, difficulty }).collect()
}

/// How a policy did on a set of tasks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvalReport {
    /// Episodes played.
    pub episodes: usize,
    /// Episodes solved.
    pub successes: usize,
    /// `successes / episodes` (0 when there are none).
    pub success_rate: f64,
    /// Episodes that ended with an `<answer>` (right or wrong), rather than at the turn or
    /// context limit: whether the protocol was learnt, apart from the arithmetic.
    pub answered: usize,
    /// Mean outcome reward.
    pub mean_reward: f64,
    /// Mean agent turns per episode.
    pub mean_turns: f64,
    /// Generated (agent) tokens in all.
    pub agent_tokens: usize,
    /// Success of each task, in the order of the specs: the fraction of its samples solved
    /// (0 or 1 when played once). Two models evaluated on the same specs and draws pair task by
    /// task, which is what a paired interval of their difference needs.
    pub per_task: Vec<f64>,
    /// Wall-clock time of the evaluation.
    #[serde(serialize_with = "secs")]
    pub wall: Duration,
}

fn secs<S: serde::Serializer>(d: &Duration, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// Whether the last message is a well-formed `<answer>…</answer>` action.
fn ended_with_answer(messages: &[String]) -> bool {
    messages.last().is_some_and(|m| matches!(action::parse(m), Ok(Action::Answer(_))))
}

/// Plays every task once, greedily (temperature 0, so the sampler's seed does not matter).
pub fn evaluate_greedy(policy: PolicyRef<'_>, specs: &[TaskSpec], config: &RolloutConfig) -> Result<EvalReport> {
    evaluate_sampled(policy, specs, 1, &config.greedy(), 0)
}

/// Plays every task `samples` times at `config`'s temperature and top-p, drawing from a sampler
/// seeded with `seed` (the same seed gives two models the same random numbers, which keeps the
/// noise out of their difference). Each task's samples are played one after the other.
pub fn evaluate_sampled(
    policy: PolicyRef<'_>,
    specs: &[TaskSpec],
    samples: usize,
    config: &RolloutConfig,
    seed: u64,
) -> Result<EvalReport> {
    let started = Instant::now();
    let tasks: Vec<EpisodeTask> =
        specs.iter().flat_map(|s| std::iter::repeat_n(EpisodeTask::initial(*s, GroupId(0)), samples)).collect();
    let meta = TrajectoryMeta {
        run_id: RunId::new("eval").expect("a valid run id"),
        actor_id: ActorId("eval".into()),
        policy_version: PolicyVersion(0),
    };
    let results = tch::no_grad(|| run_episodes(policy, &tasks, config, &meta, &mut Sampler::new(seed)))?;
    let n = results.len();
    let successes = results.iter().filter(|r| r.outcome.success).count();
    let per = |x: f64| if n == 0 { 0.0 } else { x / n as f64 };
    Ok(EvalReport {
        episodes: n,
        successes,
        success_rate: per(successes as f64),
        answered: results.iter().filter(|r| ended_with_answer(&r.agent_messages)).count(),
        mean_reward: per(results.iter().map(|r| f64::from(r.outcome.reward)).sum()),
        mean_turns: per(results.iter().map(|r| r.agent_messages.len() as f64).sum()),
        agent_tokens: results.iter().map(|r| r.trajectory.trained_tokens()).sum(),
        per_task: results
            .chunks(samples.max(1))
            .map(|c| c.iter().filter(|r| r.outcome.success).count() as f64 / c.len() as f64)
            .collect(),
        wall: started.elapsed(),
    })
}
