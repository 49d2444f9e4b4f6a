//! The RRM worker's metrics (`reagent_rrm_*`).
//!
//! ```text
//!  reagent_rrm_trajectories_total{verdict}          judged | failed | not_requested
//!  reagent_rrm_judge_seconds                        latency of each judgement (failed ones too)
//!  reagent_rrm_judge_failures_total{reason}         judgements given up on, by the last error's kind
//!  reagent_rrm_judge_attempt_failures_total{endpoint,reason}   failed attempts (retried or not)
//!  reagent_rrm_score                                histogram of scores; mean = _sum / _count
//!  reagent_rrm_batch_score_mean                     mean score of the last batch with scores
//!  reagent_rrm_scores_clipped_total                 out-of-range scores clipped after the last retry
//!  reagent_rrm_critique_replies_total               verdicts sent back to refining actors
//!  reagent_rrm_requests_in_flight{endpoint}         judge requests in flight
//! ```

use std::sync::LazyLock;

use prometheus::{Gauge, Histogram, IntCounter, IntCounterVec, IntGaugeVec};

use super::{counter, counter_vec, gauge_vec, histogram, register};

/// Trajectories the RRM worker forwarded to the scored stream, by verdict (`judged`, `failed`,
/// `not_requested`).
pub static RRM_TRAJECTORIES: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec(
        "reagent_rrm_trajectories_total",
        "Trajectories forwarded to the scored stream, by verdict.",
        &["verdict"],
    )
});
/// Seconds per judgement, retries included.
pub static RRM_JUDGE_SECONDS: LazyLock<Histogram> = LazyLock::new(|| {
    histogram(
        "reagent_rrm_judge_seconds",
        "Seconds per judgement, retries included.",
        vec![0.001, 0.005, 0.02, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0],
    )
});
/// Judgements given up on and recorded as failed verdicts, by reason.
pub static RRM_JUDGE_FAILURES: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec(
        "reagent_rrm_judge_failures_total",
        "Judgements given up on (recorded as failed verdicts), by reason.",
        &["reason"],
    )
});
/// Failed requests of the OpenAI-compatible judge (retried or not), by endpoint and reason.
pub static RRM_ATTEMPT_FAILURES: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec(
        "reagent_rrm_judge_attempt_failures_total",
        "Failed judge requests (retried or not), by endpoint and reason.",
        &["endpoint", "reason"],
    )
});
/// Scores of judged trajectories (histogram; mean = sum / count).
pub static RRM_SCORE: LazyLock<Histogram> = LazyLock::new(|| {
    let buckets = (1..=10).map(|i| f64::from(i) / 10.0).collect();
    histogram("reagent_rrm_score", "Scores of judged trajectories.", buckets)
});
/// Mean score of the RRM worker's last batch with scores.
pub static RRM_BATCH_SCORE_MEAN: LazyLock<Gauge> =
    LazyLock::new(|| register(Gauge::new("reagent_rrm_batch_score_mean", "Mean score of the last batch with scores.")));
/// Out-of-range scores clipped into [0, 1] after the judge's last retry.
pub static RRM_SCORES_CLIPPED: LazyLock<IntCounter> = LazyLock::new(|| {
    counter("reagent_rrm_scores_clipped_total", "Out-of-range scores clipped into [0, 1] after the last retry.")
});
/// Verdicts of initial attempts sent back to the actors that refine them.
pub static RRM_CRITIQUE_REPLIES: LazyLock<IntCounter> = LazyLock::new(|| {
    counter(
        "reagent_rrm_critique_replies_total",
        "Verdicts of initial attempts sent back to the actors that refine them.",
    )
});
/// Judge requests in flight, by endpoint.
pub static RRM_REQUESTS_IN_FLIGHT: LazyLock<IntGaugeVec> = LazyLock::new(|| {
    gauge_vec("reagent_rrm_requests_in_flight", "Judge requests in flight, by endpoint.", &["endpoint"])
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rrm_metric_renders_under_its_name() {
        RRM_TRAJECTORIES.with_label_values(&["judged"]).inc_by(0);
        RRM_JUDGE_SECONDS.observe(0.0);
        RRM_JUDGE_FAILURES.with_label_values(&["unit"]).inc_by(0);
        RRM_ATTEMPT_FAILURES.with_label_values(&["unit:1", "unit"]).inc_by(0);
        RRM_SCORE.observe(0.5);
        RRM_BATCH_SCORE_MEAN.set(0.5);
        RRM_SCORES_CLIPPED.inc_by(0);
        RRM_CRITIQUE_REPLIES.inc_by(0);
        RRM_REQUESTS_IN_FLIGHT.with_label_values(&["unit:1"]).set(0);
        let text = super::super::render();
        for name in [
            "reagent_rrm_trajectories_total",
            "reagent_rrm_judge_seconds",
            "reagent_rrm_judge_failures_total",
            "reagent_rrm_judge_attempt_failures_total",
            "reagent_rrm_score",
            "reagent_rrm_batch_score_mean",
            "reagent_rrm_scores_clipped_total",
            "reagent_rrm_critique_replies_total",
            "reagent_rrm_requests_in_flight",
        ] {
            assert!(text.contains(name), "{name} missing");
        }
    }
}
