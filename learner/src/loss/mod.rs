//! The PPO objective the learner minimises: the clipped surrogate with asymmetric clipping,
//! staleness-corrected by truncated importance weights, plus an optional KL penalty to a
//! frozen reference policy (k3), an entropy bonus and a (clipped) value loss. Every token term
//! is aggregated as **sequence-mean of token-mean**, as in the paper's code.
//!
//! ## Staleness correction: our reading
//!
//! Three policies meet in an asynchronous update:
//!
//! ```text
//!  π_behaviour  generated the trajectory (its log-probs travel with it; version v − s)
//!  π_prox       the learner's weights at the start of this update (log-probs recomputed
//!               without gradient; version v)
//!  π_θ          the weights being optimised
//!
//!  per token:  r = π_θ / π_prox                       PPO ratio, clipped to [1 − lo, 1 + hi]
//!              w = min(π_prox / π_behaviour, is_cap)  truncated importance weight, no gradient
//!              loss = w · max(−A·r, −A·clip(r))
//! ```
//!
//! This is the decoupled PPO objective (Hilton et al. 2021; AReaL uses it for stale rollouts)
//! with the IMPALA/V-trace-style truncation of the behaviour weight, which is also the
//! truncated importance sampling that corrects sampler/trainer numeric mismatch (Yao et al.
//! 2025, cap 2). The trust region is kept around the learner's own current policy, so a stale
//! trajectory does not have every token clipped; its off-policyness enters through `w`, whose
//! truncation bounds the variance (and the bias is bounded by how stale we let data get:
//! trajectories more than `max_staleness` versions old are dropped before this, see
//! [`crate::staleness`]). When `prox_logp` is not given, π_prox = π_behaviour: `w = 1` and this
//! is standard PPO with the behaviour log-probs as the "old" ones.

pub mod terms;

use tch::{Kind, Tensor};

use crate::error::{LearnerError, Result};
use terms::{clipped_surrogate, kl_k3, seq_mean_token_mean, token_mean, truncated_importance_weights, value_loss};

/// Coefficients of the objective; see [`crate::config::LearnerConfig`] for the defaults.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LossConfig {
    /// The ratio's lower clip: `1 − clip_low`.
    pub clip_low: f64,
    /// The ratio's upper clip: `1 + clip_high` (larger than `clip_low`: "clip-higher").
    pub clip_high: f64,
    /// Weight of the KL penalty to the reference policy (used when `ref_logp` is given).
    pub kl_coef: f64,
    /// Weight of the entropy bonus (subtracted; used when `entropy` is given).
    pub entropy_coef: f64,
    /// Weight of the value loss (used when `value` is given).
    pub value_coef: f64,
    /// Value clipping range around the old values; `None` for the plain squared error.
    pub value_clip: Option<f64>,
    /// Cap on the importance weight `π_prox / π_behaviour`.
    pub is_cap: f64,
}

impl Default for LossConfig {
    fn default() -> Self {
        Self {
            clip_low: 0.2,
            clip_high: 0.28,
            kl_coef: 0.001,
            entropy_coef: 0.0,
            value_coef: 0.5,
            value_clip: Some(0.2),
            is_cap: 2.0,
        }
    }
}

/// The value head's inputs (GAE runs).
#[derive(Debug, Clone, Copy)]
pub struct ValueInputs<'a> {
    /// The critic's current values, with gradient.
    pub values: &'a Tensor,
    /// The values when the data was collected (the centre of the value clip).
    pub old_values: &'a Tensor,
    /// The targets (GAE returns).
    pub returns: &'a Tensor,
}

/// What the objective is computed from; every tensor is `[B, T]` on one device.
#[derive(Debug, Clone, Copy)]
pub struct LossInputs<'a> {
    /// Log-probs of the taken tokens under π_θ, with gradient.
    pub logp: &'a Tensor,
    /// The behaviour log-probs the trajectories carry.
    pub behaviour_logp: &'a Tensor,
    /// Log-probs under the learner's weights at the start of the update (no gradient); `None`
    /// means the behaviour policy is the proximal one.
    pub prox_logp: Option<&'a Tensor>,
    /// Per-token advantages.
    pub advantages: &'a Tensor,
    /// Which tokens are trained on (bool or 0/1 float).
    pub mask: &'a Tensor,
    /// Log-probs under the frozen reference policy, for the KL penalty.
    pub ref_logp: Option<&'a Tensor>,
    /// Per-token entropy of π_θ (with gradient), for the entropy bonus.
    pub entropy: Option<&'a Tensor>,
    /// The value head's inputs.
    pub value: Option<ValueInputs<'a>>,
}

/// The objective and its parts; scalars (0-d tensors) on the inputs' device. Only `total`
/// carries gradient; read the rest with [`LossParts::stats`] (which synchronises).
#[derive(Debug)]
pub struct LossParts {
    /// What to call `backward` on: `policy + kl_coef·kl − entropy_coef·entropy + value_coef·value`.
    pub total: Tensor,
    /// The clipped, importance-weighted surrogate.
    pub policy: Tensor,
    /// The mean k3 KL to the reference (0 without one).
    pub kl: Tensor,
    /// The mean entropy (0 when not given).
    pub entropy: Tensor,
    /// The value loss (0 without a value head).
    pub value: Tensor,
    /// Fraction of trained tokens whose clipped branch was active.
    pub clip_fraction: Tensor,
    /// Of those, the fraction clipped at the lower bound (ratio below 1 − clip_low, A < 0).
    pub clip_low_fraction: Tensor,
    /// Of those, the fraction clipped at the upper bound (ratio above 1 + clip_high, A > 0).
    pub clip_high_fraction: Tensor,
    /// KL(π_old ‖ π_θ) over trained tokens as CleanRL's `approx_kl`, `(r − 1) − log r`, π_old
    /// being the proximal policy (the ratio's reference): 0 on a batch's first step by
    /// construction, how far the update moved after.
    pub approx_kl: Tensor,
    /// KL(π_behaviour ‖ π_θ) over trained tokens (k3): how far the policy being trained is
    /// from the one that sampled the tokens (staleness plus this update's movement).
    pub kl_behaviour: Tensor,
    /// Mean truncated importance weight over trained tokens (1 without `prox_logp`).
    pub is_weight_mean: Tensor,
    /// Fraction of trained tokens whose importance weight was truncated.
    pub is_truncated_fraction: Tensor,
    /// Trained tokens in the batch.
    pub tokens: Tensor,
}

/// [`LossParts`] read out as numbers, for logs and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LossStats {
    /// See [`LossParts::total`].
    pub total: f64,
    /// See [`LossParts::policy`].
    pub policy: f64,
    /// See [`LossParts::kl`].
    pub kl: f64,
    /// See [`LossParts::entropy`].
    pub entropy: f64,
    /// See [`LossParts::value`].
    pub value: f64,
    /// See [`LossParts::clip_fraction`].
    pub clip_fraction: f64,
    /// See [`LossParts::clip_low_fraction`].
    pub clip_low_fraction: f64,
    /// See [`LossParts::clip_high_fraction`].
    pub clip_high_fraction: f64,
    /// See [`LossParts::approx_kl`].
    pub approx_kl: f64,
    /// See [`LossParts::kl_behaviour`].
    pub kl_behaviour: f64,
    /// See [`LossParts::is_weight_mean`].
    pub is_weight_mean: f64,
    /// See [`LossParts::is_truncated_fraction`].
    pub is_truncated_fraction: f64,
    /// See [`LossParts::tokens`].
    pub tokens: f64,
}

impl LossParts {
    /// Every part as an `f64` (one read from the device: [`LossParts::stats_tensor`]).
    pub fn stats(&self) -> LossStats {
        LossStats::from_tensor(&self.stats_tensor())
    }

    /// Every part, detached, in one f64 tensor `[13]` on the parts' device, in
    /// [`LossStats::from_tensor`]'s order: what a caller sums over micro-batches without
    /// reading the device (each read waits for the device to finish its queue).
    pub fn stats_tensor(&self) -> Tensor {
        let parts = [
            &self.total,
            &self.policy,
            &self.kl,
            &self.entropy,
            &self.value,
            &self.clip_fraction,
            &self.clip_low_fraction,
            &self.clip_high_fraction,
            &self.approx_kl,
            &self.kl_behaviour,
            &self.is_weight_mean,
            &self.is_truncated_fraction,
            &self.tokens,
        ];
        let parts: Vec<Tensor> = parts.iter().map(|t| t.detach().to_kind(Kind::Double).reshape([1])).collect();
        Tensor::cat(&parts, 0)
    }
}

impl LossStats {
    /// The number of parts in [`LossParts::stats_tensor`].
    pub const PARTS: usize = 13;

    /// From a [`LossParts::stats_tensor`] (or a weighted sum of them): one device read.
    pub fn from_tensor(t: &Tensor) -> Self {
        let v: Vec<f64> =
            Vec::try_from(t.to_kind(Kind::Double).to_device(tch::Device::Cpu).reshape([-1])).unwrap_or_default();
        let at = |i: usize| v.get(i).copied().unwrap_or(f64::NAN);
        Self {
            total: at(0),
            policy: at(1),
            kl: at(2),
            entropy: at(3),
            value: at(4),
            clip_fraction: at(5),
            clip_low_fraction: at(6),
            clip_high_fraction: at(7),
            approx_kl: at(8),
            kl_behaviour: at(9),
            is_weight_mean: at(10),
            is_truncated_fraction: at(11),
            tokens: at(12),
        }
    }
}

fn check_shape(name: &str, t: &Tensor, want: &[i64]) -> Result<()> {
    if t.size() != want {
        return Err(LearnerError::Shape(format!("{name} has shape {:?}, the mask {want:?}", t.size())));
    }
    Ok(())
}

/// The PPO objective over a batch (see the module header for the staleness correction).
pub fn ppo_loss(inputs: &LossInputs<'_>, config: &LossConfig) -> Result<LossParts> {
    let shape = inputs.mask.size();
    if shape.len() != 2 {
        return Err(LearnerError::Shape(format!("the mask must be [B, T], found {shape:?}")));
    }
    let optional = [("prox_logp", inputs.prox_logp), ("ref_logp", inputs.ref_logp), ("entropy", inputs.entropy)];
    let value = inputs.value.map(|v| [("values", v.values), ("old_values", v.old_values), ("returns", v.returns)]);
    let named = [("logp", inputs.logp), ("behaviour_logp", inputs.behaviour_logp), ("advantages", inputs.advantages)];
    for (name, t) in named.into_iter().chain(optional.into_iter().filter_map(|(n, t)| t.map(|t| (n, t)))) {
        check_shape(name, t, &shape)?;
    }
    for (name, t) in value.into_iter().flatten() {
        check_shape(name, t, &shape)?;
    }

    let on = inputs.mask.to_kind(Kind::Bool);
    let mask = on.to_kind(Kind::Float);
    // Padding may hold anything (even -inf); zero it first so no NaN reaches a gradient.
    let clean = |t: &Tensor| t.to_kind(Kind::Float).where_scalarother(&on, 0.0);
    let logp = clean(inputs.logp);
    let behaviour = clean(inputs.behaviour_logp).detach();
    let advantages = clean(inputs.advantages).detach();
    let zero = || Tensor::zeros([], (Kind::Float, logp.device()));

    let (old, weights, truncated) = match inputs.prox_logp {
        Some(prox) => {
            let prox = clean(prox).detach();
            let (w, truncated) = truncated_importance_weights(&prox, &behaviour, config.is_cap);
            (prox, w, truncated)
        }
        None => (behaviour.shallow_clone(), mask.ones_like(), mask.zeros_like()),
    };
    let (surrogate, clip_active) = clipped_surrogate(&logp, &old, &advantages, config.clip_low, config.clip_high);
    let policy = seq_mean_token_mean(&(&weights * surrogate), &mask);

    let kl = match inputs.ref_logp {
        Some(r) => seq_mean_token_mean(&kl_k3(&logp, &clean(r).detach()), &mask),
        None => zero(),
    };
    let entropy = match inputs.entropy {
        Some(e) => seq_mean_token_mean(&clean(e), &mask),
        None => zero(),
    };
    let value = match inputs.value {
        Some(v) => {
            let (values, old_values, returns) = (clean(v.values), clean(v.old_values), clean(v.returns));
            seq_mean_token_mean(&value_loss(&values, &old_values.detach(), &returns.detach(), config.value_clip), &mask)
        }
        None => zero(),
    };
    let total = &policy + &kl * config.kl_coef - &entropy * config.entropy_coef + &value * config.value_coef;
    let (approx_kl, kl_behaviour, clip_low, clip_high) = tch::no_grad(|| {
        let above = logp.gt_tensor(&old).to_kind(Kind::Float);
        (
            token_mean(&kl_k3(&old, &logp), &mask),
            token_mean(&kl_k3(&behaviour, &logp), &mask),
            token_mean(&(&clip_active * (1.0 - &above)), &mask),
            token_mean(&(&clip_active * &above), &mask),
        )
    });
    Ok(LossParts {
        total,
        policy: policy.detach(),
        kl: kl.detach(),
        entropy: entropy.detach(),
        value: value.detach(),
        clip_fraction: token_mean(&clip_active, &mask),
        clip_low_fraction: clip_low,
        clip_high_fraction: clip_high,
        approx_kl,
        kl_behaviour,
        is_weight_mean: token_mean(&weights, &mask),
        is_truncated_fraction: token_mean(&truncated, &mask),
        tokens: mask.sum(Kind::Float),
    })
}
