//! One GRPO update of a causal LM on a batch of scored trajectories: the learner's training
//! step, shared by the queue-consuming service ([`crate::service`]) and anything else that
//! trains on [`ScoredTrajectory`] values.
//!
//! ```text
//!  batch ─ reward::rewards (feedback mode) ─ advantage::grpo_advantages (by group key)
//!        ─ whole groups into `minibatches` parts ─ tensors::flatten ─ TokenBatch per micro-batch
//!        ─ π_prox: log-probs of every micro-batch before the first step (no gradient)
//!        ─ `ppo_epochs` × for each minibatch:
//!              forward: log-probs of the sampled tokens at the rollout temperature, the LM
//!                head in chunks, no [B, T, vocab] tensor (policy::head; + entropy, + reference)
//!              ─ loss::ppo_loss(behaviour log-probs carried by the trajectories, π_prox)
//!              ─ backward (micro-batches weighted by their share of sequences; the loss's,
//!                then the head's recomputing phase) ─ AdamW step
//! ```
//!
//! ## The trust region acts
//!
//! One update is `ppo_epochs × minibatches` optimizer steps over the batch (veRL's
//! ppo_mini_batch_size; the released Reagent code takes two minibatch steps per batch). With
//! [`Proximal::Current`], the proximal policy is the learner's before the batch's first step:
//! the PPO ratio `π_θ / π_prox` is 1 on the first minibatch and moves on the later ones, where
//! the clip binds; staleness enters through the truncated importance weight
//! `min(π_prox / π_behaviour, is_cap)` (see [`crate::loss`], decoupled PPO). With a single step
//! (`1 × 1`) the ratio is 1 by construction and no extra forward pass is made for π_prox.
//! With [`Proximal::Behaviour`] the ratio is taken against the behaviour log-probs (classic
//! PPO).
//!
//! Minibatches are cut along whole GRPO groups, in order of first appearance, so each keeps
//! the batch's advantages (a group is normalised against itself only). Micro-batches only bound
//! memory: the loss is sequence-mean of token-mean, so each micro-batch's loss is weighted by
//! its share of its minibatch's trained sequences and the accumulated gradient is the
//! minibatch's.
//!
//! The result depends only on the weights, the optimizer state and the batch in its order;
//! libtorch's generator is re-seeded from `(seed, optimizer step)` first, so a resumed run
//! computes exactly what an uninterrupted one would. Synchronous tch work: call it from a
//! blocking thread.

use std::time::{Duration, Instant};

use policy::{CausalLm, TokenScores};
use protocol::wire::ScoredTrajectory;
use tch::Tensor;

use crate::advantage::{group_key, grpo_advantages, token_advantages};
pub use crate::config::Proximal;
use crate::config::{AdvantageKind, LearnerConfig};
use crate::error::{LearnerError, Result};
use crate::loss::{ppo_loss, LossConfig, LossInputs, LossStats};
use crate::optim::{AdamW, StepStats};
use crate::reward::{rewards, FeedbackMode};
use crate::rng::reseed_torch;
use crate::tensors::{flatten, Sequence, TokenBatch};

/// How an update turns a batch into a loss.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UpdateConfig {
    /// How the RRM verdict enters the reward.
    pub feedback: FeedbackMode,
    /// λ in `outcome + λ·score`.
    pub score_weight: f64,
    /// Initial and refined attempts normalised in separate groups.
    pub separate_attempt_groups: bool,
    /// Divide GRPO advantages by the group's std.
    pub grpo_std_normalize: bool,
    /// ε of the GRPO normalisation.
    pub grpo_eps: f64,
    /// The objective's coefficients.
    pub loss: LossConfig,
    /// The sampling temperature the actors generated at: log-probs are computed at it, so that
    /// they compare with the behaviour log-probs the trajectories carry.
    pub temperature: f64,
    /// The tokenizer's padding id.
    pub pad_id: u32,
    /// Sequences per forward/backward pass (gradients accumulate); 0: no cap on rows.
    pub micro_batch: usize,
    /// Padded positions (rows × longest row) per forward/backward pass; 0: no budget. With a
    /// budget, a minibatch's sequences are taken longest first into micro-batches that fit it
    /// (see [`micro_batches`]): rows of like length, little padding.
    pub micro_batch_tokens: usize,
    /// The run seed libtorch's generator is re-seeded from at each update.
    pub seed: u64,
    /// Which policy the PPO ratio is taken against.
    pub proximal: Proximal,
    /// Passes over the batch.
    pub ppo_epochs: usize,
    /// Optimizer steps per pass: the batch is split along whole groups into this many parts
    /// (fewer when it has fewer groups).
    pub minibatches: usize,
    /// Leave out groups whose rewards are all equal (zero advantage: no policy gradient, only
    /// compute, and they dilute the sequence-mean); they are counted in
    /// [`UpdateStats::flat_groups`].
    pub skip_flat_groups: bool,
}

impl UpdateConfig {
    /// The update of a `[learner]` section; GRPO only (GAE needs a value head and per-token
    /// rewards, which the queue learner does not train yet).
    pub fn new(cfg: &LearnerConfig, temperature: f64, pad_id: u32, micro_batch: usize) -> Result<Self> {
        if cfg.advantage != AdvantageKind::Grpo {
            return Err(LearnerError::config(
                "learner.advantage",
                "\"grpo\" (the LLM learner has no value head yet)",
                format!("{:?}", cfg.advantage).to_lowercase(),
            ));
        }
        if !(temperature.is_finite() && temperature > 0.0) {
            return Err(LearnerError::config(
                "learner.service.temperature",
                "a number > 0 (the actors' sampling temperature)",
                temperature,
            ));
        }
        Ok(Self {
            feedback: cfg.feedback,
            score_weight: cfg.score_weight,
            separate_attempt_groups: cfg.separate_attempt_groups,
            grpo_std_normalize: cfg.grpo_std_normalize,
            grpo_eps: cfg.grpo_eps,
            loss: cfg.loss_config(),
            temperature,
            pad_id,
            micro_batch,
            micro_batch_tokens: 0,
            seed: cfg.seed,
            proximal: cfg.proximal,
            ppo_epochs: cfg.ppo_epochs,
            minibatches: cfg.minibatches,
            skip_flat_groups: cfg.skip_flat_groups,
        })
    }
}

/// What one update did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UpdateStats {
    /// The optimizer's step count after the update.
    pub step: u64,
    /// Trajectories in the batch.
    pub trajectories: usize,
    /// GRPO groups in the batch.
    pub groups: usize,
    /// Groups whose rewards were all equal (zero advantage: no learning signal; a group of one
    /// counts), left out of the steps when `skip_flat_groups`.
    pub flat_groups: usize,
    /// Trajectories the steps trained on (all but the flat groups' when they are skipped).
    pub trained_trajectories: usize,
    /// Tokens in the batch (all positions of every sequence).
    pub tokens: usize,
    /// Tokens trained on.
    pub trained_tokens: usize,
    /// Positions one pass over the trained sequences computes, padding included (Σ over
    /// micro-batches of rows × longest row); `padded_tokens − tokens` is padding.
    pub padded_tokens: usize,
    /// Mean reward (after the feedback mode's mixing).
    pub reward_mean: f64,
    /// Trajectories whose mode asked for an RRM score they did not have.
    pub score_missing: usize,
    /// The objective's parts (micro-batches combined: loss terms by their weight, token
    /// statistics by trained tokens).
    pub loss: LossStats,
    /// The last optimizer step (its gradient norm is the mean over the update's steps).
    pub optimizer: StepStats,
    /// Optimizer steps taken (`ppo_epochs` × minibatches).
    pub steps: usize,
    /// Wall-clock time of the update.
    pub elapsed: Duration,
}

/// The models an update uses: the one trained and, for the KL penalty, a frozen reference.
#[derive(Debug, Clone, Copy)]
pub struct Models<'a> {
    /// The policy being trained (its parameters are the optimizer's).
    pub policy: &'a CausalLm,
    /// The frozen reference policy; `None` leaves the KL term out whatever `kl_coef` says.
    pub reference: Option<&'a CausalLm>,
}

/// One GRPO update on `batch` (see the module header). A non-finite gradient norm stops the
/// update there (steps already taken stay) and returns [`LearnerError::NonFiniteGradient`].
pub fn grpo_update(
    models: Models<'_>,
    opt: &mut AdamW,
    batch: &[ScoredTrajectory],
    cfg: &UpdateConfig,
) -> Result<UpdateStats> {
    let started = Instant::now();
    if batch.is_empty() {
        return Err(LearnerError::Shape("an update needs at least one trajectory".into()));
    }
    let rewards = rewards(batch, cfg.feedback, cfg.score_weight);
    let totals: Vec<f32> = rewards.iter().map(|r| r.total).collect();
    let keys: Vec<_> = batch.iter().map(|st| group_key(&st.trajectory, cfg.separate_attempt_groups)).collect();
    let advantages = grpo_advantages(&totals, &keys, cfg.grpo_eps, cfg.grpo_std_normalize)?;
    let sequences = batch.iter().map(|st| flatten(&st.trajectory)).collect::<Result<Vec<Sequence>>>()?;
    // A sequence counts in the sequence-mean when a token after its first is trained on.
    let present: Vec<bool> = sequences.iter().map(|s| s.loss_mask.iter().skip(1).any(|m| *m)).collect();

    let flat = flat_keys(&keys, &totals);
    let trained: Vec<usize> =
        (0..batch.len()).filter(|&i| !(cfg.skip_flat_groups && flat.contains(&keys[i]))).collect();

    reseed_torch(cfg.seed, opt.steps());
    let trained_keys: Vec<_> = trained.iter().map(|&i| keys[i]).collect();
    let parts: Vec<Vec<usize>> = minibatch_parts(&trained_keys, cfg.minibatches)
        .into_iter()
        .map(|p| p.into_iter().map(|j| trained[j]).collect())
        .collect();
    let lengths: Vec<usize> = sequences.iter().map(|s| s.ids.len()).collect();
    let device = models.policy.device();
    let mut minibatches = Vec::with_capacity(parts.len());
    let mut padded_tokens = 0;
    for part in &parts {
        let in_part = part.iter().filter(|&&i| present[i]).count().max(1) as f64;
        let mut micros = Vec::new();
        for chunk in micro_batches(part, &lengths, cfg.micro_batch, cfg.micro_batch_tokens) {
            let chunk = chunk.as_slice();
            let refs: Vec<&Sequence> = chunk.iter().map(|&i| &sequences[i]).collect();
            let tokens = TokenBatch::new(&refs, cfg.pad_id, device)?;
            padded_tokens += tokens.padded_positions();
            let adv: Vec<f32> = chunk.iter().map(|&i| advantages[i]).collect();
            let advantages = token_advantages(&adv, &tokens.target_mask)?;
            let weight = chunk.iter().filter(|&&i| present[i]).count() as f64 / in_part;
            micros.push(Micro { tokens, advantages, weight, prox: None });
        }
        minibatches.push(micros);
    }
    // Nothing to train (every group flat and skipped): no minibatch, no step.
    let epochs = cfg.ppo_epochs.max(1);
    let steps = epochs * minibatches.len();
    // π_prox before the first step; with a single step it is the step's own forward, detached.
    if cfg.proximal == Proximal::Current && steps > 1 {
        for micro in minibatches.iter_mut().flatten() {
            micro.prox = Some(tch::no_grad(|| micro.tokens.logprobs(models.policy, cfg.temperature))?);
        }
    }

    let mut acc = Accumulator::default();
    let mut optimizer = StepStats { lr: 0.0, grad_norm: 0.0, clipped: false };
    let mut grad_norm_sum = 0.0;
    for _ in 0..epochs {
        for micros in &minibatches {
            opt.zero_grad();
            for micro in micros {
                let loss = micro_batch_loss(models, micro, cfg)?;
                (&loss.total * micro.weight).backward();
                loss.scores.backward()?;
                // bf16 parameters: this micro-batch's gradient joins the step's fp32 sum.
                opt.accumulate();
                acc.add(&loss.stats, micro.weight / steps as f64, loss.tokens);
            }
            optimizer = opt.step()?;
            grad_norm_sum += optimizer.grad_norm;
        }
    }
    optimizer.grad_norm = grad_norm_sum / steps.max(1) as f64;

    let groups = {
        let mut k = keys.clone();
        k.sort();
        k.dedup();
        k.len()
    };
    Ok(UpdateStats {
        step: opt.steps(),
        trajectories: batch.len(),
        groups,
        flat_groups: flat.len(),
        trained_trajectories: trained.len(),
        tokens: trained.iter().map(|&i| sequences[i].ids.len()).sum(),
        trained_tokens: acc.trained_tokens / epochs,
        padded_tokens,
        reward_mean: totals.iter().map(|&r| r as f64).sum::<f64>() / batch.len() as f64,
        score_missing: rewards.iter().filter(|r| r.missing.is_some()).count(),
        loss: acc.stats(),
        optimizer,
        steps,
        elapsed: started.elapsed(),
    })
}

/// The batch's indices split into at most `parts` minibatches of whole groups (by `keys`, in
/// order of first appearance; the groups spread as evenly as their count allows).
pub fn minibatch_parts<K: PartialEq>(keys: &[K], parts: usize) -> Vec<Vec<usize>> {
    let mut groups: Vec<(&K, Vec<usize>)> = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        match groups.iter_mut().find(|(g, _)| *g == k) {
            Some((_, members)) => members.push(i),
            None => groups.push((k, vec![i])),
        }
    }
    let n = parts.clamp(1, groups.len().max(1));
    let mut out = vec![Vec::new(); n];
    let len = groups.len();
    for (g, (_, members)) in groups.into_iter().enumerate() {
        // Group g goes to part ⌊g·n / len⌋: contiguous runs whose sizes differ by at most one.
        out[g * n / len.max(1)].extend(members);
    }
    out.retain(|p| !p.is_empty());
    out
}

/// A minibatch's indices (`part`) cut into micro-batches.
///
/// Without a token budget (`budget == 0`): `part` in order, `max_rows` at a time (0: all at
/// once). With one: the sequences longest first (ties in `part`'s order), each micro-batch
/// taking the next ones while its rows × its longest row stays within `budget` and its rows
/// within `max_rows` (0: no cap); a sequence longer than the budget gets a micro-batch of its
/// own. Sorting puts like lengths together, so the padding a micro-batch carries is small.
/// The loss is a sum over sequences weighted by each micro-batch's share, so the order and the
/// cut change the update only by floating-point summation order.
pub fn micro_batches(part: &[usize], lengths: &[usize], max_rows: usize, budget: usize) -> Vec<Vec<usize>> {
    let cap = if max_rows == 0 { part.len().max(1) } else { max_rows };
    if budget == 0 {
        return part.chunks(cap).map(<[usize]>::to_vec).collect();
    }
    let mut order = part.to_vec();
    order.sort_by_key(|&i| std::cmp::Reverse(lengths[i]));
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut longest = 0;
    for i in order {
        // Longest first: the open micro-batch's longest row is its first.
        match out.last_mut() {
            Some(open) if open.len() < cap && (open.len() + 1) * longest.max(2) <= budget => open.push(i),
            _ => {
                longest = lengths[i];
                out.push(vec![i]);
            }
        }
    }
    out
}

/// One micro-batch of a minibatch: its tensors, per-token advantages, its weight in the
/// minibatch's sequence-mean, and the proximal log-probs when they were taken.
struct Micro {
    tokens: TokenBatch,
    advantages: Tensor,
    weight: f64,
    prox: Option<Tensor>,
}

/// One micro-batch's objective, with gradient, the scores whose second backward phase
/// carries it into the model, and its statistics.
struct MicroLoss {
    total: Tensor,
    scores: TokenScores,
    /// [`LossParts::stats_tensor`], on the device.
    stats: Tensor,
    tokens: usize,
}

fn micro_batch_loss(models: Models<'_>, micro: &Micro, cfg: &UpdateConfig) -> Result<MicroLoss> {
    let batch = &micro.tokens;
    // Log-probs (and entropies) of the sampled tokens only: no [B, T, vocab] tensor is made
    // (policy::head); the gradient reaches the model through `scores.backward()`.
    let scores = models.policy.token_scores(
        &batch.input_ids,
        Some(&batch.attention_mask),
        cfg.temperature,
        cfg.loss.entropy_coef > 0.0,
    )?;
    let ref_logp = match models.reference.filter(|_| cfg.loss.kl_coef > 0.0) {
        Some(reference) => Some(tch::no_grad(|| {
            reference.token_logprobs(&batch.input_ids, Some(&batch.attention_mask), cfg.temperature)
        })?),
        None => None,
    };
    let detached = scores.logp.detach();
    let parts = ppo_loss(
        &LossInputs {
            logp: &scores.logp,
            behaviour_logp: &batch.behaviour_logp,
            prox_logp: match cfg.proximal {
                Proximal::Current => Some(micro.prox.as_ref().unwrap_or(&detached)),
                Proximal::Behaviour => None,
            },
            advantages: &micro.advantages,
            mask: &batch.target_mask,
            ref_logp: ref_logp.as_ref(),
            entropy: scores.entropy.as_ref(),
            value: None,
        },
        &cfg.loss,
    )?;
    let stats = parts.stats_tensor();
    Ok(MicroLoss { total: parts.total, scores, stats, tokens: batch.trained_tokens })
}

/// The keys of groups whose rewards are all equal (a group of one included: its advantage is 0).
fn flat_keys<K: Ord + Clone>(keys: &[K], rewards: &[f32]) -> std::collections::BTreeSet<K> {
    let mut pairs: Vec<(K, f32)> = keys.iter().cloned().zip(rewards.iter().copied()).collect();
    pairs.sort_by(|a, b| a.0.cmp(&b.0));
    pairs.chunk_by(|a, b| a.0 == b.0).filter(|g| g.iter().all(|(_, r)| *r == g[0].1)).map(|g| g[0].0.clone()).collect()
}

/// Loss statistics combined over micro-batches and steps: loss terms by their weight, token
/// statistics by trained tokens. The sums stay on the device ([`LossParts::stats_tensor`]) and
/// are read once, at the end of the update: a read per micro-batch would make the host wait
/// for the device's queue before every backward.
#[derive(Default)]
struct Accumulator {
    /// Σ weight · (total, policy, kl, entropy, value) and Σ tokens · (the seven token
    /// statistics), `[12]` f64 on the device.
    sums: Option<Tensor>,
    trained_tokens: usize,
}

impl Accumulator {
    fn add(&mut self, stats: &Tensor, weight: f64, tokens: usize) {
        let terms = stats.narrow(0, 0, 5) * weight;
        let per_token = stats.narrow(0, 5, 7) * tokens as f64;
        let add = Tensor::cat(&[terms, per_token], 0);
        self.sums = Some(match self.sums.take() {
            Some(sums) => sums + add,
            None => add,
        });
        self.trained_tokens += tokens;
    }

    fn stats(&self) -> LossStats {
        let n = (self.trained_tokens as f64).max(1.0);
        let sums = match &self.sums {
            Some(sums) => LossStats::from_tensor(sums),
            None => LossStats::default(),
        };
        LossStats {
            clip_fraction: sums.clip_fraction / n,
            clip_low_fraction: sums.clip_low_fraction / n,
            clip_high_fraction: sums.clip_high_fraction / n,
            approx_kl: sums.approx_kl / n,
            kl_behaviour: sums.kl_behaviour / n,
            is_weight_mean: sums.is_weight_mean / n,
            is_truncated_fraction: sums.is_truncated_fraction / n,
            tokens: self.trained_tokens as f64,
            ..sums
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minibatches_hold_whole_groups_in_order_and_spread_evenly() {
        let keys = [7, 7, 3, 3, 9, 7, 5, 5, 3];
        assert_eq!(minibatch_parts(&keys, 2), vec![vec![0, 1, 5, 2, 3, 8], vec![4, 6, 7]]);
        assert_eq!(minibatch_parts(&keys, 1), vec![vec![0, 1, 5, 2, 3, 8, 4, 6, 7]]);
        assert_eq!(minibatch_parts(&keys, 4), vec![vec![0, 1, 5], vec![2, 3, 8], vec![4], vec![6, 7]]);
        assert_eq!(minibatch_parts(&keys, 9).len(), 4, "never more parts than groups");
        assert!(minibatch_parts::<u8>(&[], 3).is_empty());
    }

    #[test]
    fn micro_batches_without_a_budget_keep_the_order() {
        let lengths = [5, 9, 2, 7, 3];
        assert_eq!(micro_batches(&[0, 1, 2, 3, 4], &lengths, 0, 0), vec![vec![0, 1, 2, 3, 4]]);
        assert_eq!(micro_batches(&[0, 1, 2, 3, 4], &lengths, 2, 0), vec![vec![0, 1], vec![2, 3], vec![4]]);
    }

    #[test]
    fn micro_batches_with_a_budget_group_like_lengths_within_it() {
        // Longest first: 1 (9), 3 (7), 0 (5), 4 (3), 2 (2). Budget 20: [1, 3] pads to 2 × 9 = 18;
        // adding 0 would make 27; [0, 4, 2] pads to 3 × 5 = 15.
        let lengths = [5, 9, 2, 7, 3];
        let part = [0, 1, 2, 3, 4];
        assert_eq!(micro_batches(&part, &lengths, 0, 20), vec![vec![1, 3], vec![0, 4, 2]]);
        // A row cap still applies; a sequence longer than the budget goes alone.
        assert_eq!(micro_batches(&part, &lengths, 2, 20), vec![vec![1, 3], vec![0, 4], vec![2]]);
        assert_eq!(micro_batches(&part, &lengths, 0, 8), vec![vec![1], vec![3], vec![0], vec![4, 2]]);
        // Ties keep the part's order; every index exactly once; padding never above one pass's.
        let lengths: Vec<usize> = (0..40).map(|i| 10 + (i * 37) % 90).collect();
        let part: Vec<usize> = (0..40).rev().collect();
        let cut = micro_batches(&part, &lengths, 0, 512);
        let mut seen: Vec<usize> = cut.iter().flatten().copied().collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..40).collect::<Vec<_>>());
        let padded = |b: &[usize]| b.len() * b.iter().map(|&i| lengths[i]).max().unwrap_or(0);
        assert!(cut.iter().all(|b| padded(b) <= 512 || b.len() == 1), "{cut:?}");
        let whole = padded(&part);
        let bucketed: usize = cut.iter().map(|b| padded(b)).sum();
        let real: usize = lengths.iter().sum();
        assert!(bucketed < whole && bucketed >= real, "bucketed {bucketed}, one pass {whole}, real {real}");
    }

    #[test]
    fn flat_groups_are_those_with_equal_rewards() {
        let keys = [1, 1, 2, 2, 3];
        assert_eq!(flat_keys(&keys, &[1.0, 1.0, 0.0, 1.0, 5.0]), [1, 3].into(), "a group of one is flat");
        assert_eq!(flat_keys(&keys, &[0.0, 0.0, 1.0, 1.0, 5.0]), [1, 2, 3].into());
        assert!(flat_keys(&[4, 4], &[0.0, 1.0]).is_empty());
    }
}
