//! The learner role's metrics (`reagent_learner_*`): what it trained on, skipped or dropped, its
//! updates and checkpoints, the policy version it is at, and gauges of its last update.

use std::sync::LazyLock;

use prometheus::{Gauge, Histogram, HistogramVec, IntCounter, IntCounterVec, IntGauge};

use super::{counter, counter_vec, gauge, histogram, histogram_vec, register};

/// Trajectories dropped for being more than `max_staleness` policy versions old.
pub static LEARNER_STALE_DROPPED: LazyLock<IntCounter> = LazyLock::new(|| {
    counter(
        "reagent_learner_stale_dropped_total",
        "Trajectories dropped for being more than max_staleness policy versions old.",
    )
});
/// Trajectories whose reward should have had an RRM score term but had none, by reason
/// (`failed`: the judge never answered well; `not_requested`: no judging was asked for).
pub static LEARNER_SCORE_MISSING: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec(
        "reagent_learner_score_missing_total",
        "Trajectories trained without the RRM score term their feedback mode asks for.",
        &["reason"],
    )
});
/// Optimizer updates the queue-consuming learner applied.
pub static LEARNER_UPDATES: LazyLock<IntCounter> =
    LazyLock::new(|| counter("reagent_learner_updates_total", "Optimizer updates applied by the learner."));
/// Trajectories trained on (each trajectory id once).
pub static LEARNER_TRAJECTORIES_APPLIED: LazyLock<IntCounter> = LazyLock::new(|| {
    counter("reagent_learner_trajectories_applied_total", "Trajectories trained on, each trajectory id once.")
});
/// GRPO groups whose rewards were all equal (zero advantage), left out of the update when
/// `learner.skip_flat_groups` (their trajectories still count as applied).
pub static LEARNER_FLAT_GROUPS: LazyLock<IntCounter> = LazyLock::new(|| {
    counter(
        "reagent_learner_flat_groups_total",
        "GRPO groups whose rewards were all equal (no learning signal); not trained when skip_flat_groups.",
    )
});
/// Deliveries of a trajectory id already applied or already waiting in a batch, acknowledged
/// and skipped (at-least-once delivery made exactly-once application).
pub static LEARNER_DUPLICATES_SKIPPED: LazyLock<IntCounter> = LazyLock::new(|| {
    counter(
        "reagent_learner_duplicates_skipped_total",
        "Queue entries whose trajectory id was already applied or batched; acknowledged and skipped.",
    )
});
/// Batches consumed without an update because the gradient norm was not finite.
pub static LEARNER_UPDATES_SKIPPED: LazyLock<IntCounter> = LazyLock::new(|| {
    counter(
        "reagent_learner_updates_skipped_total",
        "Batches consumed without an update because the gradient norm was NaN or infinite.",
    )
});
/// The policy version the learner last published (or resumed at).
pub static LEARNER_POLICY_VERSION: LazyLock<IntGauge> =
    LazyLock::new(|| gauge("reagent_learner_policy_version", "The policy version the learner is at."));
/// Time to write a checkpoint (weights, moments, state; fsynced), in seconds.
pub static LEARNER_CHECKPOINT_SECONDS: LazyLock<Histogram> = LazyLock::new(|| {
    histogram(
        "reagent_learner_checkpoint_seconds",
        "Time to write one durable checkpoint.",
        vec![0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0],
    )
});
/// Time of one update (forward, backward, optimizer step), in seconds.
pub static LEARNER_UPDATE_SECONDS: LazyLock<Histogram> = LazyLock::new(|| {
    histogram(
        "reagent_learner_update_seconds",
        "Time of one learner update: forward, backward and optimizer step.",
        vec![0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0],
    )
});
/// Policy lag of trained trajectories: the version the learner trained them at minus the
/// trajectory's (the staleness the importance weights correct).
pub static LEARNER_POLICY_LAG: LazyLock<Histogram> = LazyLock::new(|| {
    histogram(
        "reagent_learner_policy_lag",
        "Versions each trained trajectory's policy was behind the version it was trained at.",
        vec![0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 32.0],
    )
});

/// Age of each trained trajectory when its update began, by attempt (`initial`, `refined`):
/// the learner's clock minus the trajectory's `timing.finished_at_ms` (the actor's clock, so
/// across hosts it includes their clock skew).
pub static LEARNER_TRAJECTORY_AGE_SECONDS: LazyLock<HistogramVec> = LazyLock::new(|| {
    histogram_vec(
        "reagent_learner_trajectory_age_seconds",
        "Seconds from a trajectory's end (actor clock) to the start of the update that trained it.",
        &["attempt"],
        vec![0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0],
    )
});

/// Gauges of the learner's last update: what `/metrics` shows of the line its `metrics.jsonl`
/// gets per update.
pub struct LearnerLastUpdate {
    /// `reagent_learner_success_rate`.
    pub success_rate: Gauge,
    /// `reagent_learner_reward_mean`.
    pub reward_mean: Gauge,
    /// `reagent_learner_score_mean` (NaN when nothing was judged).
    pub score_mean: Gauge,
    /// `reagent_learner_policy_lag_mean`.
    pub policy_lag_mean: Gauge,
    /// `reagent_learner_loss`.
    pub loss: Gauge,
    /// `reagent_learner_kl`.
    pub kl: Gauge,
    /// `reagent_learner_clip_fraction`.
    pub clip_fraction: Gauge,
    /// `reagent_learner_entropy`.
    pub entropy: Gauge,
    /// `reagent_learner_clip_low_fraction`.
    pub clip_low_fraction: Gauge,
    /// `reagent_learner_clip_high_fraction`.
    pub clip_high_fraction: Gauge,
    /// `reagent_learner_kl_proximal`.
    pub kl_proximal: Gauge,
    /// `reagent_learner_kl_behaviour`.
    pub kl_behaviour: Gauge,
}

fn float_gauge(name: &str, help: &str) -> Gauge {
    register(Gauge::new(name, help))
}

/// The learner's last-update gauges.
pub static LEARNER_LAST_UPDATE: LazyLock<LearnerLastUpdate> = LazyLock::new(|| LearnerLastUpdate {
    success_rate: float_gauge(
        "reagent_learner_success_rate",
        "Environment success rate of the last update's trajectories.",
    ),
    reward_mean: float_gauge(
        "reagent_learner_reward_mean",
        "Mean reward (after the feedback mode's mixing) of the last update.",
    ),
    score_mean: float_gauge("reagent_learner_score_mean", "Mean RRM score of the last update's judged trajectories."),
    policy_lag_mean: float_gauge(
        "reagent_learner_policy_lag_mean",
        "Mean policy lag (versions) of the last update's trajectories.",
    ),
    loss: float_gauge("reagent_learner_loss", "PPO objective of the last update."),
    kl: float_gauge("reagent_learner_kl", "KL term to the reference policy in the last update."),
    clip_fraction: float_gauge(
        "reagent_learner_clip_fraction",
        "Fraction of trained tokens clipped in the last update.",
    ),
    entropy: float_gauge("reagent_learner_entropy", "Mean token entropy in the last update (0 when not computed)."),
    clip_low_fraction: float_gauge(
        "reagent_learner_clip_low_fraction",
        "Fraction of trained tokens clipped at 1 - clip_low in the last update.",
    ),
    clip_high_fraction: float_gauge(
        "reagent_learner_clip_high_fraction",
        "Fraction of trained tokens clipped at 1 + clip_high in the last update.",
    ),
    kl_proximal: float_gauge(
        "reagent_learner_kl_proximal",
        "KL from the policy before the last update to the trained one, per token.",
    ),
    kl_behaviour: float_gauge(
        "reagent_learner_kl_behaviour",
        "KL from the sampling (behaviour) policy to the trained one, per token (k3).",
    ),
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learner_metrics_render_under_their_names() {
        LEARNER_STALE_DROPPED.inc_by(0);
        LEARNER_SCORE_MISSING.with_label_values(&["failed"]).inc_by(0);
        LEARNER_UPDATES.inc_by(0);
        LEARNER_CHECKPOINT_SECONDS.observe(0.0);
        LEARNER_POLICY_VERSION.set(0);
        LEARNER_LAST_UPDATE.kl_behaviour.set(0.0);
        let text = super::super::render();
        assert!(text.contains("reagent_learner_updates_total"));
        assert!(text.contains("reagent_learner_checkpoint_seconds_bucket"));
        assert!(text.contains("reagent_learner_stale_dropped_total"));
        assert!(text.contains("reagent_learner_score_missing_total{reason=\"failed\"}"));
        assert!(text.contains("reagent_learner_kl_behaviour"));
        assert!(text.contains("reagent_learner_success_rate"));
    }
}
