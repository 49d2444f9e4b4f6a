//! One iteration's learning step: rewards (per feedback mode, from [`crate::reward`]), GRPO
//! advantages per group, then the PPO loss with the behaviour log-probs the episodes carry,
//! over `epochs` passes of `minibatches` updates each.
//!
//! ```text
//!  episodes ─ ScoredTrajectory (Verdict::NotRequested) ─ reward::rewards ─ grpo_advantages
//!     ─ drop zero-advantage trajectories (optional) ─ split into minibatches
//!     ─ per minibatch: logp at the sampling temperature ─ ppo_loss ─ backward ─ AdamW
//! ```

use policy::{CausalLm, Tokenizer};
use protocol::wire::{ScoredTrajectory, Verdict};
use tch::Device;

use super::config::InprocConfig;
use crate::advantage::{group_key, grpo_advantages, token_advantages};
use crate::episode::{flatten, EpisodeResult, Sequence, TokenBatch};
use crate::error::Result;
use crate::loss::{ppo_loss, LossInputs, LossStats};
use crate::optim::AdamW;
use crate::reward::rewards;

/// What the learning step of one iteration did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UpdateOutcome {
    /// Mean reward (outcome, plus λ·score where the mode uses it) of all trajectories.
    pub mean_reward: f64,
    /// Trajectories trained on (non-zero advantage, unless zero ones are kept).
    pub trained_trajectories: usize,
    /// Optimizer updates applied.
    pub updates: usize,
    /// Tokens through forward and backward (all positions of trained sequences, per pass).
    pub train_tokens: usize,
    /// The loss parts, averaged over the updates (zero when nothing was trained on).
    pub loss: LossStats,
    /// The gradient norm before clipping, averaged over the updates.
    pub grad_norm: f64,
    /// The last update's learning rate.
    pub lr: f64,
}

/// Scores `episodes`, computes GRPO advantages and applies the PPO updates to `model`.
pub fn learn(
    model: &CausalLm,
    reference: Option<&CausalLm>,
    tokenizer: &dyn Tokenizer,
    opt: &mut AdamW,
    episodes: &[EpisodeResult],
    cfg: &InprocConfig,
) -> Result<UpdateOutcome> {
    let lc = &cfg.learner;
    let scored: Vec<ScoredTrajectory> = episodes
        .iter()
        .map(|e| ScoredTrajectory { trajectory: e.trajectory.clone(), verdict: Verdict::NotRequested })
        .collect();
    let totals: Vec<f32> = rewards(&scored, lc.feedback, lc.score_weight).iter().map(|r| r.total).collect();
    let keys: Vec<_> = scored.iter().map(|s| group_key(&s.trajectory, lc.separate_attempt_groups)).collect();
    let advantages = grpo_advantages(&totals, &keys, lc.grpo_eps, lc.grpo_std_normalize)?;
    let zero = LossStats {
        total: 0.0,
        policy: 0.0,
        kl: 0.0,
        entropy: 0.0,
        value: 0.0,
        clip_fraction: 0.0,
        approx_kl: 0.0,
        is_weight_mean: 0.0,
        is_truncated_fraction: 0.0,
        tokens: 0.0,
    };
    let mut out = UpdateOutcome {
        mean_reward: totals.iter().map(|&r| f64::from(r)).sum::<f64>() / totals.len().max(1) as f64,
        trained_trajectories: 0,
        updates: 0,
        train_tokens: 0,
        loss: zero,
        grad_norm: 0.0,
        lr: 0.0,
    };
    let mut kept: Vec<(Sequence, f32)> = Vec::new();
    for (s, &a) in scored.iter().zip(&advantages) {
        if a != 0.0 || !cfg.skip_zero_advantage {
            kept.push((flatten(&s.trajectory)?, a));
        }
    }
    out.trained_trajectories = kept.len();
    if kept.is_empty() {
        return Ok(out);
    }
    let loss_cfg = lc.loss_config();
    let chunk = kept.len().div_ceil(cfg.minibatches);
    let pad = tokenizer.special_ids().pad;
    let temperature = cfg.rollout.temperature;
    for _ in 0..cfg.epochs {
        for part in kept.chunks(chunk) {
            let seqs: Vec<&Sequence> = part.iter().map(|(s, _)| s).collect();
            let adv: Vec<f32> = part.iter().map(|(_, a)| *a).collect();
            let batch = TokenBatch::new(&seqs, pad, Device::Cpu)?;
            let adv = token_advantages(&adv, &batch.target_mask)?;
            let ref_logp = match reference.filter(|_| loss_cfg.kl_coef > 0.0) {
                Some(r) => Some(tch::no_grad(|| batch.logprobs(r, temperature))?),
                None => None,
            };
            opt.zero_grad();
            let logp = batch.logprobs(model, temperature)?;
            let parts = ppo_loss(
                &LossInputs {
                    logp: &logp,
                    behaviour_logp: &batch.behaviour_logp,
                    prox_logp: None,
                    advantages: &adv,
                    mask: &batch.target_mask,
                    ref_logp: ref_logp.as_ref(),
                    entropy: None,
                    value: None,
                },
                &loss_cfg,
            )?;
            parts.total.backward();
            let step = opt.step()?;
            out.updates += 1;
            out.train_tokens += batch.tokens;
            let stats = parts.stats();
            let n = out.updates as f64;
            let avg = |mean: &mut f64, x: f64| *mean += (x - *mean) / n;
            let l = &mut out.loss;
            for (mean, x) in [
                (&mut l.total, stats.total),
                (&mut l.policy, stats.policy),
                (&mut l.kl, stats.kl),
                (&mut l.clip_fraction, stats.clip_fraction),
                (&mut l.approx_kl, stats.approx_kl),
                (&mut l.is_weight_mean, stats.is_weight_mean),
                (&mut l.tokens, stats.tokens),
            ] {
                avg(mean, x);
            }
            avg(&mut out.grad_norm, step.grad_norm);
            out.lr = step.lr;
        }
    }
    Ok(out)
}
