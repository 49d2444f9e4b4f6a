//! The RRM worker role, as `reagent rrm` starts it: typed `[rrm]`, a Redis link, the judge,
//! `/metrics` `/healthz` `/readyz` on `metrics.listen`, and the worker loop until cancelled.
//!
//! ```text
//!  run_role(cfg, cancel)
//!    RrmConfig::from_reagent ─► RedisLink (redis.url) ─► judge::build ─► http::serve (metrics)
//!    ─► Worker::new (joins group "rrm") ─► ready ─► Worker::run until cancel ─► not ready ─► Ok
//! ```

use tokio_util::sync::CancellationToken;

use protocol::config::{ConfigError, ReagentConfig};
use protocol::http::{self, Ready};
use protocol::link::RedisLink;
use protocol::queue::QueueSettings;
use protocol::wire::RunId;

use crate::config::RrmConfig;
use crate::error::RrmError;
use crate::judge;
use crate::worker::{Worker, WorkerSettings};

/// Runs the RRM worker role until `cancel` fires, then finishes the batch in flight and
/// returns. Needs `redis.url`: a worker joins a running job's Redis.
pub async fn run_role(cfg: &ReagentConfig, cancel: CancellationToken) -> Result<(), RrmError> {
    let rrm = RrmConfig::from_reagent(cfg)?;
    let run = RunId::new(cfg.run.id.clone()).map_err(|e| ConfigError::invalid("run.id", e.expected, e.found))?;
    cfg.redis.url().ok_or_else(|| {
        ConfigError::invalid("redis.url", "the URL of the job's Redis (an RRM worker joins a running job)", "\"\"")
    })?;
    let link = RedisLink::from_config(&cfg.redis)?;
    let judge = judge::build(&rrm)?;
    let ready = Ready::default();
    let http_stop = CancellationToken::new();
    let _stop_http_on_return = http_stop.clone().drop_guard();
    let bound = http::serve_on(&cfg.metrics.listen, ready.clone(), http_stop).await;
    let io = |source| RrmError::Io { what: "serving metrics.listen".into(), source };
    if let Some(addr) = bound.map_err(io)? {
        tracing::info!(%addr, "metrics endpoint listening");
    }
    let queue = QueueSettings { read_count: rrm.batch_size, ..QueueSettings::from(&cfg.queue) };
    let settings = WorkerSettings {
        mode: cfg.run.feedback,
        max_concurrency: rrm.max_concurrency,
        critique_reply_ttl: rrm.critique_reply_ttl(),
    };
    let worker = Worker::new(&link, &run, &rrm.consumer_name(), queue, judge, settings).await?;
    ready.set(true);
    let result = worker.run(cancel).await;
    ready.set(false);
    result.map(drop)
}
