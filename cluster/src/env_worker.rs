//! `reagent env-worker`: hosts environment sessions for actors over tarpc until shut down
//! (SIGTERM or Ctrl-C in the binary), then refuses new sessions and gives open ones a grace
//! period (docs/architecture.md section 5: leaving is graceful). Serves /metrics, /healthz and /readyz on
//! `metrics.listen`. Off loopback it requires the shared token named by `env_worker.token_env`
//! and refuses to start without it.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use env_workers::service::{serve, EnvWorkerConfig, ServeOptions, SessionTable, TableConfig};
use env_workers::user_model::UserModel;
use protocol::config::ReagentConfig;
use protocol::http::Endpoint;
use protocol::role::{Ended, RoleReport};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use clap::Args;

/// Options of `reagent env-worker`.
#[derive(Debug, Clone, Args)]
pub struct EnvWorkerArgs {
    /// Address to listen on (`host:port`; port 0 picks a free one, printed at start).
    #[arg(long, default_value = "127.0.0.1:7100", value_name = "ADDR")]
    pub listen: std::net::SocketAddr,

    /// Most sessions open at once; opening more gets a clear "full" error.
    #[arg(long, default_value_t = 4096, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_sessions: u64,

    /// A session untouched for this many seconds is dropped (its client is presumed gone).
    #[arg(long, default_value_t = 300, value_name = "S", value_parser = clap::value_parser!(u64).range(1..))]
    pub idle_timeout_s: u64,

    /// On SIGTERM, seconds open sessions get to finish before the worker exits.
    #[arg(long, default_value_t = 30, value_name = "S")]
    pub grace_s: u64,
}

/// What an env-worker runs with: the job's configuration (`[env_worker]`, `[user_model]`, `[metrics]`) and the
/// command line's listen address, capacity and grace.
pub struct EnvWorkerRole<'a> {
    /// The job's configuration.
    pub config: &'a ReagentConfig,
    /// `reagent env-worker`'s options.
    pub args: EnvWorkerArgs,
}

/// Runs the worker until `shutdown`, then drains; reports the sessions still open at the end
/// of the grace period (`sessions_left_open`).
pub async fn run_role(role: &EnvWorkerRole<'_>, shutdown: CancellationToken) -> Result<RoleReport> {
    let (config, args) = (role.config, &role.args);
    let service = EnvWorkerConfig::from_table(&config.env_worker)?;
    let token = service.token_for(args.listen)?;
    let listener = TcpListener::bind(args.listen).await.with_context(|| format!("binding --listen {}", args.listen))?;
    let addr = listener.local_addr()?;
    let user_model = UserModel::from_config(config)?;
    let table = Arc::new(
        SessionTable::new(TableConfig {
            max_sessions: args.max_sessions as usize,
            max_per_owner: service.max_sessions_per_connection,
            idle_timeout: Duration::from_secs(args.idle_timeout_s),
            ..TableConfig::default()
        })
        .with_user_model(user_model),
    );
    let endpoint = Endpoint::start(&config.metrics.listen).await?;
    // Printed on stdout so launchers and tests can read the bound port.
    println!("env-worker listening on {addr}");
    endpoint.set_ready(true);
    // Not ready from the moment it starts leaving: it refuses new sessions then.
    let (ready, leaving) = (endpoint.ready().clone(), shutdown.clone());
    tokio::spawn(async move {
        leaving.cancelled().await;
        ready.set(false);
    });
    let options = ServeOptions { config: service, token, grace: Duration::from_secs(args.grace_s) };
    serve(listener, table.clone(), options, shutdown).await?;
    Ok(RoleReport::new("env-worker", Ended::Shutdown).with("sessions_left_open", table.len() as u64))
}
