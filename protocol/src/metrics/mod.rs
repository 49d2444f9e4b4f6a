//! Prometheus metrics: every Reagent metric is defined here, once — the data plane's below, each
//! role's and `reagent serve`'s in its own file ([`actor`], [`learner`], [`rrm`], [`serve`]; their
//! items are re-exported here) — and registered through `register` in the one registry that each
//! process serves at `/metrics`. No other crate registers a metric.
//!
//! ```text
//!  metrics/mod.rs      REGISTRY, register, render; queue, Redis and weight metrics (reagent_queue_*, …)
//!  metrics/actor.rs    reagent_actor_*
//!  metrics/learner.rs  reagent_learner_*
//!  metrics/rrm.rs      reagent_rrm_*
//!  metrics/serve.rs    reagent_serve_*
//!  metrics/chat.rs     ChatMetrics (where a chat client counts); reagent_user_model_*
//! ```
//!
//! Names follow Prometheus conventions: `reagent_` prefix, `_total` for counters, base units
//! (seconds, bytes). Labels are low-cardinality (a stream's short name, an operation), never ids.

mod actor;
mod chat;
mod learner;
mod rrm;
mod serve;

use std::sync::LazyLock;

use prometheus::core::Collector;
use prometheus::{
    CounterVec, Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec,
    Opts, Registry, TextEncoder,
};

pub use actor::*;
pub use chat::*;
pub use learner::*;
pub use rrm::*;
pub use serve::*;

/// The registry every Reagent metric is registered in.
pub static REGISTRY: LazyLock<Registry> = LazyLock::new(Registry::new);

/// Registers a freshly defined metric in [`REGISTRY`] and hands it back: the one place a
/// metric is registered. Definitions are static, so an invalid one or a name used twice is a
/// bug, and panics on first use.
fn register<M: Collector + Clone + 'static>(metric: prometheus::Result<M>) -> M {
    let m = metric.expect("metric definition is valid");
    REGISTRY.register(Box::new(m.clone())).expect("metric names are unique");
    m
}

fn counter(name: &str, help: &str) -> IntCounter {
    register(IntCounter::new(name, help))
}

fn counter_vec(name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    register(IntCounterVec::new(Opts::new(name, help), labels))
}

fn gauge(name: &str, help: &str) -> IntGauge {
    register(IntGauge::new(name, help))
}

fn gauge_vec(name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    register(IntGaugeVec::new(Opts::new(name, help), labels))
}

fn histogram(name: &str, help: &str, buckets: Vec<f64>) -> Histogram {
    register(Histogram::with_opts(HistogramOpts::new(name, help).buckets(buckets)))
}

fn histogram_vec(name: &str, help: &str, labels: &[&str], buckets: Vec<f64>) -> HistogramVec {
    register(HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets), labels))
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
    let help = "Seconds producers spent waiting at the high-water mark.";
    register(CounterVec::new(Opts::new("reagent_queue_backpressure_seconds_total", help), &["stream"]))
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
/// Publish attempts Redis refused for want of memory (`maxmemory`), each retried later.
pub static WEIGHTS_PUBLISH_REFUSED: LazyLock<IntCounter> = LazyLock::new(|| {
    counter(
        "reagent_weights_publish_refused_total",
        "Weight publishes Redis refused for want of memory (maxmemory), each retried later.",
    )
});
/// Weight versions fetched and verified.
pub static WEIGHTS_FETCHED: LazyLock<IntCounter> =
    LazyLock::new(|| counter("reagent_weights_fetched_total", "Weight versions fetched and verified."));
/// Weight fetches that failed their checksum.
pub static WEIGHTS_CORRUPT: LazyLock<IntCounter> =
    LazyLock::new(|| counter("reagent_weights_corrupt_total", "Weight fetches that failed a checksum."));
/// Weight reads that fell back from `weights.read_url` (a replica) to `redis.url`.
pub static WEIGHTS_READ_FALLBACKS: LazyLock<IntCounter> = LazyLock::new(|| {
    counter(
        "reagent_weights_read_fallbacks_total",
        "Weight reads that fell back from the read replica (weights.read_url) to redis.url.",
    )
});
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
