//! The PPO update over one rollout: `update_epochs` passes over the batch in shuffled
//! minibatches, each a step of the crate's [`ppo_loss`] (one-token "sequences", so its
//! sequence-mean of token-mean is the plain minibatch mean CleanRL takes) and [`AdamW`].
//!
//! Data stays in `Vec`s; each minibatch gathers its rows in Rust and makes its tensors once.

use policy::mlp::{MlpPolicy, SampleRng};
use tch::Tensor;

use super::rollout::{Rollout, OBS_DIM};
use crate::advantage::Gae;
use crate::error::Result;
use crate::loss::terms::whiten;
use crate::loss::{ppo_loss, LossConfig, LossInputs, LossParts, LossStats, ValueInputs};
use crate::optim::{AdamW, AdamWConfig, LrSchedule, Param, StepStats};

/// How one update runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UpdateConfig {
    /// Passes over the batch.
    pub epochs: usize,
    /// Minibatches per pass (the batch length must be a multiple).
    pub minibatches: usize,
    /// Whiten advantages per minibatch (CleanRL's `norm_adv`).
    pub normalize_advantages: bool,
    /// The objective's coefficients.
    pub loss: LossConfig,
}

/// The last minibatch's loss parts and optimizer step (what CleanRL logs per iteration).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UpdateOutcome {
    /// The loss parts of the last minibatch.
    pub loss: LossStats,
    /// The last optimizer step.
    pub step: StepStats,
}

/// A minibatch's tensors, advantages already whitened when the update whitens them; per-sample
/// values are `[M, 1]` (one token per sequence).
struct Minibatch {
    obs: Tensor,
    actions: Tensor,
    logprobs: Tensor,
    values: Tensor,
    advantages: Tensor,
    returns: Tensor,
    mask: Tensor,
}

impl Minibatch {
    /// The rows `rows` of the rollout (all of it, in order, for `None`).
    fn gather(rollout: &Rollout, gae: &Gae, rows: Option<&[usize]>, whiten_advantages: bool) -> Self {
        let pick = |src: &[f32]| -> Vec<f32> {
            match rows {
                Some(rows) => rows.iter().map(|&i| src[i]).collect(),
                None => src.to_vec(),
            }
        };
        let column = |src: &[f32]| Tensor::from_slice(&pick(src)).unsqueeze(1);
        let (obs, actions): (Vec<f32>, Vec<i64>) = match rows {
            Some(rows) => (
                rows.iter().flat_map(|&i| &rollout.obs[i * OBS_DIM..(i + 1) * OBS_DIM]).copied().collect(),
                rows.iter().map(|&i| rollout.actions[i]).collect(),
            ),
            None => (rollout.obs.clone(), rollout.actions.clone()),
        };
        let advantages = column(&gae.advantages);
        let mask = advantages.ones_like();
        Self {
            obs: Tensor::from_slice(&obs).view([actions.len() as i64, OBS_DIM as i64]),
            actions: Tensor::from_slice(&actions),
            logprobs: column(&rollout.logprobs),
            values: column(&rollout.values),
            advantages: if whiten_advantages { whiten(&advantages, &mask) } else { advantages },
            returns: column(&gae.returns),
            mask,
        }
    }
}

/// Fisher–Yates shuffle drawing from `rng` (the minibatch order; libtorch's generator is not
/// touched, so a run is reproducible whatever else uses it).
pub fn shuffle(order: &mut [usize], rng: &mut SampleRng) {
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i + 1));
    }
}

/// A minibatch's objective, with gradient; the entropy term only `with_entropy` (with a zero
/// coefficient it moves nothing, so the training steps leave it out of the graph).
fn minibatch_loss(policy: &MlpPolicy, mb: &Minibatch, cfg: &UpdateConfig, with_entropy: bool) -> Result<LossParts> {
    let (logp, entropy, values) = policy.evaluate(&mb.obs, &mb.actions);
    ppo_loss(
        &LossInputs {
            logp: &logp.unsqueeze(1),
            behaviour_logp: &mb.logprobs,
            prox_logp: None,
            advantages: &mb.advantages,
            mask: &mb.mask,
            ref_logp: None,
            entropy: with_entropy.then(|| entropy.unsqueeze(1)).as_ref(),
            value: Some(ValueInputs { values: &values.unsqueeze(1), old_values: &mb.values, returns: &mb.returns }),
        },
        &cfg.loss,
    )
}

/// One minibatch step: the loss, its gradient, one optimizer step. Only when `report` are the
/// loss parts read back (and the entropy computed whatever its coefficient): what the
/// iteration logs is the last step's.
fn minibatch_step(
    policy: &MlpPolicy,
    opt: &mut AdamW,
    mb: &Minibatch,
    cfg: &UpdateConfig,
    report: bool,
) -> Result<Option<UpdateOutcome>> {
    let parts = minibatch_loss(policy, mb, cfg, report || cfg.loss.entropy_coef != 0.0)?;
    opt.zero_grad();
    parts.total.backward();
    let step = opt.step()?;
    Ok(report.then(|| UpdateOutcome { loss: parts.stats(), step }))
}

/// The objective over the whole rollout as one minibatch, without gradient (advantages
/// whitened over the batch when the update whitens them): for checking what an update did.
pub fn batch_loss(policy: &MlpPolicy, rollout: &Rollout, gae: &Gae, cfg: &UpdateConfig) -> Result<LossStats> {
    let mb = Minibatch::gather(rollout, gae, None, cfg.normalize_advantages);
    tch::no_grad(|| Ok(minibatch_loss(policy, &mb, cfg, true)?.stats()))
}

/// Runs the PPO epochs over `rollout` with its GAE `gae`; returns the last minibatch's
/// outcome (`None` for an empty rollout). With one minibatch the whole batch is every epoch's
/// minibatch: its tensors are made once and no order is drawn.
pub fn ppo_update(
    policy: &MlpPolicy,
    opt: &mut AdamW,
    rollout: &Rollout,
    gae: &Gae,
    cfg: &UpdateConfig,
    rng: &mut SampleRng,
) -> Result<Option<UpdateOutcome>> {
    if rollout.is_empty() {
        return Ok(None);
    }
    let mut last = None;
    if cfg.minibatches <= 1 {
        let mb = Minibatch::gather(rollout, gae, None, cfg.normalize_advantages);
        for epoch in 0..cfg.epochs {
            last = minibatch_step(policy, opt, &mb, cfg, epoch + 1 == cfg.epochs)?;
        }
        return Ok(last);
    }
    let mut order: Vec<usize> = (0..rollout.len()).collect();
    let size = (rollout.len() / cfg.minibatches).max(1);
    for epoch in 0..cfg.epochs {
        shuffle(&mut order, rng);
        let chunks = order.chunks(size).count();
        for (k, rows) in order.chunks(size).enumerate() {
            let mb = Minibatch::gather(rollout, gae, Some(rows), cfg.normalize_advantages);
            last = minibatch_step(policy, opt, &mb, cfg, epoch + 1 == cfg.epochs && k + 1 == chunks)?;
        }
    }
    Ok(last)
}

/// The same optimizer (parameters, moments, step count) at a new constant learning rate: how
/// CleanRL's per-iteration linear annealing (`lr · (1 − (i − 1)/iterations)`) is applied to an
/// [`AdamW`] whose schedule is a function of its own step count.
pub fn with_lr(opt: &AdamW, lr: f64) -> Result<AdamW> {
    let params = opt
        .params()
        .iter()
        .map(|p| Param { name: p.name.clone(), tensor: p.tensor.shallow_clone(), decay: p.decay })
        .collect();
    let config = AdamWConfig { schedule: LrSchedule::constant(lr), ..*opt.config() };
    let mut next = AdamW::new(params, config);
    next.load_state(&opt.state())?;
    Ok(next)
}

/// Explained variance of the value predictions, `1 − Var(returns − values) / Var(returns)`, as
/// CleanRL logs it; NaN when the returns do not vary.
pub fn explained_variance(values: &[f32], returns: &[f32]) -> f64 {
    let var = |xs: &mut dyn Iterator<Item = f64>| {
        let v: Vec<f64> = xs.collect();
        let mean = v.iter().sum::<f64>() / v.len().max(1) as f64;
        v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / v.len().max(1) as f64
    };
    let var_returns = var(&mut returns.iter().map(|&r| r as f64));
    let var_residual = var(&mut returns.iter().zip(values).map(|(&r, &v)| (r - v) as f64));
    if var_returns == 0.0 {
        f64::NAN
    } else {
        1.0 - var_residual / var_returns
    }
}
