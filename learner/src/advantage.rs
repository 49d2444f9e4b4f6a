//! Advantages: GRPO's group-normalised outcome advantages (the default, as in the paper's code)
//! and GAE(γ, λ) with a value head (classic PPO, for `cartpole` and value-head LLM runs).
//!
//! GRPO follows veRL's `compute_grpo_outcome_advantage`: within a group, `(r − mean) /
//! (std + ε)` with torch's unbiased `std` and ε = 1e-6, so a group whose rewards are all equal
//! gets zero advantages. One deliberate difference: veRL leaves a group of one at `r / (1 + ε)`
//! (mean 0, std 1); a lone trajectory has no baseline to be compared with, so here it gets 0.
//! The sequence's advantage is then broadcast to every trained token ([`token_advantages`]).

use std::collections::HashMap;
use std::hash::Hash;

use protocol::wire::{Attempt, GroupId, Trajectory};
use tch::{Kind, Tensor};

use crate::error::{LearnerError, Result};

/// The ε in `(r − mean) / (std + ε)`, as in veRL.
pub const GRPO_EPS: f64 = 1e-6;

/// The key trajectories are normalised together under: the group id and, unless attempts are
/// pooled, whether it is an initial or a refined attempt (docs/architecture.md section 3).
pub fn group_key(trajectory: &Trajectory, separate_attempts: bool) -> (GroupId, bool) {
    let refined = separate_attempts && matches!(trajectory.attempt, Attempt::Refined { .. });
    (trajectory.group_id, refined)
}

/// GRPO advantages: each reward minus its group's mean, divided by the group's unbiased
/// standard deviation plus `eps` when `normalize_std` (Dr. GRPO turns that off). Groups of one
/// and groups of equal rewards get zero. `keys[i]` is the group of `rewards[i]`.
pub fn grpo_advantages<K: Eq + Hash>(rewards: &[f32], keys: &[K], eps: f64, normalize_std: bool) -> Result<Vec<f32>> {
    if rewards.len() != keys.len() {
        return Err(LearnerError::Shape(format!("{} rewards but {} group keys", rewards.len(), keys.len())));
    }
    let mut members: HashMap<&K, Vec<usize>> = HashMap::new();
    for (i, k) in keys.iter().enumerate() {
        members.entry(k).or_default().push(i);
    }
    let mut out = vec![0.0f32; rewards.len()];
    for idx in members.values() {
        if idx.len() < 2 {
            continue;
        }
        let n = idx.len() as f64;
        let mean = idx.iter().map(|&i| rewards[i] as f64).sum::<f64>() / n;
        let var = idx.iter().map(|&i| (rewards[i] as f64 - mean).powi(2)).sum::<f64>() / (n - 1.0);
        let scale = if normalize_std { var.sqrt() + eps } else { 1.0 };
        for &i in idx {
            out[i] = ((rewards[i] as f64 - mean) / scale) as f32;
        }
    }
    Ok(out)
}

/// Broadcasts one advantage per sequence (`[B]`) onto its trained tokens: `[B, T]`, zero where
/// `mask` (`[B, T]`, bool or float) is off.
pub fn token_advantages(per_sequence: &[f32], mask: &Tensor) -> Result<Tensor> {
    let size = mask.size();
    if size.len() != 2 || size[0] != per_sequence.len() as i64 {
        return Err(LearnerError::Shape(format!("{} advantages for a mask of shape {size:?}", per_sequence.len())));
    }
    let adv = Tensor::from_slice(per_sequence).to_device(mask.device()).unsqueeze(1);
    Ok(adv * mask.to_kind(Kind::Float))
}

/// Per-step inputs of GAE for `num_envs` environments stepped together, time-major: entry
/// `t * num_envs + n` is step `t` of environment `n`.
#[derive(Debug, Clone, Copy)]
pub struct GaeInputs<'a> {
    /// The reward of each step.
    pub rewards: &'a [f32],
    /// The critic's value of the state each step acted from.
    pub values: &'a [f32],
    /// Whether the episode ended with this step (no bootstrap through it). For a time-limit
    /// truncation, add `γ·V(final observation)` to that step's reward (as Stable-Baselines3
    /// does) and mark it done.
    pub dones: &'a [bool],
    /// The value of the state after the last step, per environment (`[num_envs]`).
    pub last_values: &'a [f32],
    /// How many environments are interleaved.
    pub num_envs: usize,
}

/// GAE's outputs, in the same layout as the inputs.
#[derive(Debug, Clone, PartialEq)]
pub struct Gae {
    /// `A_t = δ_t + γλ(1 − done_t) A_{t+1}` with `δ_t = r_t + γ(1 − done_t) V_{t+1} − V_t`.
    pub advantages: Vec<f32>,
    /// The value targets `A_t + V_t`.
    pub returns: Vec<f32>,
}

/// Generalised advantage estimation (Schulman et al. 2016), as in CleanRL's `ppo.py`.
pub fn gae(inputs: &GaeInputs<'_>, gamma: f64, lambda: f64) -> Result<Gae> {
    let GaeInputs { rewards, values, dones, last_values, num_envs } = *inputs;
    let len = rewards.len();
    if num_envs == 0 || len % num_envs != 0 || values.len() != len || dones.len() != len {
        return Err(LearnerError::Shape(format!(
            "gae needs rewards, values and dones of one length divisible by num_envs={num_envs}; got {len}, {}, {}",
            values.len(),
            dones.len()
        )));
    }
    if last_values.len() != num_envs {
        return Err(LearnerError::Shape(format!("{} last values for {num_envs} environments", last_values.len())));
    }
    let steps = len / num_envs;
    let mut advantages = vec![0.0f32; len];
    let mut returns = vec![0.0f32; len];
    for (n, &last) in last_values.iter().enumerate() {
        let mut next_adv = 0.0f64;
        let mut next_value = last as f64;
        for t in (0..steps).rev() {
            let i = t * num_envs + n;
            let live = if dones[i] { 0.0 } else { 1.0 };
            let delta = rewards[i] as f64 + gamma * next_value * live - values[i] as f64;
            next_adv = delta + gamma * lambda * live * next_adv;
            advantages[i] = next_adv as f32;
            returns[i] = (next_adv + values[i] as f64) as f32;
            next_value = values[i] as f64;
        }
    }
    Ok(Gae { advantages, returns })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::scored;
    use protocol::wire::{TrajectoryId, Verdict};

    #[test]
    fn refined_attempts_form_their_own_group_unless_pooled() {
        let initial = scored(1, 9, 0, 1.0, Verdict::NotRequested).trajectory;
        let mut refined = scored(2, 9, 0, 0.0, Verdict::NotRequested).trajectory;
        refined.attempt = Attempt::Refined { of: TrajectoryId(1) };
        assert_ne!(group_key(&initial, true), group_key(&refined, true));
        assert_eq!(group_key(&initial, false), group_key(&refined, false));
    }
}
