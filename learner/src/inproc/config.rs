//! [`InprocConfig`]: the in-process trainer's settings — which tasks, how many attempts, how
//! episodes are sampled, and the learner's own `[learner]` section for the loss, the
//! advantages and the optimizer.

use std::time::Duration;

use protocol::wire::TaskFamily;

use crate::config::{AdvantageKind, LearnerConfig};
use crate::error::{LearnerError, Result};
use crate::sft::compact_rollout;
use episode::RolloutConfig;

/// An in-process GRPO run.
#[derive(Debug, Clone, PartialEq)]
pub struct InprocConfig {
    /// The task family trained on.
    pub family: TaskFamily,
    /// The difficulty of training and evaluation tasks.
    pub difficulty: u32,
    /// Tasks (GRPO groups) per iteration.
    pub tasks_per_iteration: usize,
    /// Attempts per task (the GRPO group size; default 8, as in the paper).
    pub group_size: usize,
    /// How episodes are played; `temperature` (default 0.7, as in the paper) is also the
    /// temperature the training log-probs are computed at.
    pub rollout: RolloutConfig,
    /// Iterations (each: sample, score, one or more updates).
    pub iterations: u64,
    /// The run stops early once this much time (evaluation excluded) has passed.
    pub time_limit: Option<Duration>,
    /// The run stops after the iteration in which its generated agent tokens reach this many
    /// (a token-matched budget; `None`: iterations and the time limit only).
    pub token_budget: Option<u64>,
    /// Passes over each iteration's trajectories.
    pub epochs: usize,
    /// Updates per pass: the trajectories are split into this many minibatches (the first is
    /// on-policy; later ones are clipped against the behaviour log-probs).
    pub minibatches: usize,
    /// Leave out trajectories whose advantage is zero (groups whose rewards are all equal):
    /// they add no policy gradient, only compute, and dilute the sequence-mean.
    pub skip_zero_advantage: bool,
    /// Loss, advantages, reward and optimizer: the learner's own section. Only GRPO is used
    /// here; `kl_coef > 0` keeps a frozen copy of the starting model as the reference. Its
    /// `feedback` is the mode (outcome, critique, score, unified), judged by the reference judge.
    pub learner: LearnerConfig,
    /// Whether the reference judge's critique says if the task was solved (`rrm.reveal_outcome`).
    pub reveal_outcome: bool,
    /// Greedy evaluation every this many iterations (0: only before the first and after the
    /// last).
    pub eval_every: u64,
    /// Held-out tasks evaluated.
    pub eval_tasks: usize,
    /// Seeds the task draw and the sampler.
    pub seed: u64,
}

impl Default for InprocConfig {
    fn default() -> Self {
        Self {
            family: TaskFamily::Math,
            difficulty: 2,
            tasks_per_iteration: 8,
            group_size: 8,
            rollout: compact_rollout(),
            iterations: 100,
            time_limit: None,
            token_budget: None,
            epochs: 1,
            minibatches: 2,
            skip_zero_advantage: true,
            // Std-normalised GRPO at 3e-4, as the in-process figures were measured (its data is at
            // most a few minibatches old; the queue learner's defaults differ for its policy lag).
            learner: LearnerConfig {
                lr: 3e-4,
                grpo_std_normalize: true,
                kl_coef: 0.0,
                warmup_steps: 2,
                ..LearnerConfig::default()
            },
            reveal_outcome: false,
            eval_every: 10,
            eval_tasks: 100,
            seed: 1,
        }
    }
}

impl InprocConfig {
    /// The settings of the full-length experiment (`reagent train grpo`): `math` at
    /// difficulty 2 from the SFT model, 16 tasks × 8 attempts per iteration, at most ten
    /// minutes of training, greedy success on 300 held-out tasks before and after.
    pub fn experiment() -> Self {
        Self {
            tasks_per_iteration: 16,
            iterations: 100_000,
            time_limit: Some(Duration::from_secs(600)),
            eval_every: 50,
            eval_tasks: 300,
            ..Self::default()
        }
    }

    /// Checks every value; the error names the first bad key.
    pub fn validate(&self) -> Result<()> {
        let bad = |key: &str, expected: &str, found: String| {
            Err(LearnerError::config(format!("inproc.{key}"), expected, found))
        };
        self.learner.validate()?;
        if self.learner.advantage != AdvantageKind::Grpo {
            return bad("learner.advantage", "grpo (the in-process trainer has no value head)", "gae".into());
        }
        if !(1..=3).contains(&self.difficulty) {
            return bad("difficulty", "1, 2 or 3", self.difficulty.to_string());
        }
        if self.group_size < 2 {
            return bad("group_size", "at least 2 (GRPO needs a baseline)", self.group_size.to_string());
        }
        for (key, v) in [
            ("tasks_per_iteration", self.tasks_per_iteration),
            ("epochs", self.epochs),
            ("minibatches", self.minibatches),
        ] {
            if v == 0 {
                return bad(key, "at least 1", "0".into());
            }
        }
        if !(self.rollout.temperature.is_finite() && self.rollout.temperature > 0.0) {
            return bad(
                "rollout.temperature",
                "a number > 0 (training needs sampled episodes)",
                self.rollout.temperature.to_string(),
            );
        }
        Ok(())
    }
}
