//! [`UpdateRecord`]: what one update of the queue learner trained on and what it did — the line
//! a run's `metrics.jsonl` holds per update, and the gauges `/metrics` shows for the last one.

use protocol::metrics::{LEARNER_LAST_UPDATE, LEARNER_POLICY_LAG};
use protocol::wire::{PolicyVersion, ScoredTrajectory, Verdict};
use serde::{Deserialize, Serialize};

use super::age::{median_ms, TrainedAges};
use crate::tensorboard::{scalars_of, Board};
use crate::update::UpdateStats;

/// One update, as a learning-curve point.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UpdateRecord {
    /// The optimizer step after the update.
    pub step: u64,
    /// The policy version the update was applied to (the new one is `version + 1` when it
    /// was published).
    pub version: u64,
    /// Milliseconds since the Unix epoch when the update finished.
    pub at_ms: u64,
    /// Trajectories trained on.
    pub trajectories: usize,
    /// Fraction of them whose environment outcome was a success (outcome reward ≥ 1).
    pub success_rate: f64,
    /// Success rate of initial attempts only (the policy without a critique's help), when
    /// there were any.
    pub initial_success_rate: Option<f64>,
    /// Success rate of refined attempts, when there were any.
    pub refined_success_rate: Option<f64>,
    /// Mean RRM score over judged trajectories, when there were any.
    pub score_mean: Option<f64>,
    /// Trajectories whose judgement failed.
    pub judge_failed: usize,
    /// Mean reward after the feedback mode's mixing.
    pub reward_mean: f64,
    /// Mean policy lag: the learner's version minus the version that generated each trajectory.
    pub policy_lag_mean: f64,
    /// Trajectories by policy lag: entry `k` counts those generated `k` versions before the
    /// one they were trained at (absent from files written before it existed).
    #[serde(default)]
    pub policy_lag_counts: Vec<usize>,
    /// The PPO objective.
    pub loss: f64,
    /// The KL term to the reference policy.
    pub kl: f64,
    /// Fraction of trained tokens whose ratio was clipped (over the update's steps).
    pub clip_fraction: f64,
    /// Of those, clipped at the lower bound (ratio < 1 − clip_low, negative advantage).
    #[serde(default)]
    pub clip_low_fraction: f64,
    /// Of those, clipped at the upper bound (ratio > 1 + clip_high, positive advantage).
    #[serde(default)]
    pub clip_high_fraction: f64,
    /// KL(π_prox ‖ π_θ) per token: how far the update's steps moved the policy.
    #[serde(default)]
    pub kl_proximal: f64,
    /// KL(π_behaviour ‖ π_θ) per token (k3): how far the trained policy is from the sampler.
    #[serde(default)]
    pub kl_behaviour: f64,
    /// Optimizer steps the update took (ppo_epochs × minibatches; 0 when every group was flat).
    #[serde(default)]
    pub optimizer_steps: usize,
    /// Groups whose rewards were all equal (left out when `learner.skip_flat_groups`).
    #[serde(default)]
    pub flat_groups: usize,
    /// Mean token entropy (0 when the entropy term is off).
    pub entropy: f64,
    /// Gradient norm before clipping.
    pub grad_norm: f64,
    /// Tokens trained on.
    pub trained_tokens: usize,
    /// Positions a pass over the trained trajectories computed, padding included (Σ rows ×
    /// longest row over its micro-batches; `learner.service.micro_batch_tokens`).
    #[serde(default)]
    pub padded_tokens: usize,
    /// Seconds the update took.
    pub update_seconds: f64,
    /// Median age (ms) of the initial attempts trained when the update began: the learner's
    /// clock minus their `timing.finished_at_ms` ([`super::age`]; across hosts it includes
    /// clock skew). Absent when none had an end time, and from files written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_age_ms_median: Option<f64>,
    /// The same for the refined attempts trained.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refined_age_ms_median: Option<f64>,
}

fn success_rate(items: &[&ScoredTrajectory]) -> f64 {
    let n = items.len().max(1) as f64;
    items.iter().filter(|s| s.trajectory.outcome_reward >= 1.0).count() as f64 / n
}

impl UpdateRecord {
    /// What the batch `items`, about to be trained at `version`, says (the update's own figures
    /// are zero until [`UpdateRecord::finish`]). Taken before the update, so the batch need not
    /// be kept (or copied) for the record.
    pub fn of_batch(items: &[ScoredTrajectory], version: PolicyVersion) -> Self {
        let all: Vec<&ScoredTrajectory> = items.iter().collect();
        let (initial, refined): (Vec<&ScoredTrajectory>, Vec<&ScoredTrajectory>) =
            all.iter().partition(|s| matches!(s.trajectory.attempt, protocol::wire::Attempt::Initial));
        let scores: Vec<f64> = items
            .iter()
            .filter_map(|s| match &s.verdict {
                Verdict::Judged(j) => Some(f64::from(j.score)),
                _ => None,
            })
            .collect();
        let n = items.len().max(1) as f64;
        let lags: Vec<usize> =
            items.iter().map(|s| version.0.saturating_sub(s.trajectory.policy_version.0) as usize).collect();
        let lag = lags.iter().sum::<usize>() as f64 / n;
        let mut policy_lag_counts = vec![0; lags.iter().max().map_or(0, |m| m + 1)];
        for l in lags {
            policy_lag_counts[l] += 1;
        }
        Self {
            step: 0,
            version: version.0,
            at_ms: 0,
            trajectories: items.len(),
            success_rate: success_rate(&all),
            initial_success_rate: (!initial.is_empty()).then(|| success_rate(&initial)),
            refined_success_rate: (!refined.is_empty()).then(|| success_rate(&refined)),
            score_mean: (!scores.is_empty()).then(|| scores.iter().sum::<f64>() / scores.len() as f64),
            judge_failed: items.iter().filter(|s| matches!(s.verdict, Verdict::Failed { .. })).count(),
            reward_mean: 0.0,
            policy_lag_mean: lag,
            policy_lag_counts,
            loss: 0.0,
            kl: 0.0,
            clip_fraction: 0.0,
            clip_low_fraction: 0.0,
            clip_high_fraction: 0.0,
            kl_proximal: 0.0,
            kl_behaviour: 0.0,
            optimizer_steps: 0,
            flat_groups: 0,
            entropy: 0.0,
            grad_norm: 0.0,
            trained_tokens: 0,
            padded_tokens: 0,
            update_seconds: 0.0,
            initial_age_ms_median: None,
            refined_age_ms_median: None,
        }
    }

    /// The record with the median ages of its batch's attempts.
    pub fn with_ages(self, ages: &TrainedAges) -> Self {
        Self {
            initial_age_ms_median: median_ms(&ages.initial),
            refined_age_ms_median: median_ms(&ages.refined),
            ..self
        }
    }

    /// The record completed with the update's figures and the time it finished.
    pub fn finish(self, stats: &UpdateStats) -> Self {
        Self {
            step: stats.step,
            at_ms: protocol::clock::unix_ms(),
            reward_mean: stats.reward_mean,
            loss: stats.loss.total,
            kl: stats.loss.kl,
            clip_fraction: stats.loss.clip_fraction,
            clip_low_fraction: stats.loss.clip_low_fraction,
            clip_high_fraction: stats.loss.clip_high_fraction,
            kl_proximal: stats.loss.approx_kl,
            kl_behaviour: stats.loss.kl_behaviour,
            optimizer_steps: stats.steps,
            flat_groups: stats.flat_groups,
            entropy: stats.loss.entropy,
            grad_norm: stats.optimizer.grad_norm,
            trained_tokens: stats.trained_tokens,
            padded_tokens: stats.padded_tokens,
            update_seconds: stats.elapsed.as_secs_f64(),
            ..self
        }
    }

    /// Appends this record to `path` as one JSON line (creating the file and its directory).
    pub fn append_to(&self, path: &std::path::Path) -> std::io::Result<()> {
        use std::io::Write;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut file = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
        let line = serde_json::to_string(self).map_err(std::io::Error::other)?;
        writeln!(file, "{line}")
    }

    /// The record's figures as TensorBoard scalars: every number of its `metrics.jsonl` line
    /// (lag counts as `policy_lag_counts/k`), less `step` and `at_ms`, which are the event's own
    /// step and time.
    pub fn scalars(&self) -> Vec<(String, f64)> {
        serde_json::to_value(self).map_or_else(|_| Vec::new(), |v| scalars_of(&v, &["step", "at_ms"]))
    }

    /// Writes [`UpdateRecord::scalars`] to `board` at the record's step and time.
    pub fn write_to(&self, board: &mut Board) -> std::io::Result<()> {
        board.write(self.step, self.at_ms, &self.scalars())
    }

    /// Sets the learner's last-update gauges.
    pub fn observe(&self) {
        let g = &*LEARNER_LAST_UPDATE;
        g.success_rate.set(self.success_rate);
        g.reward_mean.set(self.reward_mean);
        g.score_mean.set(self.score_mean.unwrap_or(f64::NAN));
        g.policy_lag_mean.set(self.policy_lag_mean);
        g.loss.set(self.loss);
        g.kl.set(self.kl);
        g.clip_fraction.set(self.clip_fraction);
        g.entropy.set(self.entropy);
        g.clip_low_fraction.set(self.clip_low_fraction);
        g.clip_high_fraction.set(self.clip_high_fraction);
        g.kl_proximal.set(self.kl_proximal);
        g.kl_behaviour.set(self.kl_behaviour);
        for (lag, &n) in self.policy_lag_counts.iter().enumerate() {
            for _ in 0..n {
                LEARNER_POLICY_LAG.observe(lag as f64);
            }
        }
    }
}

/// Trajectories by policy lag over `records` (entry `k`: lag `k`), summed.
pub fn lag_histogram(records: &[UpdateRecord]) -> Vec<usize> {
    let mut out: Vec<usize> = Vec::new();
    for r in records {
        if out.len() < r.policy_lag_counts.len() {
            out.resize(r.policy_lag_counts.len(), 0);
        }
        for (total, n) in out.iter_mut().zip(&r.policy_lag_counts) {
            *total += n;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::scored;

    #[test]
    fn lags_are_counted_per_version_behind_and_summed_over_records() {
        // Trained at version 5: generated at 5, 4, 4 and 2 → lags 0, 1, 1, 3.
        let items: Vec<ScoredTrajectory> = [5, 4, 4, 2]
            .iter()
            .enumerate()
            .map(|(i, &v)| scored(i as u128, 0, v, 1.0, Verdict::NotRequested))
            .collect();
        let a = UpdateRecord::of_batch(&items, PolicyVersion(5));
        assert_eq!(a.policy_lag_counts, [1, 2, 0, 1]);
        assert_eq!(a.policy_lag_mean, 5.0 / 4.0);
        let b = UpdateRecord::of_batch(&items[..1], PolicyVersion(5));
        assert_eq!(b.policy_lag_counts, [1]);
        assert_eq!(lag_histogram(&[a.clone(), b]), [2, 2, 0, 1]);
        assert!(UpdateRecord::of_batch(&[], PolicyVersion(5)).policy_lag_counts.is_empty());

        // A line written before the field existed still reads, with no counts.
        let mut old = serde_json::to_value(&a).unwrap();
        old.as_object_mut().unwrap().remove("policy_lag_counts");
        let read: UpdateRecord = serde_json::from_value(old).unwrap();
        assert!(read.policy_lag_counts.is_empty() && read.policy_lag_mean == a.policy_lag_mean);
    }
}
