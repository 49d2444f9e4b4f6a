//! Greedy evaluation, the "solved" criterion of the tuned reference: RL-Zoo runs
//! Stable-Baselines3's `EvalCallback`, which every `eval_freq` steps plays `n_eval_episodes`
//! episodes with deterministic (greedy) actions on an environment of its own and reports their
//! mean return. CartPole-v1 counts as solved when that mean reaches 475.
//!
//! Here the episodes of one evaluation are played side by side, one CartPole each, with one
//! batched forward pass per step over those still running; their start states come from a
//! generator that no training environment shares, so evaluating changes nothing in the run.

use std::time::{Duration, Instant};

use env_workers::control::{CartPole, ControlEnvironment};
use policy::mlp::{MlpPolicy, SampleRng};
use tch::Tensor;

use super::rollout::OBS_DIM;
use super::SOLVED_RETURN;
use crate::error::{LearnerError, Result};

/// One evaluation: when, and what the greedy policy scored.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    /// The environment step it stands for (a multiple of `eval_every`).
    pub step: u64,
    /// The undiscounted return of each episode.
    pub returns: Vec<f64>,
}

impl Evaluation {
    /// The mean return of its episodes.
    pub fn mean(&self) -> f64 {
        self.returns.iter().sum::<f64>() / self.returns.len().max(1) as f64
    }
}

/// The step of the first evaluation whose mean reached `threshold`.
pub fn first_reaching(evaluations: &[Evaluation], threshold: f64) -> Option<u64> {
    evaluations.iter().find(|e| e.mean() >= threshold).map(|e| e.step)
}

/// Plays greedy evaluation episodes on environments of its own.
#[derive(Debug)]
pub struct Evaluator {
    episodes: usize,
    reset_seeds: SampleRng,
}

impl Evaluator {
    /// `episodes` per evaluation, start states drawn from `reset_seeds`.
    pub fn new(episodes: usize, reset_seeds: SampleRng) -> Self {
        Self { episodes, reset_seeds }
    }

    /// Plays one episode per environment with the policy's most likely action and returns
    /// their returns.
    pub fn play(&mut self, policy: &MlpPolicy) -> Result<Vec<f64>> {
        let mut envs: Vec<CartPole> = vec![CartPole::default(); self.episodes];
        let mut obs: Vec<f32> = envs.iter_mut().flat_map(|e| e.reset(self.reset_seeds.next_u64())).collect();
        let mut returns = vec![0.0; self.episodes];
        let mut running: Vec<usize> = (0..self.episodes).collect();
        while !running.is_empty() {
            let batch = Tensor::from_slice(&obs).view([running.len() as i64, OBS_DIM as i64]);
            let actions = tch::no_grad(|| policy.forward(&batch).0.argmax(-1, false));
            let actions = Vec::<i64>::try_from(&actions)?;
            let (mut next_running, mut next_obs) = (Vec::with_capacity(running.len()), Vec::with_capacity(obs.len()));
            for (&i, &action) in running.iter().zip(&actions) {
                let step = envs[i].step(action as u32).map_err(LearnerError::Environment)?;
                returns[i] += f64::from(step.reward);
                if !(step.terminated || step.truncated) {
                    next_running.push(i);
                    next_obs.extend_from_slice(&step.observation);
                }
            }
            (running, obs) = (next_running, next_obs);
        }
        Ok(returns)
    }
}

/// The greedy evaluations of one run: every multiple of `every` that the steps pass.
pub(super) struct EvalSchedule {
    evaluator: Evaluator,
    every: u64,
    next: u64,
    /// The evaluations made so far.
    pub done: Vec<Evaluation>,
    /// The time they took.
    pub time: Duration,
}

impl EvalSchedule {
    /// Evaluations with `evaluator` every `every` steps (never for 0).
    pub fn new(every: u64, evaluator: Evaluator) -> Self {
        Self { evaluator, every, next: every, done: Vec::new(), time: Duration::ZERO }
    }

    /// Evaluates `policy` for every evaluation step in `(from, to]`: the policy acting when the
    /// training run passes it, as Stable-Baselines3's callback sees it mid-rollout.
    pub fn run_until(&mut self, to: u64, policy: &MlpPolicy) -> Result<()> {
        while self.every > 0 && self.next <= to {
            let start = Instant::now();
            self.done.push(Evaluation { step: self.next, returns: self.evaluator.play(policy)? });
            self.time += start.elapsed();
            self.next += self.every;
        }
        Ok(())
    }

    /// The step of the first evaluation that reached 475.
    pub fn solved_at(&self) -> Option<u64> {
        first_reaching(&self.done, SOLVED_RETURN)
    }
}
