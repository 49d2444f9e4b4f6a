//! `reagent serve`'s Prometheus metrics, in protocol's registry beside the policy actor's
//! (`reagent_actor_batch_size`, …), rendered on the server's own `GET /metrics`.

use std::sync::LazyLock;

use prometheus::{Histogram, HistogramOpts, IntCounterVec, Opts};

/// Requests answered, by route and status code.
pub static REQUESTS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    let c = IntCounterVec::new(
        Opts::new("reagent_serve_requests_total", "Requests answered by reagent serve, by route and status."),
        &["route", "status"],
    )
    .expect("valid metric");
    let _ = protocol::metrics::REGISTRY.register(Box::new(c.clone()));
    c
});

/// Seconds from a chat request's arrival to its answer.
pub static LATENCY: LazyLock<Histogram> = LazyLock::new(|| {
    let h = Histogram::with_opts(
        HistogramOpts::new("reagent_serve_request_seconds", "Seconds to answer a chat completion.")
            .buckets(vec![0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0]),
    )
    .expect("valid metric");
    let _ = protocol::metrics::REGISTRY.register(Box::new(h.clone()));
    h
});

/// Completion tokens returned.
pub static COMPLETION_TOKENS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    let c = IntCounterVec::new(
        Opts::new("reagent_serve_completion_tokens_total", "Completion tokens returned by reagent serve."),
        &["finish_reason"],
    )
    .expect("valid metric");
    let _ = protocol::metrics::REGISTRY.register(Box::new(c.clone()));
    c
});
