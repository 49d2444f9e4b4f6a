//! [`CartpoleConfig`]: the PPO hyper-parameters of CleanRL's `ppo.py` (its defaults, with the
//! budget cut to 200,000 steps), typed and checked before a run, and two presets:
//! [`CartpoleConfig::cleanrl`] (CleanRL's run exactly, 500,000 steps) and
//! [`CartpoleConfig::yardstick`] (the 200,000-step run the test holds to ≥ 475).
//!
//! Measured on seeds 1–3 (mean of the last 100 training episodes at the end of the budget):
//!
//! | preset | lr | at 200k steps | at 500k steps | first ≥ 475 |
//! |---|---|---|---|---|
//! | `cleanrl()` (annealed over 500k) | 2.5e-4 | 409, 235, 474 | 500, 500, 500 | 211k, 263k, 180k |
//! | `default()` (annealed over 200k) | 2.5e-4 | 288, 410, 455 | — | never |
//! | `yardstick()` | 1e-3 | 500, 500, 500 | — | 142k, 111k, 122k |
//!
//! With CleanRL's rate the critic cannot grow to the scale of the returns (≈ 100 at γ = 0.99)
//! fast enough for 200,000 steps; the run does end where CleanRL's published one does (492 ± 13
//! at 500k). The yardstick changes that one number to rl-baselines3-zoo's tuned CartPole-v1 rate
//! (1e-3, linearly annealed).

use serde::{Deserialize, Serialize};

use super::update::UpdateConfig;
use crate::error::{LearnerError, Result};
use crate::loss::LossConfig;
use crate::optim::{AdamWConfig, LrSchedule};

/// A CartPole PPO run. Every default is CleanRL `ppo.py`'s except `total_steps` (CleanRL:
/// 500,000) and the symmetric clip written as our `clip_low = clip_high`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CartpoleConfig {
    /// Seeds everything: initial weights, episode resets, action sampling, minibatch order.
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
    /// Minibatches per epoch (default 4).
    pub num_minibatches: usize,
    /// Epochs over each batch (default 4).
    pub update_epochs: usize,
    /// Whiten advantages per minibatch (default true).
    pub norm_adv: bool,
    /// PPO ratio clip, both sides (default 0.2).
    pub clip_coef: f64,
    /// Clip the value loss around the old values by `clip_coef` (default true).
    pub clip_vloss: bool,
    /// Entropy bonus (default 0.01).
    pub ent_coef: f64,
    /// Value-loss weight (default 0.5).
    pub vf_coef: f64,
    /// Global gradient-norm clip (default 0.5).
    pub max_grad_norm: f64,
    /// Adam's ε (default 1e-5, as CleanRL passes to `optim.Adam`).
    pub adam_eps: f64,
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
            clip_vloss: true,
            ent_coef: 0.01,
            vf_coef: 0.5,
            max_grad_norm: 0.5,
            adam_eps: 1e-5,
        }
    }
}

fn check(ok: bool, key: &str, expected: &str, found: impl ToString) -> Result<()> {
    if ok {
        return Ok(());
    }
    Err(LearnerError::Config { key: format!("cartpole.{key}"), expected: expected.into(), found: found.to_string() })
}

impl CartpoleConfig {
    /// CleanRL `ppo.py`'s CartPole-v1 run exactly: the defaults over 500,000 steps.
    pub fn cleanrl() -> Self {
        Self { total_steps: 500_000, ..Self::default() }
    }

    /// The 200,000-step yardstick: the defaults with the learning rate at 1e-3 (see the module
    /// header for why).
    pub fn yardstick() -> Self {
        Self { lr: 1e-3, ..Self::default() }
    }

    /// Environment steps per iteration (`num_envs · num_steps`).
    pub fn batch_size(&self) -> usize {
        self.num_envs * self.num_steps
    }

    /// Iterations the budget allows (CleanRL's `total_timesteps // batch_size`).
    pub fn iterations(&self) -> u64 {
        self.total_steps / self.batch_size().max(1) as u64
    }

    /// The learning rate of iteration `i` (0-based): `lr · (1 − i / iterations)` when annealing.
    pub fn lr_at(&self, i: u64) -> f64 {
        if self.anneal_lr {
            self.lr * (1.0 - i as f64 / self.iterations().max(1) as f64)
        } else {
            self.lr
        }
    }

    /// Checks every value; the error names the key.
    pub fn validate(&self) -> Result<()> {
        check(self.num_envs > 0, "num_envs", "at least 1", self.num_envs)?;
        check(self.num_steps > 0, "num_steps", "at least 1", self.num_steps)?;
        check(self.num_minibatches > 0, "num_minibatches", "at least 1", self.num_minibatches)?;
        let batch = self.batch_size();
        check(
            batch.is_multiple_of(self.num_minibatches),
            "num_minibatches",
            &format!("a divisor of {batch}"),
            self.num_minibatches,
        )?;
        check(self.update_epochs > 0, "update_epochs", "at least 1", self.update_epochs)?;
        check(self.iterations() > 0, "total_steps", &format!("at least one batch ({batch})"), self.total_steps)?;
        check(self.lr > 0.0 && self.lr.is_finite(), "lr", "a positive number", self.lr)?;
        check((0.0..=1.0).contains(&self.gamma), "gamma", "a number in [0, 1]", self.gamma)?;
        check((0.0..=1.0).contains(&self.gae_lambda), "gae_lambda", "a number in [0, 1]", self.gae_lambda)?;
        check(self.clip_coef > 0.0 && self.clip_coef < 1.0, "clip_coef", "a number in (0, 1)", self.clip_coef)?;
        for (key, v) in [("ent_coef", self.ent_coef), ("vf_coef", self.vf_coef), ("max_grad_norm", self.max_grad_norm)]
        {
            check(v >= 0.0 && v.is_finite(), key, "a non-negative number", v)?;
        }
        check(self.adam_eps > 0.0, "adam_eps", "a positive number", self.adam_eps)
    }

    /// The objective: symmetric clip, no KL term, entropy and (clipped) value terms.
    pub fn loss_config(&self) -> LossConfig {
        LossConfig {
            clip_low: self.clip_coef,
            clip_high: self.clip_coef,
            kl_coef: 0.0,
            entropy_coef: self.ent_coef,
            value_coef: self.vf_coef,
            value_clip: self.clip_vloss.then_some(self.clip_coef),
            is_cap: 1.0,
        }
    }

    /// The update's shape.
    pub fn update_config(&self) -> UpdateConfig {
        UpdateConfig {
            epochs: self.update_epochs,
            minibatches: self.num_minibatches,
            normalize_advantages: self.norm_adv,
            loss: self.loss_config(),
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
