//! The learner's Prometheus metrics, registered in `protocol::metrics::REGISTRY` so that every
//! role serves them at `/metrics`. Defined here until `protocol::metrics` takes them over.

use std::sync::LazyLock;

use prometheus::{Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, Opts};
use protocol::metrics::REGISTRY;

/// Trajectories dropped for being more than `max_staleness` policy versions old.
pub static STALE_DROPPED: LazyLock<IntCounter> = LazyLock::new(|| {
    let c = IntCounter::new(
        "reagent_learner_stale_dropped_total",
        "Trajectories dropped for being more than max_staleness policy versions old.",
    )
    .expect("metric definition is valid");
    REGISTRY.register(Box::new(c.clone())).expect("metric names are unique");
    c
});

/// Trajectories whose reward should have had an RRM score term but had none, by reason
/// (`failed`: the judge never answered well; `not_requested`: no judging was asked for).
pub static SCORE_MISSING: LazyLock<IntCounterVec> = LazyLock::new(|| {
    let c = IntCounterVec::new(
        Opts::new(
            "reagent_learner_score_missing_total",
            "Trajectories trained without the RRM score term their feedback mode asks for.",
        ),
        &["reason"],
    )
    .expect("metric definition is valid");
    REGISTRY.register(Box::new(c.clone())).expect("metric names are unique");
    c
});

fn counter(name: &str, help: &str) -> IntCounter {
    let c = IntCounter::new(name, help).expect("metric definition is valid");
    REGISTRY.register(Box::new(c.clone())).expect("metric names are unique");
    c
}

fn seconds(name: &str, help: &str, buckets: Vec<f64>) -> Histogram {
    let h = Histogram::with_opts(HistogramOpts::new(name, help).buckets(buckets)).expect("metric definition is valid");
    REGISTRY.register(Box::new(h.clone())).expect("metric names are unique");
    h
}

/// Optimizer updates the queue-consuming learner applied.
pub static UPDATES: LazyLock<IntCounter> =
    LazyLock::new(|| counter("reagent_learner_updates_total", "Optimizer updates applied by the learner."));

/// Trajectories trained on (each trajectory id once).
pub static TRAJECTORIES_APPLIED: LazyLock<IntCounter> = LazyLock::new(|| {
    counter("reagent_learner_trajectories_applied_total", "Trajectories trained on, each trajectory id once.")
});

/// GRPO groups whose rewards were all equal (zero advantage), left out of the update when
/// `learner.skip_flat_groups` (their trajectories still count as applied).
pub static FLAT_GROUPS: LazyLock<IntCounter> = LazyLock::new(|| {
    counter(
        "reagent_learner_flat_groups_total",
        "GRPO groups whose rewards were all equal (no learning signal); not trained when skip_flat_groups.",
    )
});

/// Deliveries of a trajectory id already applied or already waiting in a batch, acknowledged
/// and skipped (at-least-once delivery made exactly-once application).
pub static DUPLICATES_SKIPPED: LazyLock<IntCounter> = LazyLock::new(|| {
    counter(
        "reagent_learner_duplicates_skipped_total",
        "Queue entries whose trajectory id was already applied or batched; acknowledged and skipped.",
    )
});

/// Batches consumed without an update because the gradient norm was not finite.
pub static UPDATES_SKIPPED: LazyLock<IntCounter> = LazyLock::new(|| {
    counter(
        "reagent_learner_updates_skipped_total",
        "Batches consumed without an update because the gradient norm was NaN or infinite.",
    )
});

/// The policy version the learner last published (or resumed at).
pub static POLICY_VERSION: LazyLock<IntGauge> = LazyLock::new(|| {
    let g = IntGauge::new("reagent_learner_policy_version", "The policy version the learner is at.")
        .expect("metric definition is valid");
    REGISTRY.register(Box::new(g.clone())).expect("metric names are unique");
    g
});

/// Time to write a checkpoint (weights, moments, state; fsynced), in seconds.
pub static CHECKPOINT_SECONDS: LazyLock<Histogram> = LazyLock::new(|| {
    seconds(
        "reagent_learner_checkpoint_seconds",
        "Time to write one durable checkpoint.",
        vec![0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0],
    )
});

/// Time of one update (forward, backward, optimizer step), in seconds.
pub static UPDATE_SECONDS: LazyLock<Histogram> = LazyLock::new(|| {
    seconds(
        "reagent_learner_update_seconds",
        "Time of one learner update: forward, backward and optimizer step.",
        vec![0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0],
    )
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_render_in_the_shared_registry() {
        STALE_DROPPED.inc_by(0);
        SCORE_MISSING.with_label_values(&["failed"]).inc_by(0);
        UPDATES.inc_by(0);
        CHECKPOINT_SECONDS.observe(0.0);
        POLICY_VERSION.set(0);
        let text = protocol::metrics::render();
        assert!(text.contains("reagent_learner_updates_total"));
        assert!(text.contains("reagent_learner_checkpoint_seconds_bucket"));
        assert!(text.contains("reagent_learner_stale_dropped_total"));
        assert!(text.contains("reagent_learner_score_missing_total{reason=\"failed\"}"));
    }
}
