//! The per-token terms of the PPO objective and the masked aggregations, each a small
//! function so that each can be checked against an independent computation.
//!
//! Every tensor is `[B, T]` (sequences × tokens) unless said otherwise; masks are float 0/1.

use tch::{Kind, Tensor};

/// Log-ratios are clamped to ±20 before `exp`, as veRL does, so stale or padded tokens cannot
/// overflow to infinity.
pub const LOG_RATIO_CLAMP: f64 = 20.0;
/// The k3 estimate is clamped to at most 10 per token, as in veRL's `low_var_kl`.
pub const KL_CLAMP: f64 = 10.0;

/// Sequence-mean of token-mean: the mean of `x` over each sequence's masked tokens, then the
/// mean over sequences that have at least one. Sequences without trained tokens are left out;
/// an all-masked or empty batch gives exactly 0 (never NaN), still connected to the graph.
pub fn seq_mean_token_mean(x: &Tensor, mask: &Tensor) -> Tensor {
    let counts = mask.sum_dim_intlist(1, false, Kind::Float);
    let per_seq = (x * mask).sum_dim_intlist(1, false, Kind::Float) / counts.clamp_min(1.0);
    let present = counts.gt(0.0).to_kind(Kind::Float);
    (per_seq * &present).sum(Kind::Float) / present.sum(Kind::Float).clamp_min(1.0)
}

/// The mean of `x` over all masked tokens of the batch (0 when there are none); used for
/// statistics such as the clip fraction.
pub fn token_mean(x: &Tensor, mask: &Tensor) -> Tensor {
    (x * mask).sum(Kind::Float) / mask.sum(Kind::Float).clamp_min(1.0)
}

/// The PPO clipped surrogate with asymmetric bounds, per token, as a loss to minimise:
/// `max(−A·r, −A·clip(r, 1 − clip_low, 1 + clip_high))` with `r = exp(logp − old_logp)`.
/// Also returns, per token, whether the clipped branch was the active one (1.0) or not.
pub fn clipped_surrogate(
    logp: &Tensor,
    old_logp: &Tensor,
    advantages: &Tensor,
    clip_low: f64,
    clip_high: f64,
) -> (Tensor, Tensor) {
    let ratio = (logp - old_logp).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP).exp();
    let unclipped = -advantages * &ratio;
    let clipped = -advantages * ratio.clamp(1.0 - clip_low, 1.0 + clip_high);
    let active = clipped.gt_tensor(&unclipped).to_kind(Kind::Float);
    (unclipped.maximum(&clipped), active)
}

/// Truncated importance weights for staleness, per token and without gradient:
/// `w = min(π_prox / π_behaviour, cap)` = `min(exp(prox_logp − behaviour_logp), cap)`.
/// Also returns, per token, whether the weight was truncated (1.0) or not.
pub fn truncated_importance_weights(prox_logp: &Tensor, behaviour_logp: &Tensor, cap: f64) -> (Tensor, Tensor) {
    let raw = (prox_logp - behaviour_logp).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP).exp().detach();
    let truncated = raw.gt(cap).to_kind(Kind::Float);
    (raw.clamp_max(cap), truncated)
}

/// The low-variance "k3" estimator of KL(π_θ ‖ π_ref) per token (Schulman 2020):
/// `exp(ref − logp) − (ref − logp) − 1`, non-negative, with veRL's clamps (log-ratio to ±20,
/// the estimate to at most 10).
pub fn kl_k3(logp: &Tensor, ref_logp: &Tensor) -> Tensor {
    let log_ratio = (ref_logp - logp).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP);
    (log_ratio.exp() - &log_ratio - 1.0).clamp(-KL_CLAMP, KL_CLAMP)
}

/// The entropy of each position's categorical distribution: `[B, T, V]` logits → `[B, T]`.
pub fn token_entropy(logits: &Tensor) -> Tensor {
    let logp = logits.log_softmax(-1, Kind::Float);
    -(logp.exp() * &logp).sum_dim_intlist(-1, false, Kind::Float)
}

/// The value loss per element: `½(v − R)²`, or with `clip = Some(c)` the pessimistic
/// `½·max((v − R)², (v_old + clamp(v − v_old, −c, c) − R)²)` of PPO (as in CleanRL).
pub fn value_loss(values: &Tensor, old_values: &Tensor, returns: &Tensor, clip: Option<f64>) -> Tensor {
    let unclipped = (values - returns).square();
    match clip {
        None => unclipped * 0.5,
        Some(c) => {
            let v_clipped = old_values + (values - old_values).clamp(-c, c);
            unclipped.maximum(&(v_clipped - returns).square()) * 0.5
        }
    }
}

/// Advantages whitened over the masked tokens: `(a − mean) / (std + 1e-8)` with the unbiased
/// std, as CleanRL does per minibatch; masked-out tokens become 0. Fewer than two tokens: the
/// input, masked.
pub fn whiten(advantages: &Tensor, mask: &Tensor) -> Tensor {
    let n = mask.sum(Kind::Float);
    let mean = (advantages * mask).sum(Kind::Float) / n.clamp_min(1.0);
    let centred = (advantages - &mean) * mask;
    let var = centred.square().sum(Kind::Float) / (&n - 1.0).clamp_min(1.0);
    let whitened = &centred / (var.sqrt() + 1e-8);
    let enough = n.ge(2.0).to_kind(Kind::Float);
    &whitened * &enough + advantages * mask * (1.0 - enough)
}
