//! The RRM worker's Prometheus metrics, registered in `protocol::metrics::REGISTRY` (so the
//! role's `/metrics` serves them) under the names `protocol::metrics` lists.
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

use prometheus::{Gauge, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGaugeVec, Opts};
use protocol::metrics::{self as names, REGISTRY};

fn register<C: prometheus::core::Collector + Clone + 'static>(c: C) -> C {
    REGISTRY.register(Box::new(c.clone())).expect("metric names are unique");
    c
}

/// Trajectories forwarded, by verdict kind.
pub static TRAJECTORIES: LazyLock<IntCounterVec> = LazyLock::new(|| {
    let opts = Opts::new(names::RRM_TRAJECTORIES, "Trajectories forwarded to the scored stream, by verdict.");
    register(IntCounterVec::new(opts, &["verdict"]).expect("metric definition is valid"))
});

/// Seconds per judgement, retries included.
pub static JUDGE_SECONDS: LazyLock<Histogram> = LazyLock::new(|| {
    let buckets = vec![0.001, 0.005, 0.02, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0];
    let opts =
        HistogramOpts::new(names::RRM_JUDGE_SECONDS, "Seconds per judgement, retries included.").buckets(buckets);
    register(Histogram::with_opts(opts).expect("metric definition is valid"))
});

/// Judgements given up on, by reason.
pub static JUDGE_FAILURES: LazyLock<IntCounterVec> = LazyLock::new(|| {
    let opts = Opts::new(names::RRM_JUDGE_FAILURES, "Judgements given up on (recorded as failed verdicts), by reason.");
    register(IntCounterVec::new(opts, &["reason"]).expect("metric definition is valid"))
});

/// Failed attempts of the OpenAI-compatible judge, by endpoint and reason.
pub static ATTEMPT_FAILURES: LazyLock<IntCounterVec> = LazyLock::new(|| {
    let opts =
        Opts::new(names::RRM_ATTEMPT_FAILURES, "Failed judge requests (retried or not), by endpoint and reason.");
    register(IntCounterVec::new(opts, &["endpoint", "reason"]).expect("metric definition is valid"))
});

/// Scores given.
pub static SCORES: LazyLock<Histogram> = LazyLock::new(|| {
    let buckets = (1..=10).map(|i| f64::from(i) / 10.0).collect();
    let opts = HistogramOpts::new(names::RRM_SCORE, "Scores of judged trajectories.").buckets(buckets);
    register(Histogram::with_opts(opts).expect("metric definition is valid"))
});

/// The mean score of the last batch that had scores.
pub static BATCH_SCORE_MEAN: LazyLock<Gauge> = LazyLock::new(|| {
    register(Gauge::new(names::RRM_BATCH_SCORE_MEAN, "Mean score of the last batch with scores.").expect("valid"))
});

/// Out-of-range scores clipped into [0, 1] after the last retry.
pub static SCORES_CLIPPED: LazyLock<IntCounter> = LazyLock::new(|| {
    let help = "Out-of-range scores clipped into [0, 1] after the last retry.";
    register(IntCounter::new(names::RRM_SCORES_CLIPPED, help).expect("metric definition is valid"))
});

/// Verdicts pushed to critique replies.
pub static CRITIQUE_REPLIES: LazyLock<IntCounter> = LazyLock::new(|| {
    let help = "Verdicts of initial attempts sent back to the actors that refine them.";
    register(IntCounter::new(names::RRM_CRITIQUE_REPLIES, help).expect("metric definition is valid"))
});

/// Judge requests in flight, by endpoint.
pub static REQUESTS_IN_FLIGHT: LazyLock<IntGaugeVec> = LazyLock::new(|| {
    let opts = Opts::new(names::RRM_REQUESTS_IN_FLIGHT, "Judge requests in flight, by endpoint.");
    register(IntGaugeVec::new(opts, &["endpoint"]).expect("metric definition is valid"))
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_metric_renders_under_its_protocol_name() {
        TRAJECTORIES.with_label_values(&["judged"]).inc_by(0);
        JUDGE_SECONDS.observe(0.0);
        JUDGE_FAILURES.with_label_values(&["unit"]).inc_by(0);
        ATTEMPT_FAILURES.with_label_values(&["unit:1", "unit"]).inc_by(0);
        SCORES.observe(0.5);
        BATCH_SCORE_MEAN.set(0.5);
        SCORES_CLIPPED.inc_by(0);
        CRITIQUE_REPLIES.inc_by(0);
        REQUESTS_IN_FLIGHT.with_label_values(&["unit:1"]).set(0);
        let text = protocol::metrics::render();
        for name in [
            names::RRM_TRAJECTORIES,
            names::RRM_JUDGE_SECONDS,
            names::RRM_JUDGE_FAILURES,
            names::RRM_ATTEMPT_FAILURES,
            names::RRM_SCORE,
            names::RRM_BATCH_SCORE_MEAN,
            names::RRM_SCORES_CLIPPED,
            names::RRM_CRITIQUE_REPLIES,
            names::RRM_REQUESTS_IN_FLIGHT,
        ] {
            assert!(text.contains(name), "{name} missing");
        }
    }
}
