//! `reagent env-worker`: hosts environment sessions for actors over tarpc until SIGTERM or
//! Ctrl-C, then refuses new sessions and gives open ones a grace period (DESIGN.md section 5:
//! leaving is graceful). Serves /metrics, /healthz and /readyz on `metrics.listen`. Off
//! loopback it requires the shared token named by `env_worker.token_env` and refuses to start
//! without it.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use env_workers::service::{serve, EnvWorkerConfig, ServeOptions, SessionTable, TableConfig};
use protocol::config::ReagentConfig;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::cli::EnvWorkerArgs;

/// Runs the worker until a shutdown signal, then drains.
pub async fn run(config: &ReagentConfig, args: EnvWorkerArgs) -> Result<()> {
    let service = EnvWorkerConfig::from_table(&config.env_worker)?;
    let token = service.token_for(args.listen)?;
    let listener = TcpListener::bind(args.listen).await.with_context(|| format!("binding --listen {}", args.listen))?;
    let addr = listener.local_addr()?;
    let table = Arc::new(SessionTable::new(TableConfig {
        max_sessions: args.max_sessions as usize,
        max_per_owner: service.max_sessions_per_connection,
        idle_timeout: Duration::from_secs(args.idle_timeout_s),
        ..TableConfig::default()
    }));
    let stop = CancellationToken::new();
    let ready = protocol::http::Ready::default();
    if let Some(metrics) = protocol::http::serve_on(&config.metrics.listen, ready.clone(), stop.clone()).await? {
        tracing::info!(%metrics, "metrics endpoint listening");
    }
    tokio::spawn(shutdown_on_signal(stop.clone()));
    // Printed on stdout so launchers and tests can read the bound port.
    println!("env-worker listening on {addr}");
    ready.set(true);
    let options = ServeOptions { config: service, token, grace: Duration::from_secs(args.grace_s) };
    serve(listener, table, options, stop).await?;
    Ok(())
}

/// Cancels `stop` on SIGTERM or Ctrl-C.
pub async fn shutdown_on_signal(stop: CancellationToken) {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM; only Ctrl-C stops this process");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        _ = term => tracing::info!("SIGTERM: shutting down gracefully"),
        _ = tokio::signal::ctrl_c() => tracing::info!("Ctrl-C: shutting down gracefully"),
    }
    stop.cancel();
}
