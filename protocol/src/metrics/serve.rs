//! `reagent serve`'s metrics (`reagent_serve_*`), rendered on the server's own `GET /metrics`
//! beside the policy actor's (`reagent_actor_batch_size`, …).
//!
//! ```text
//!  reagent_serve_requests_total{route,status}            requests answered
//!  reagent_serve_request_seconds                         arrival to answer of a chat completion
//!  reagent_serve_completion_tokens_total{finish_reason}  completion tokens returned
//! ```

use std::sync::LazyLock;

use prometheus::{Histogram, IntCounterVec};

use super::{counter_vec, histogram};

/// Requests answered by `reagent serve`, by route and status code.
pub static SERVE_REQUESTS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec(
        "reagent_serve_requests_total",
        "Requests answered by reagent serve, by route and status.",
        &["route", "status"],
    )
});
/// Seconds from a chat request's arrival to its answer.
pub static SERVE_LATENCY: LazyLock<Histogram> = LazyLock::new(|| {
    histogram(
        "reagent_serve_request_seconds",
        "Seconds to answer a chat completion.",
        vec![0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0],
    )
});
/// Completion tokens returned by `reagent serve`, by finish reason.
pub static SERVE_COMPLETION_TOKENS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec(
        "reagent_serve_completion_tokens_total",
        "Completion tokens returned by reagent serve.",
        &["finish_reason"],
    )
});
