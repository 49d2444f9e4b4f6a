//! [`CartpoleConfig`]: every knob of a CartPole PPO run, typed and checked before the run
//! (`validate()` names the bad key), with CleanRL `ppo.py`'s defaults (the budget cut to
//! 200,000 steps). The named presets and their measurements are in [`super::presets`].
//!
//! Schedules: with `anneal_lr` (`anneal_clip`) the learning rate (clip range) of iteration `i`
//! of `n` is its initial value times `1 − i/n`, CleanRL's formula. Stable-Baselines3 evaluates
//! the same line one rollout later (`1 − steps_after_this_rollout / total_steps`); the two
//! differ by one iteration's step, 1/n of the initial value.

use protocol::config::Section;
use serde::{Deserialize, Serialize};

use super::update::UpdateConfig;
use crate::error::Result;
use crate::loss::LossConfig;
use crate::optim::{AdamWConfig, LrSchedule};

/// A CartPole PPO run. Every default is CleanRL `ppo.py`'s except `total_steps` (CleanRL:
/// 500,000), the symmetric clip written as our `clip_low = clip_high`, and the evaluation
/// (CleanRL has none; these are RL-Zoo's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CartpoleConfig {
    /// Seeds everything: initial weights, episode resets, action sampling, minibatch order,
    /// evaluation episodes.
    pub seed: u64,
    /// Environment-step budget; the run does `total_steps / (num_envs · num_steps)` iterations
    /// (default 200,000).
    pub total_steps: u64,
    /// CartPoles stepped together (default 4).
    pub num_envs: usize,
    /// Steps per environment per iteration (default 128).
    pub num_steps: usize,
    /// Adam's learning rate at the first iteration (default 2.5e-4).
    pub lr: f64,
    /// Anneal the rate linearly towards 0 over the iterations (default true).
    pub anneal_lr: bool,
    /// Discount γ (default 0.99).
    pub gamma: f64,
    /// GAE λ (default 0.95).
    pub gae_lambda: f64,
    /// Minibatches per epoch; a minibatch holds `num_envs · num_steps / num_minibatches`
    /// steps (Stable-Baselines3's `batch_size`) (default 4).
    pub num_minibatches: usize,
    /// Epochs over each batch (default 4).
    pub update_epochs: usize,
    /// Whiten advantages per minibatch (default true).
    pub norm_adv: bool,
    /// PPO ratio clip ε, both sides, at the first iteration (default 0.2).
    pub clip_coef: f64,
    /// Anneal ε linearly towards 0 as `anneal_lr` does the rate (default false).
    pub anneal_clip: bool,
    /// Clip the value loss around the old values by the current ε, keeping the larger of the
    /// clipped and unclipped losses (CleanRL's) (default true).
    pub clip_vloss: bool,
    /// Entropy bonus (default 0.01).
    pub ent_coef: f64,
    /// Weight of the value loss `½(V − R)²` (default 0.5). Stable-Baselines3's `vf_coef`
    /// weighs `(V − R)²`, so its 0.5 is 1.0 here.
    pub vf_coef: f64,
    /// Global gradient-norm clip; 0 turns it off (default 0.5).
    pub max_grad_norm: f64,
    /// Adam's ε (default 1e-5, as CleanRL and Stable-Baselines3 pass to `optim.Adam`).
    pub adam_eps: f64,
    /// Evaluate every this many environment steps; 0 never (default 5,000).
    pub eval_every: u64,
    /// Episodes per evaluation, greedy actions, on environments of their own (default 20).
    pub eval_episodes: usize,
    /// End the run at the first evaluation that reaches the bar (default false: use the
    /// whole budget, as the reference does).
    pub stop_when_solved: bool,
}

impl Default for CartpoleConfig {
    fn default() -> Self {
        Self {
            seed: 1,
            total_steps: 200_000,
            num_envs: 4,
            num_steps: 128,
            lr: 2.5e-4,
            anneal_lr: true,
            gamma: 0.99,
            gae_lambda: 0.95,
            num_minibatches: 4,
            update_epochs: 4,
            norm_adv: true,
            clip_coef: 0.2,
            anneal_clip: false,
            clip_vloss: true,
            ent_coef: 0.01,
            vf_coef: 0.5,
            max_grad_norm: 0.5,
            adam_eps: 1e-5,
            eval_every: 5_000,
            eval_episodes: 20,
            stop_when_solved: false,
        }
    }
}

/// The section these checks name keys under.
const SECTION: Section<'static> = Section("cartpole");

impl CartpoleConfig {
    /// Environment steps per iteration (`num_envs · num_steps`).
    pub fn batch_size(&self) -> usize {
        self.num_envs * self.num_steps
    }

    /// Steps per minibatch (`batch_size / num_minibatches`).
    pub fn minibatch_size(&self) -> usize {
        self.batch_size() / self.num_minibatches.max(1)
    }

    /// Iterations the budget allows (CleanRL's `total_timesteps // batch_size`).
    pub fn iterations(&self) -> u64 {
        self.total_steps / self.batch_size().max(1) as u64
    }

    /// The share of the schedule left at iteration `i` (0-based): `1 − i / iterations`.
    fn remaining(&self, i: u64) -> f64 {
        1.0 - i as f64 / self.iterations().max(1) as f64
    }

    /// The learning rate of iteration `i` (0-based): `lr · (1 − i / iterations)` when annealing.
    pub fn lr_at(&self, i: u64) -> f64 {
        if self.anneal_lr {
            self.lr * self.remaining(i)
        } else {
            self.lr
        }
    }

    /// The clip range ε of iteration `i` (0-based): `clip_coef · (1 − i / iterations)` when
    /// annealing.
    pub fn clip_at(&self, i: u64) -> f64 {
        if self.anneal_clip {
            self.clip_coef * self.remaining(i)
        } else {
            self.clip_coef
        }
    }

    /// Checks every value; the error names the key.
    pub fn validate(&self) -> Result<()> {
        SECTION.check(self.num_envs > 0, "num_envs", "at least 1", self.num_envs)?;
        SECTION.check(self.num_steps > 0, "num_steps", "at least 1", self.num_steps)?;
        SECTION.check(self.num_minibatches > 0, "num_minibatches", "at least 1", self.num_minibatches)?;
        let batch = self.batch_size();
        SECTION.check(
            batch.is_multiple_of(self.num_minibatches),
            "num_minibatches",
            &format!("a divisor of num_envs · num_steps = {batch}"),
            self.num_minibatches,
        )?;
        SECTION.check(self.update_epochs > 0, "update_epochs", "at least 1", self.update_epochs)?;
        SECTION.check(
            self.iterations() > 0,
            "total_steps",
            &format!("at least one batch ({batch})"),
            self.total_steps,
        )?;
        SECTION.check(self.lr > 0.0 && self.lr.is_finite(), "lr", "a positive number", self.lr)?;
        SECTION.check((0.0..=1.0).contains(&self.gamma), "gamma", "a number in [0, 1]", self.gamma)?;
        SECTION.check((0.0..=1.0).contains(&self.gae_lambda), "gae_lambda", "a number in [0, 1]", self.gae_lambda)?;
        SECTION.check(
            self.clip_coef > 0.0 && self.clip_coef < 1.0,
            "clip_coef",
            "a number in (0, 1)",
            self.clip_coef,
        )?;
        for (key, v) in [("ent_coef", self.ent_coef), ("vf_coef", self.vf_coef), ("max_grad_norm", self.max_grad_norm)]
        {
            SECTION.check(v >= 0.0 && v.is_finite(), key, "a non-negative number", v)?;
        }
        SECTION.check(self.adam_eps > 0.0, "adam_eps", "a positive number", self.adam_eps)?;
        SECTION.check(self.eval_episodes > 0, "eval_episodes", "at least 1", self.eval_episodes)?;
        Ok(SECTION.check(
            !self.stop_when_solved || self.eval_every > 0,
            "stop_when_solved",
            "false when eval_every is 0 (nothing would decide it)",
            self.stop_when_solved,
        )?)
    }

    /// The objective of iteration `i`: symmetric clip at ε(i), no KL term, entropy and
    /// (clipped at ε(i), or plain) value terms.
    pub fn loss_config(&self, i: u64) -> LossConfig {
        let clip = self.clip_at(i);
        LossConfig {
            clip_low: clip,
            clip_high: clip,
            kl_coef: 0.0,
            entropy_coef: self.ent_coef,
            value_coef: self.vf_coef,
            value_clip: self.clip_vloss.then_some(clip),
            is_cap: 1.0,
        }
    }

    /// The update's shape at iteration `i`.
    pub fn update_config(&self, i: u64) -> UpdateConfig {
        UpdateConfig {
            epochs: self.update_epochs,
            minibatches: self.num_minibatches,
            normalize_advantages: self.norm_adv,
            loss: self.loss_config(i),
        }
    }

    /// Adam (AdamW without weight decay) at the first iteration's rate.
    pub fn adam_config(&self) -> AdamWConfig {
        AdamWConfig {
            schedule: LrSchedule::constant(self.lr_at(0)),
            beta1: 0.9,
            beta2: 0.999,
            eps: self.adam_eps,
            weight_decay: 0.0,
            max_grad_norm: (self.max_grad_norm > 0.0).then_some(self.max_grad_norm),
        }
    }
}
