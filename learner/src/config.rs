//! The `[learner]` configuration section: typed, with unknown keys refused and a `validate()`
//! that names the bad key. [`LearnerConfig::default`] is the documented default job's section
//! (the text in the test below is what `config/default.toml` carries).

use protocol::config::Section;
use serde::{Deserialize, Serialize};

use crate::checkpoint::{sha256_hex, ResumeMode};
use crate::error::Result;
use crate::loss::LossConfig;
use crate::optim::{AdamWConfig, LrDecay, LrSchedule};
use crate::reward::FeedbackMode;
pub use protocol::config::Precision;

/// The policy the PPO ratio is taken against (the "proximal" policy of decoupled PPO).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Proximal {
    /// The policy at the start of this update (its log-probs detached): the ratio is 1 at the
    /// start, and how far the behaviour policy lagged enters only through the truncated
    /// importance weight. The default for the queue learner, whose trajectories come from many
    /// versions.
    #[default]
    Current,
    /// The behaviour policy itself (classic PPO): the ratio against the log-probs the
    /// trajectories carry is clipped, so tokens the learner has already moved far from the
    /// behaviour policy stop pulling. The in-process trainer's choice (its trajectories are at
    /// most a few minibatch updates old).
    Behaviour,
}

/// Which advantage estimator feeds the PPO loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum AdvantageKind {
    /// Group-normalised outcome rewards (the paper's default; no value head).
    #[default]
    Grpo,
    /// GAE(γ, λ) with the value head (classic PPO).
    Gae,
}

/// `[learner]`: how rewards, advantages, the loss, the optimizer and checkpoints behave.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LearnerConfig {
    /// How the RRM judgement is used: `outcome`, `critique`, `score` or `unified`. Not a key of
    /// `[learner]`: the run-wide `run.feedback` is copied in (default `outcome`).
    #[serde(skip)]
    pub feedback: FeedbackMode,
    /// λ in `outcome + λ·score` (default 0.3, as in the paper's code).
    pub score_weight: f64,
    /// `grpo` (default) or `gae`.
    pub advantage: AdvantageKind,
    /// Normalise initial and refined attempts in separate GRPO groups (default true).
    pub separate_attempt_groups: bool,
    /// Divide GRPO advantages by the group's std (default true; false is Dr. GRPO).
    pub grpo_std_normalize: bool,
    /// ε in `(r − mean) / (std + ε)` (default 1e-6, as veRL).
    pub grpo_eps: f64,
    /// GAE discount γ (default 0.99).
    pub gamma: f64,
    /// GAE λ (default 0.95).
    pub gae_lambda: f64,
    /// PPO ratio lower clip, `1 − clip_low` (default 0.2).
    pub clip_low: f64,
    /// PPO ratio upper clip, `1 + clip_high` (default 0.28, "clip-higher").
    pub clip_high: f64,
    /// KL penalty to the frozen reference policy (default 0.001; 0 disables it and the reference).
    pub kl_coef: f64,
    /// Entropy bonus (default 0).
    pub entropy_coef: f64,
    /// Value-loss weight, GAE only (default 0.5).
    pub value_coef: f64,
    /// Value clipping range, GAE only (default 0.2; 0 disables clipping).
    pub value_clip: f64,
    /// Which policy the PPO ratio is taken against: `current` (default) or `behaviour`.
    pub proximal: Proximal,
    /// Cap of the truncated importance weight π_prox / π_behaviour (default 2.0).
    pub is_cap: f64,
    /// Passes over each batch (default 1).
    pub ppo_epochs: usize,
    /// Optimizer steps per pass: each batch is split along whole GRPO groups into this many
    /// minibatches (default 2, as the released Reagent code; the clip binds from the second).
    pub minibatches: usize,
    /// Leave groups whose rewards are all equal out of the update (default true): they carry no
    /// policy gradient, only compute, and dilute the sequence-mean; counted in
    /// `reagent_learner_flat_groups_total`.
    pub skip_flat_groups: bool,
    /// The kind the model trains in: `auto` (bf16 on CUDA, f32 on the CPU), `f32` or `bf16`.
    /// Master weights and AdamW moments are fp32 whatever this says.
    pub precision: Precision,
    /// Trajectories more than this many policy versions old are dropped (default 4).
    pub max_staleness: u64,
    /// Peak learning rate (default 1e-6, as in the paper's code).
    pub lr: f64,
    /// Linear warm-up updates (default 0).
    pub warmup_steps: u64,
    /// After warm-up: `constant` (default) or `cosine`.
    pub lr_decay: LrDecay,
    /// For `cosine`: the update where the rate reaches its floor (default 0; must exceed
    /// `warmup_steps`). The in-process trainer counts planned updates here (`epochs ×
    /// minibatches` an iteration, taken or not); the warm-up counts updates taken.
    pub total_steps: u64,
    /// For `cosine`: the floor as a fraction of `lr` (default 0).
    pub min_lr_ratio: f64,
    /// AdamW β₁ (default 0.9).
    pub beta1: f64,
    /// AdamW β₂ (default 0.999).
    pub beta2: f64,
    /// AdamW ε (default 1e-8).
    pub adam_eps: f64,
    /// Decoupled weight decay on matrices (default 0.01, as veRL).
    pub weight_decay: f64,
    /// Global gradient-norm clip (default 1.0; 0 disables).
    pub max_grad_norm: f64,
    /// Seed of the learner's RNGs (default 0).
    pub seed: u64,
    /// Publish new weights every this many updates (default 1).
    pub publish_every: u64,
    /// Checkpoint every this many updates (default 10).
    pub checkpoint_every: u64,
    /// Newest checkpoints kept (default 3).
    pub keep_checkpoints: usize,
    /// `auto` (default), `never`, or a checkpoint directory.
    pub resume: ResumeMode,
}

impl Default for LearnerConfig {
    fn default() -> Self {
        Self {
            feedback: FeedbackMode::Outcome,
            score_weight: 0.3,
            advantage: AdvantageKind::Grpo,
            separate_attempt_groups: true,
            grpo_std_normalize: false,
            grpo_eps: 1e-6,
            gamma: 0.99,
            gae_lambda: 0.95,
            clip_low: 0.2,
            clip_high: 0.28,
            kl_coef: 0.001,
            entropy_coef: 0.0,
            value_coef: 0.5,
            value_clip: 0.2,
            proximal: Proximal::Current,
            is_cap: 2.0,
            ppo_epochs: 1,
            minibatches: 2,
            skip_flat_groups: true,
            precision: Precision::Auto,
            max_staleness: 4,
            lr: 1e-4,
            warmup_steps: 0,
            lr_decay: LrDecay::Constant,
            total_steps: 0,
            min_lr_ratio: 0.0,
            beta1: 0.9,
            beta2: 0.999,
            adam_eps: 1e-8,
            weight_decay: 0.01,
            max_grad_norm: 1.0,
            seed: 0,
            publish_every: 1,
            checkpoint_every: 10,
            keep_checkpoints: 3,
            resume: ResumeMode::Auto,
        }
    }
}

/// The sha256 of a configuration's canonical text, recorded in every checkpoint.
pub fn config_hash(canonical: &str) -> String {
    sha256_hex(canonical.as_bytes())
}

/// The section these checks name keys under.
const SECTION: Section<'static> = Section("learner");

fn in_range(key: &str, v: f64, lo: f64, hi: f64, expected: &str) -> Result<()> {
    Ok(SECTION.check(v.is_finite() && v >= lo && v <= hi, key, expected, v)?)
}

impl LearnerConfig {
    /// Checks every value's range; the first problem is returned, naming its key.
    pub fn validate(&self) -> Result<()> {
        const NON_NEG: &str = "a finite number >= 0";
        in_range("score_weight", self.score_weight, 0.0, f64::MAX, NON_NEG)?;
        SECTION.check(self.grpo_eps.is_finite() && self.grpo_eps > 0.0, "grpo_eps", "a number > 0", self.grpo_eps)?;
        in_range("gamma", self.gamma, 0.0, 1.0, "a number in [0, 1]")?;
        in_range("gae_lambda", self.gae_lambda, 0.0, 1.0, "a number in [0, 1]")?;
        SECTION.check(self.clip_low > 0.0 && self.clip_low < 1.0, "clip_low", "a number in (0, 1)", self.clip_low)?;
        SECTION.check(
            self.clip_high > 0.0 && self.clip_high.is_finite(),
            "clip_high",
            "a number > 0",
            self.clip_high,
        )?;
        for (key, v) in [
            ("kl_coef", self.kl_coef),
            ("entropy_coef", self.entropy_coef),
            ("value_coef", self.value_coef),
            ("value_clip", self.value_clip),
            ("weight_decay", self.weight_decay),
            ("max_grad_norm", self.max_grad_norm),
        ] {
            in_range(key, v, 0.0, f64::MAX, NON_NEG)?;
        }
        in_range("is_cap", self.is_cap, 1.0, f64::MAX, "a finite number >= 1")?;
        SECTION.check(self.ppo_epochs >= 1, "ppo_epochs", "an integer >= 1", self.ppo_epochs)?;
        SECTION.check(self.minibatches >= 1, "minibatches", "an integer >= 1", self.minibatches)?;
        SECTION.check(self.lr.is_finite() && self.lr > 0.0, "lr", "a number > 0", self.lr)?;
        if self.lr_decay == LrDecay::Cosine {
            let expected = format!("an integer > warmup_steps ({}) with lr_decay = \"cosine\"", self.warmup_steps);
            SECTION.check(self.total_steps > self.warmup_steps, "total_steps", &expected, self.total_steps)?;
        }
        in_range("min_lr_ratio", self.min_lr_ratio, 0.0, 1.0, "a number in [0, 1]")?;
        SECTION.check(self.beta1 >= 0.0 && self.beta1 < 1.0, "beta1", "a number in [0, 1)", self.beta1)?;
        SECTION.check(self.beta2 >= 0.0 && self.beta2 < 1.0, "beta2", "a number in [0, 1)", self.beta2)?;
        SECTION.check(self.adam_eps.is_finite() && self.adam_eps > 0.0, "adam_eps", "a number > 0", self.adam_eps)?;
        SECTION.check(self.publish_every >= 1, "publish_every", "an integer >= 1", self.publish_every)?;
        SECTION.check(self.checkpoint_every >= 1, "checkpoint_every", "an integer >= 1", self.checkpoint_every)?;
        Ok(SECTION.check(self.keep_checkpoints >= 1, "keep_checkpoints", "an integer >= 1", self.keep_checkpoints)?)
    }

    /// The loss coefficients.
    pub fn loss_config(&self) -> LossConfig {
        LossConfig {
            clip_low: self.clip_low,
            clip_high: self.clip_high,
            kl_coef: self.kl_coef,
            entropy_coef: self.entropy_coef,
            value_coef: self.value_coef,
            value_clip: Some(self.value_clip).filter(|c| *c > 0.0),
            is_cap: self.is_cap,
        }
    }

    /// The optimizer settings.
    pub fn adamw_config(&self) -> AdamWConfig {
        AdamWConfig {
            schedule: LrSchedule {
                peak: self.lr,
                warmup_steps: self.warmup_steps,
                decay: self.lr_decay,
                total_steps: self.total_steps,
                min_lr_ratio: self.min_lr_ratio,
            },
            beta1: self.beta1,
            beta2: self.beta2,
            eps: self.adam_eps,
            weight_decay: self.weight_decay,
            max_grad_norm: Some(self.max_grad_norm).filter(|n| *n > 0.0),
        }
    }
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
