//! The learner's Prometheus metrics, registered in `protocol::metrics::REGISTRY` so that every
//! role serves them at `/metrics`. Defined here until `protocol::metrics` takes them over.

use std::sync::LazyLock;

use prometheus::{IntCounter, IntCounterVec, Opts};
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_render_in_the_shared_registry() {
        STALE_DROPPED.inc_by(0);
        SCORE_MISSING.with_label_values(&["failed"]).inc_by(0);
        let text = protocol::metrics::render();
        assert!(text.contains("reagent_learner_stale_dropped_total"));
        assert!(text.contains("reagent_learner_score_missing_total{reason=\"failed\"}"));
    }
}
