//! Prometheus metrics: every name is defined here, once, and registered in one registry that
//! each role serves at `/metrics`.
//!
//! Names follow Prometheus conventions: `reagent_` prefix, `_total` for counters, base units
//! (seconds, bytes). Labels are low-cardinality (a stream's short name, an operation), never ids.

use std::sync::LazyLock;

use prometheus::{CounterVec, Encoder, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder};

/// The registry every Reagent metric is registered in.
pub static REGISTRY: LazyLock<Registry> = LazyLock::new(Registry::new);

fn counter_vec(name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let c = IntCounterVec::new(Opts::new(name, help), labels).expect("metric definition is valid");
    REGISTRY.register(Box::new(c.clone())).expect("metric names are unique");
    c
}

fn gauge_vec(name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    let g = IntGaugeVec::new(Opts::new(name, help), labels).expect("metric definition is valid");
    REGISTRY.register(Box::new(g.clone())).expect("metric names are unique");
    g
}

fn counter(name: &str, help: &str) -> IntCounter {
    let c = IntCounter::new(name, help).expect("metric definition is valid");
    REGISTRY.register(Box::new(c.clone())).expect("metric names are unique");
    c
}

fn gauge(name: &str, help: &str) -> IntGauge {
    let g = IntGauge::new(name, help).expect("metric definition is valid");
    REGISTRY.register(Box::new(g.clone())).expect("metric names are unique");
    g
}

/// Entries written to a stream, by stream.
pub static QUEUE_PRODUCED: LazyLock<IntCounterVec> =
    LazyLock::new(|| counter_vec("reagent_queue_produced_total", "Entries written to a stream.", &["stream"]));
/// Entries delivered to a consumer (first delivery or reclaimed), by stream.
pub static QUEUE_DELIVERED: LazyLock<IntCounterVec> =
    LazyLock::new(|| counter_vec("reagent_queue_delivered_total", "Entries delivered to a consumer.", &["stream"]));
/// Entries reclaimed from a consumer that held them past the idle timeout, by stream.
pub static QUEUE_RECLAIMED: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec(
        "reagent_queue_reclaimed_total",
        "Entries reclaimed from an idle (presumed dead) consumer.",
        &["stream"],
    )
});
/// Entries acknowledged (including those forwarded or dead-lettered), by stream.
pub static QUEUE_ACKED: LazyLock<IntCounterVec> =
    LazyLock::new(|| counter_vec("reagent_queue_acked_total", "Entries acknowledged.", &["stream"]));
/// Entries moved atomically to the next stream, by source stream.
pub static QUEUE_FORWARDED: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec("reagent_queue_forwarded_total", "Entries forwarded to the next stream.", &["stream"])
});
/// Entries sent to a dead-letter stream, by source stream and reason kind.
pub static QUEUE_DEAD_LETTERED: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec("reagent_queue_dead_lettered_total", "Entries moved to the dead-letter stream.", &["stream", "reason"])
});
/// Acknowledged entries trimmed from a stream, by stream.
pub static QUEUE_TRIMMED: LazyLock<IntCounterVec> =
    LazyLock::new(|| counter_vec("reagent_queue_trimmed_total", "Acknowledged entries trimmed.", &["stream"]));
/// Times a producer had to wait at the high-water mark, by stream.
pub static QUEUE_BACKPRESSURE_WAITS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec(
        "reagent_queue_backpressure_waits_total",
        "Times a producer waited at the high-water mark.",
        &["stream"],
    )
});
/// Seconds producers spent waiting at the high-water mark, by stream.
pub static QUEUE_BACKPRESSURE_SECONDS: LazyLock<CounterVec> = LazyLock::new(|| {
    let c = CounterVec::new(
        Opts::new(
            "reagent_queue_backpressure_seconds_total",
            "Seconds producers spent waiting at the high-water mark.",
        ),
        &["stream"],
    )
    .expect("metric definition is valid");
    REGISTRY.register(Box::new(c.clone())).expect("metric names are unique");
    c
});
/// Entries not yet delivered to a consumer (what backpressure counts) last measured, by stream.
pub static QUEUE_BACKLOG: LazyLock<IntGaugeVec> = LazyLock::new(|| {
    gauge_vec(
        "reagent_queue_backlog",
        "Entries not yet delivered to a consumer (what backpressure counts), last measured.",
        &["stream"],
    )
});
/// Unconsumed entries (undelivered + unacknowledged) last measured, by stream.
pub static QUEUE_DEPTH: LazyLock<IntGaugeVec> = LazyLock::new(|| {
    gauge_vec(
        "reagent_queue_depth",
        "Unconsumed entries (undelivered plus unacknowledged), last measured.",
        &["stream"],
    )
});
/// Redis commands retried after a connection failure or timeout, by operation.
pub static REDIS_RETRIES: LazyLock<IntCounterVec> =
    LazyLock::new(|| counter_vec("reagent_redis_retries_total", "Redis commands retried after a failure.", &["op"]));
/// Weight versions published.
pub static WEIGHTS_PUBLISHED: LazyLock<IntCounter> =
    LazyLock::new(|| counter("reagent_weights_published_total", "Weight versions published."));
/// Weight versions fetched and verified.
pub static WEIGHTS_FETCHED: LazyLock<IntCounter> =
    LazyLock::new(|| counter("reagent_weights_fetched_total", "Weight versions fetched and verified."));
/// Weight fetches that failed their checksum.
pub static WEIGHTS_CORRUPT: LazyLock<IntCounter> =
    LazyLock::new(|| counter("reagent_weights_corrupt_total", "Weight fetches that failed a checksum."));
/// The newest weight version this process published or fetched.
pub static WEIGHTS_VERSION: LazyLock<IntGauge> =
    LazyLock::new(|| gauge("reagent_weights_version", "Newest weight version this process published or loaded."));

/// The short label of a stream key: `reagent:{run}:rollouts` → `rollouts`.
pub fn stream_label(key: &str) -> &str {
    key.rsplit_once("}:").map_or(key, |(_, name)| name)
}

/// Every registered metric in the Prometheus text format.
pub fn render() -> String {
    let mut buf = Vec::new();
    let _ = TextEncoder::new().encode(&REGISTRY.gather(), &mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

// Names of the RRM worker's metrics (defined and registered by `rrm-worker`, in its `metrics`
// module), listed here with the others so dashboards and alerts have one place to look.

/// Trajectories the RRM worker forwarded to the scored stream, by verdict
/// (`judged`, `failed`, `not_requested`).
pub const RRM_TRAJECTORIES: &str = "reagent_rrm_trajectories_total";
/// Seconds per judgement, retries included (histogram).
pub const RRM_JUDGE_SECONDS: &str = "reagent_rrm_judge_seconds";
/// Judgements given up on and recorded as failed verdicts, by reason.
pub const RRM_JUDGE_FAILURES: &str = "reagent_rrm_judge_failures_total";
/// Failed requests of the OpenAI-compatible judge (retried or not), by endpoint and reason.
pub const RRM_ATTEMPT_FAILURES: &str = "reagent_rrm_judge_attempt_failures_total";
/// Scores of judged trajectories (histogram; mean = sum / count).
pub const RRM_SCORE: &str = "reagent_rrm_score";
/// Mean score of the RRM worker's last batch with scores.
pub const RRM_BATCH_SCORE_MEAN: &str = "reagent_rrm_batch_score_mean";
/// Out-of-range scores clipped into [0, 1] after the judge's last retry.
pub const RRM_SCORES_CLIPPED: &str = "reagent_rrm_scores_clipped_total";
/// Verdicts of initial attempts sent back to the actors that refine them.
pub const RRM_CRITIQUE_REPLIES: &str = "reagent_rrm_critique_replies_total";
/// Judge requests in flight, by endpoint.
pub const RRM_REQUESTS_IN_FLIGHT: &str = "reagent_rrm_requests_in_flight";

fn histogram(name: &str, help: &str, buckets: Vec<f64>) -> prometheus::Histogram {
    let h = prometheus::Histogram::with_opts(prometheus::HistogramOpts::new(name, help).buckets(buckets))
        .expect("metric definition is valid");
    REGISTRY.register(Box::new(h.clone())).expect("metric names are unique");
    h
}

/// Trajectories an actor published, by attempt (`initial`, `refined`).
pub static ACTOR_TRAJECTORIES: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec("reagent_actor_trajectories_total", "Trajectories published by actors.", &["attempt"])
});
/// Episodes an actor played but did not publish, by reason (`shutdown`: unfinished at the end
/// of a graceful leave's grace period; `error`: its group failed).
pub static ACTOR_EPISODES_DROPPED: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec("reagent_actor_episodes_dropped_total", "Episodes dropped unpublished, by reason.", &["reason"])
});
/// What came of waiting for a critique, by outcome (`judged`, `failed`, `timeout`,
/// `not_requested`); only `judged` is followed by a refined attempt.
pub static ACTOR_CRITIQUES: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec("reagent_actor_critiques_total", "Critique waits of initial attempts, by outcome.", &["outcome"])
});
/// Policy lag of published trajectories: the learner's newest version minus the trajectory's,
/// at publish time.
pub static ACTOR_POLICY_LAG: LazyLock<prometheus::Histogram> = LazyLock::new(|| {
    histogram(
        "reagent_actor_policy_lag",
        "Versions the published trajectory's policy was behind the newest published weights.",
        vec![0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 32.0],
    )
});
/// Policy lag of trained trajectories: the version the learner trained them at minus the
/// trajectory's (the staleness the importance weights correct).
pub static LEARNER_POLICY_LAG: LazyLock<prometheus::Histogram> = LazyLock::new(|| {
    histogram(
        "reagent_learner_policy_lag",
        "Versions each trained trajectory's policy was behind the version it was trained at.",
        vec![0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 32.0],
    )
});
/// Seconds from noticing a new weight version to generating with it (fetch, verify, swap).
pub static ACTOR_WEIGHT_SYNC_SECONDS: LazyLock<prometheus::Histogram> = LazyLock::new(|| {
    histogram(
        "reagent_actor_weight_sync_seconds",
        "Seconds from noticing a new weight version to swapping it in.",
        vec![0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0],
    )
});
/// The weight version the actor's policy generates with.
pub static ACTOR_POLICY_VERSION: LazyLock<IntGauge> =
    LazyLock::new(|| gauge("reagent_actor_policy_version", "Weight version the actor's policy generates with."));
/// Requests per generation batch of the policy actor.
pub static ACTOR_BATCH_SIZE: LazyLock<prometheus::Histogram> = LazyLock::new(|| {
    histogram(
        "reagent_actor_generation_batch_size",
        "Generation requests per policy batch.",
        vec![1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0],
    )
});
/// Seconds per generation batch of the policy actor.
pub static ACTOR_BATCH_SECONDS: LazyLock<prometheus::Histogram> = LazyLock::new(|| {
    histogram(
        "reagent_actor_generation_batch_seconds",
        "Seconds the policy thread spent on one generation batch.",
        vec![0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0],
    )
});
/// Tokens the actor's policy generated.
pub static ACTOR_GENERATED_TOKENS: LazyLock<IntCounter> =
    LazyLock::new(|| counter("reagent_actor_generated_tokens_total", "Tokens generated by the actor's policy."));
/// Children the actor supervisor restarted after a failure, by child kind (`policy`,
/// `weight-sync`, `publisher`, `rollout`).
pub static ACTOR_RESTARTS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec("reagent_actor_restarts_total", "Failed children restarted by the actor supervisor.", &["child"])
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_rendering() {
        assert_eq!(stream_label("reagent:{r}:rollouts"), "rollouts");
        assert_eq!(stream_label("reagent:{r}:rollouts:dead"), "rollouts:dead");
        QUEUE_PRODUCED.with_label_values(&["unit"]).inc();
        assert!(render().contains("reagent_queue_produced_total{stream=\"unit\"}"));
    }
}
