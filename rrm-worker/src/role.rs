//! The RRM worker role, as `reagent rrm` starts it: typed `[rrm]`, a Redis link, the judge,
//! `/metrics` `/healthz` `/readyz` on `metrics.listen`, and the worker loop until shut down.
//!
//! ```text
//!  run_role(cfg, shutdown)
//!    RrmConfig::from_config, actor.refine (RefineWhich::of_job) ─► redis.url ─► RedisLink ─► judge::build ─► http::Endpoint (metrics)
//!    ─► Worker::new (joins group "rrm") ─► ready ─► Worker::run until shutdown ─► not ready ─► RoleReport
//! ```

use tokio_util::sync::CancellationToken;

use protocol::config::{ConfigError, ReagentConfig};
use protocol::http::Endpoint;
use protocol::link::RedisLink;
use protocol::queue::QueueSettings;
use protocol::role::{Ended, RoleReport};
use protocol::wire::RunId;

use crate::config::RrmConfig;
use crate::error::RrmError;
use crate::judge;
use crate::worker::{Plan, Worker, WorkerSettings, WorkerStats};

/// Runs the RRM worker role until `shutdown` fires, then finishes the batch in flight and
/// returns what it did ([`report`]). Needs `redis.url`: a worker joins a running job's Redis.
pub async fn run_role(cfg: &ReagentConfig, shutdown: CancellationToken) -> Result<RoleReport, RrmError> {
    let rrm = RrmConfig::from_config(cfg)?;
    let refine = episode::RefineWhich::of_job(cfg)?;
    let run = RunId::new(cfg.run.id.clone()).map_err(|e| ConfigError::invalid("run.id", e.expected, e.found))?;
    protocol::role::redis_url(&cfg.redis)?;
    let link = RedisLink::from_config(&cfg.redis)?;
    let judge = judge::build_for_job(cfg, &rrm).await?;
    let endpoint = Endpoint::start(&cfg.metrics.listen).await?;
    let queue = QueueSettings { read_count: rrm.batch_size, ..QueueSettings::from(&cfg.queue) };
    let settings = WorkerSettings {
        plan: Plan { mode: cfg.run.feedback, refine },
        max_concurrency: rrm.max_concurrency,
        critique_reply_ttl: rrm.critique_reply_ttl(),
    };
    let worker = Worker::new(&link, &run, &rrm.consumer_name(), queue, judge, settings).await?;
    let result = endpoint.ready_during(worker.run(shutdown)).await;
    result.map(|stats| report(&stats))
}

/// The RRM role's report: the worker's counters under their field names.
pub fn report(stats: &WorkerStats) -> RoleReport {
    RoleReport::new("rrm", Ended::Shutdown)
        .with("batches", stats.batches)
        .with("judged", stats.judged)
        .with("failed", stats.failed)
        .with("not_requested", stats.not_requested)
        .with("unrefined_skipped", stats.unrefined_skipped)
        .with("replies", stats.replies)
        .with("reclaimed_meanwhile", stats.reclaimed_meanwhile)
}
