//! The role processes, all in one shape: `reagent learner`, `reagent actor`, `reagent rrm` and
//! `reagent env-worker` each turn SIGTERM and SIGINT into the shutdown token, call their role's
//! `run_role(config, shutdown)`, and print the [`RoleReport`] it returns (the learner after a
//! final checkpoint, an actor after its in-flight groups, an RRM worker after its batch, an
//! env-worker after its grace period). Each role serves its own /metrics, /healthz and /readyz.
//! The learner appends one line per update to `<run.dir>/<run.id>/metrics.jsonl`, which
//! `reagent run` reads for its progress bar and learning curve.
//!
//! ```text
//!  SIGTERM | SIGINT ─► shutdown ─┬─► learner::role::run_role  ─┐
//!                                ├─► actors::run_role          ├─► RoleReport ─► stdout + log
//!                                ├─► rrm_worker::run_role      │
//!                                └─► env_worker::run_role     ─┘
//! ```

use std::future::Future;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use protocol::config::ReagentConfig;
use protocol::role::RoleReport;
use tokio_util::sync::CancellationToken;

use crate::env_worker::EnvWorkerArgs;
use crate::env_worker::EnvWorkerRole;
use clap::Args;

/// Options of `reagent learner`.
#[derive(Debug, Clone, Args)]
pub struct LearnerArgs {
    /// Where the learner's state comes from: `auto` (the newest intact checkpoint, else a
    /// fresh start), `never`, or a checkpoint directory. Overrides learner.resume.
    #[arg(long, value_name = "auto|never|PATH")]
    pub resume: Option<String>,
}

/// The run directory: `<run.dir>/<run.id>`.
pub fn run_dir(cfg: &ReagentConfig) -> PathBuf {
    Path::new(&cfg.run.dir).join(&cfg.run.id)
}

/// Runs one role process: the shutdown token wired to SIGTERM and SIGINT, the role, and its
/// report printed on stdout and logged.
async fn run_process<F, Fut, E>(role: F) -> Result<()>
where
    F: FnOnce(CancellationToken) -> Fut,
    Fut: Future<Output = Result<RoleReport, E>>,
    E: Into<anyhow::Error>,
{
    let shutdown = CancellationToken::new();
    protocol::role::cancel_on_signal(shutdown.clone()).context("listening for SIGTERM and SIGINT")?;
    let report = role(shutdown).await.map_err(Into::into)?;
    tracing::info!(role = report.role, ended = %report.ended, counters = ?report.counters, "role stopped");
    println!("{report}");
    Ok(())
}

/// `reagent learner`.
pub async fn learner(cfg: &ReagentConfig, args: LearnerArgs) -> Result<()> {
    let mut cfg = cfg.clone();
    if let Some(resume) = args.resume {
        cfg.learner.insert("resume".into(), toml::Value::String(resume));
    }
    run_process(|shutdown| learner::role::run_role(&cfg, shutdown)).await
}

/// `reagent actor`.
pub async fn actor(cfg: &ReagentConfig) -> Result<()> {
    run_process(|shutdown| actors::run_role(cfg, shutdown)).await
}

/// `reagent rrm`.
pub async fn rrm(cfg: &ReagentConfig) -> Result<()> {
    run_process(|shutdown| rrm_worker::run_role(cfg, shutdown)).await
}

/// `reagent env-worker`.
pub async fn env_worker(cfg: &ReagentConfig, args: EnvWorkerArgs) -> Result<()> {
    let role = EnvWorkerRole { config: cfg, args };
    run_process(|shutdown| crate::env_worker::run_role(&role, shutdown)).await
}
