//! `reagent learner`, `reagent actor`, `reagent rrm`: the roles as separate processes, all from
//! one configuration. Each runs until SIGTERM or Ctrl-C, then leaves gracefully (the learner
//! after a final checkpoint, an actor after its in-flight groups, an RRM worker after its
//! batch). The learner appends one line per update to `<run.dir>/<run.id>/metrics.jsonl`
//! (learner::role), which `reagent run` reads for its progress bar and learning curve.
//!
//! ```text
//!  config ─► learner::role::run_role  ─► metrics.jsonl  (+ /metrics, /healthz, /readyz)
//!         ─► actors::run_role                           (serves its own endpoints)
//!         ─► rrm_worker::run_role                       (serves its own endpoints)
//! ```

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use protocol::config::ReagentConfig;
use protocol::link::RedisLink;
use tokio_util::sync::CancellationToken;

use crate::cli::LearnerArgs;
use crate::env_worker::shutdown_on_signal;

/// The run directory: `<run.dir>/<run.id>`.
pub fn run_dir(cfg: &ReagentConfig) -> PathBuf {
    Path::new(&cfg.run.dir).join(&cfg.run.id)
}

/// The job's Redis, which a role process joins (it never starts one).
fn redis_link(cfg: &ReagentConfig, role: &str) -> Result<RedisLink> {
    cfg.redis.url().with_context(|| {
        format!(
            "redis.url is empty: `reagent {role}` joins a running job's Redis; set redis.url \
             (or REAGENT__REDIS__URL), or use `reagent run`, which starts a private one"
        )
    })?;
    Ok(RedisLink::from_config(&cfg.redis)?)
}

/// `reagent learner`.
pub async fn learner(cfg: &ReagentConfig, args: LearnerArgs) -> Result<()> {
    let mut cfg = cfg.clone();
    if let Some(resume) = args.resume {
        cfg.learner.insert("resume".into(), toml::Value::String(resume));
    }
    let link = redis_link(&cfg, "learner")?;
    let dir = run_dir(&cfg);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating the run directory {}", dir.display()))?;
    let stop = CancellationToken::new();
    let ready = protocol::http::Ready::default();
    let http_stop = CancellationToken::new();
    let _stop_http = http_stop.clone().drop_guard();
    if let Some(addr) = protocol::http::serve_on(&cfg.metrics.listen, ready.clone(), http_stop).await? {
        println!("learner metrics on http://{addr}/metrics");
    }
    tokio::spawn(shutdown_on_signal(stop.clone()));
    let status = learner::role::run_role(&cfg, &link, stop, |rx| {
        let s = rx.borrow().clone();
        println!("learner started at step {} version {} (resumed from {:?})", s.step, s.version.0, s.resumed_from);
        ready.set(true);
    })
    .await?;
    ready.set(false);
    println!(
        "learner stopped at step {} version {}: {} trajectories applied, {} duplicates skipped, {} stale dropped",
        status.step, status.version.0, status.applied, status.duplicates, status.stale_dropped
    );
    Ok(())
}

/// `reagent actor`.
pub async fn actor(cfg: &ReagentConfig) -> Result<()> {
    let stop = CancellationToken::new();
    tokio::spawn(shutdown_on_signal(stop.clone()));
    let report = actors::run_role(cfg, stop).await?;
    println!("actor left: {report:?}");
    Ok(())
}

/// `reagent rrm`.
pub async fn rrm(cfg: &ReagentConfig) -> Result<()> {
    let stop = CancellationToken::new();
    tokio::spawn(shutdown_on_signal(stop.clone()));
    rrm_worker::run_role(cfg, stop).await?;
    println!("rrm worker stopped");
    Ok(())
}
