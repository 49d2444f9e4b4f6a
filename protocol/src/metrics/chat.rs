//! Metrics of the OpenAI-compatible chat clients (`env_workers::chat`): the RRM judge's and the
//! simulated user's, each counted under its own names through one [`ChatMetrics`] handle, and
//! the simulated user's own counters (`reagent_user_model_*`).
//!
//! ```text
//!  reagent_user_model_requests_in_flight{endpoint}                user-model requests in flight
//!  reagent_user_model_attempt_failures_total{endpoint,reason}     failed attempts (retried or not)
//!  reagent_user_model_replies_total                               replies the model gave
//!  reagent_user_model_fallbacks_total{reason}                     replies the rule-based user gave instead
//! ```
//!
//! The judge's client counts under `reagent_rrm_requests_in_flight` and
//! `reagent_rrm_judge_attempt_failures_total` ([`super::rrm`]).

use std::sync::LazyLock;

use prometheus::{IntCounter, IntCounterVec, IntGaugeVec};

use super::{counter, counter_vec, gauge_vec, RRM_ATTEMPT_FAILURES, RRM_REQUESTS_IN_FLIGHT};

/// Simulated-user model requests in flight, by endpoint.
pub static USER_MODEL_REQUESTS_IN_FLIGHT: LazyLock<IntGaugeVec> = LazyLock::new(|| {
    gauge_vec(
        "reagent_user_model_requests_in_flight",
        "Simulated-user model requests in flight, by endpoint.",
        &["endpoint"],
    )
});
/// Failed requests of the simulated-user model (retried or not), by endpoint and reason.
pub static USER_MODEL_ATTEMPT_FAILURES: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec(
        "reagent_user_model_attempt_failures_total",
        "Failed simulated-user model requests (retried or not), by endpoint and reason.",
        &["endpoint", "reason"],
    )
});
/// Replies the simulated-user model gave.
pub static USER_MODEL_REPLIES: LazyLock<IntCounter> =
    LazyLock::new(|| counter("reagent_user_model_replies_total", "Replies the simulated-user model gave."));
/// Replies the rule-based user gave because the model failed, by the last error's kind.
pub static USER_MODEL_FALLBACKS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec(
        "reagent_user_model_fallbacks_total",
        "Replies the rule-based user gave because the simulated-user model failed, by reason.",
        &["reason"],
    )
});

/// Where one chat client counts its requests in flight and its failed attempts.
#[derive(Clone, Copy)]
pub struct ChatMetrics {
    in_flight: &'static LazyLock<IntGaugeVec>,
    attempt_failures: &'static LazyLock<IntCounterVec>,
}

impl std::fmt::Debug for ChatMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatMetrics").finish_non_exhaustive()
    }
}

impl ChatMetrics {
    /// The RRM judge's (`reagent_rrm_*`).
    pub fn judge() -> Self {
        Self { in_flight: &RRM_REQUESTS_IN_FLIGHT, attempt_failures: &RRM_ATTEMPT_FAILURES }
    }

    /// The simulated user's (`reagent_user_model_*`).
    pub fn user_model() -> Self {
        Self { in_flight: &USER_MODEL_REQUESTS_IN_FLIGHT, attempt_failures: &USER_MODEL_ATTEMPT_FAILURES }
    }

    /// Moves the in-flight gauge of `endpoint` by `delta`.
    pub fn in_flight(&self, endpoint: &str, delta: i64) {
        self.in_flight.with_label_values(&[endpoint]).add(delta);
    }

    /// Counts a failed attempt on `endpoint` for `reason`.
    pub fn attempt_failed(&self, endpoint: &str, reason: &str) {
        self.attempt_failures.with_label_values(&[endpoint, reason]).inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_client_counts_under_its_own_names() {
        ChatMetrics::user_model().attempt_failed("unit:2", "timeout");
        ChatMetrics::user_model().in_flight("unit:2", 0);
        ChatMetrics::judge().in_flight("unit:2", 0);
        USER_MODEL_REPLIES.inc_by(0);
        USER_MODEL_FALLBACKS.with_label_values(&["unit"]).inc_by(0);
        assert!(USER_MODEL_ATTEMPT_FAILURES.with_label_values(&["unit:2", "timeout"]).get() >= 1);
        let text = super::super::render();
        for name in [
            "reagent_user_model_requests_in_flight",
            "reagent_user_model_attempt_failures_total",
            "reagent_user_model_replies_total",
            "reagent_user_model_fallbacks_total",
            "reagent_rrm_requests_in_flight",
        ] {
            assert!(text.contains(name), "{name} missing");
        }
    }
}
