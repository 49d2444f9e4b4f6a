//! The actor role: what `reagent actor` runs. It types `[actor]`, connects to Redis, serves
//! /metrics /healthz /readyz, optionally waits for a first published weight version, then runs
//! the supervisor over the process's actors until the shutdown token (SIGTERM in the binary)
//! starts the graceful leave.
//!
//! ```text
//!  run_role ─► [actor] typed + validated ─► Redis PING ─► metrics endpoint
//!     ─► wait_for_weights_ms? ─► rollout limits against the families' reference episodes (warn)
//!     ─► Producer(rollouts, group rrm) ─► supervisor:
//!          policy · weight-sync · publisher · rollout-0 … rollout-(slots−1)
//!     ─► shutdown ─► leave (grace) ─► RoleReport (crate::stats) | ActorError::Escalated
//! ```

use std::sync::Arc;
use std::time::Duration;

use env_workers::service::{EnvWorkerConfig, SessionTable, TableConfig};
use env_workers::user_model::UserModel;
use env_workers::EnvError;
use policy::{ModelConfig, Tokenizer};
use protocol::config::ReagentConfig;
use protocol::http::Endpoint;
use protocol::keys::{Keys, RRM_GROUP};
use protocol::link::RedisLink;
use protocol::queue::{Producer, QueueSettings};
use protocol::role::{Ended, RoleReport};
use protocol::weights::WeightStore;
use protocol::wire::{ActorId, RunId, Trajectory};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::config::{ActorConfig, ModelSource};
use crate::error::{ActorError, Result};
use crate::handle::Handle;
use crate::inference::worker::ModelSpec;
use crate::inference::{PolicyActor, PolicyArgs};
use crate::publisher::{Publisher, PublisherArgs};
use crate::rollout::{CritiqueWait, EnvSource, RolloutActor, RolloutArgs, SlotShared, TaskSource};
use crate::stats::Stats;
use crate::supervisor::{Child, ChildSpec, Supervised, SupervisorArgs};
use crate::weight_sync::{WeightSync, WeightSyncArgs};

/// How long the leave may take beyond `actor.grace_s` (services draining, sessions closing).
pub const LEAVE_MARGIN: Duration = Duration::from_secs(60);
/// How long each service may take to drain and stop during the leave.
pub const SERVICE_STOP_TIMEOUT: Duration = Duration::from_secs(20);

/// This process's actor id: `actor.id`, or `actor-<host name>-<pid>`.
pub fn actor_id(config: &ActorConfig) -> ActorId {
    if !config.id.is_empty() {
        return ActorId(config.id.clone());
    }
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "local".into());
    ActorId(format!("actor-{host}-{}", std::process::id()))
}

/// The model's architecture, weights directory and tokenizer.
fn model_parts(config: &ActorConfig) -> Result<(ModelConfig, Option<std::path::PathBuf>, Arc<dyn Tokenizer>)> {
    let tok: Arc<dyn Tokenizer> = Arc::from(config.tokenizer()?);
    let (model, dir) = match config.model_source() {
        ModelSource::Builtin(name) => (ModelConfig::builtin(&name)?, None),
        ModelSource::Dir(dir) => (ModelConfig::from_file(&dir.join("config.json"))?, Some(dir)),
    };
    if tok.vocab_size() as i64 > model.vocab_size {
        return Err(ActorError::config(
            "actor.model",
            format!("a model whose vocabulary ({}) holds its tokenizer's", model.vocab_size),
            format!("a tokenizer of {} ids", tok.vocab_size()),
        ));
    }
    Ok((model, dir, tok))
}

/// Runs the actor role until `shutdown`, then leaves gracefully; the counters of what was done
/// ([`Stats::report`]), or why the process had to stop.
pub async fn run_role(cfg: &ReagentConfig, shutdown: CancellationToken) -> Result<RoleReport> {
    let config = ActorConfig::from_config(cfg)?;
    let run_id = RunId::new(cfg.run.id.clone()).map_err(|e| ActorError::config("run.id", e.expected, e.found))?;
    // The binary already runs every role inside its role span; a caller without one (a test,
    // an embedding program) gets it here, and the lines never carry it twice.
    let span = if tracing::Span::current().is_none() {
        protocol::telemetry::role_span("actor", &run_id)
    } else {
        tracing::Span::none()
    };
    run(cfg, config, run_id, shutdown).instrument(span).await
}

async fn run(cfg: &ReagentConfig, config: ActorConfig, run_id: RunId, cancel: CancellationToken) -> Result<RoleReport> {
    protocol::role::redis_url(&cfg.redis)?;
    let link = RedisLink::from_config(&cfg.redis)?;
    link.ping().await?;
    let endpoint = Endpoint::start(&cfg.metrics.listen).await?;

    let (model, dir, tokenizer) = model_parts(&config)?;
    // Reads through weights.read_url (the node's replica) when set, else the primary.
    let store = WeightStore::reader(cfg, &link, &run_id)?;
    let stats = Arc::new(Stats::default());
    if !wait_for_weights(&store, Duration::from_millis(config.wait_for_weights_ms), &cancel).await? {
        return Ok(stats.report(0, Ended::ShutdownBeforeStart));
    }
    let keys = Keys::new(&run_id);
    let producer = Arc::new(
        Producer::<Trajectory>::new(link.clone(), keys.rollouts(), RRM_GROUP, QueueSettings::from(&cfg.queue)).await?,
    );
    let actor_id = actor_id(&config);
    let drain = cancel.child_token();
    let rollout = config.rollout_config();
    let context_limit = config.max_context_tokens.min(model.max_position_embeddings as usize);
    // A message cap or context shorter than a family's reference episodes cuts every such
    // episode short: it can never end in an answer, and training learns nothing from it.
    for shortfall in episode::shortfalls(&config.task_mix(), tokenizer.as_ref(), &rollout, context_limit)? {
        tracing::warn!(family = %shortfall.family, "{shortfall}");
    }
    let (policy, publisher) = (Handle::new("policy"), Handle::new("publisher"));

    let policy_args = PolicyArgs {
        model: ModelSpec { config: model, dir, device: config.device },
        tokenizer: tokenizer.clone(),
        sampling: episode::sampling_params(&rollout, tokenizer.as_ref()),
        max_batch: config.max_batch,
        max_wait: Duration::from_millis(config.max_wait_ms),
        store: Some(store.clone()),
        load_timeout: config.call_timeout(),
        seed: 0,
        prefix_cache_bytes: config.prefix_cache_mb << 20,
    };
    let sync_args = WeightSyncArgs {
        store: store.clone(),
        policy: policy.clone(),
        slice: store.settings().poll_interval.min(Duration::from_secs(1)),
        call_timeout: config.call_timeout(),
        stats: stats.clone(),
    };
    let publisher_args = PublisherArgs { producer, store: store.clone(), stats: stats.clone() };
    let shared = SlotShared {
        policy: policy.clone(),
        publisher: publisher.clone(),
        tokenizer,
        rollout: rollout.clone(),
        context_limit,
        run_id: run_id.clone(),
        actor_id: actor_id.clone(),
        group_size: config.group_size,
        call_timeout: config.call_timeout(),
        critique: cfg.run.feedback.refines().then(|| CritiqueWait {
            link: link.clone(),
            keys: keys.clone(),
            wait: config.critique_wait(),
        }),
        tasks: Arc::new(TaskSource::new(link.clone(), &keys, config.task_mix())),
        drain: drain.clone(),
        grace: config.grace(),
        stats: stats.clone(),
    };

    let mut children: Vec<Arc<dyn ChildSpec>> = vec![
        Arc::new(Child::<PolicyActor>::service("policy", policy, move || {
            (PolicyActor, PolicyArgs { seed: rand::random(), ..policy_args.clone() })
        })),
        Arc::new(Child::<WeightSync>::service("weight-sync", Handle::new("weight-sync"), move || {
            (WeightSync, sync_args.clone())
        })),
        Arc::new(Child::<Publisher>::service("publisher", publisher, move || (Publisher, publisher_args.clone()))),
    ];
    // In-process episodes play their simulated user as `[user_model]` says.
    let user_model = UserModel::from_config(cfg).map_err(|e| EnvError::UserModel(e.to_string()))?;
    let local = Arc::new(
        SessionTable::new(TableConfig {
            max_sessions: config.slots * config.group_size * 2 + 16,
            limits: rollout.limits,
            ..TableConfig::default()
        })
        .with_user_model(user_model),
    );
    // Env-workers are reached with the shared token named by env_worker.token_env, if set.
    let env_token = EnvWorkerConfig::from_table(&cfg.env_worker)?.token();
    for index in 0..config.slots {
        let env = match config.env_workers.len() {
            0 => EnvSource::Local(local.clone()),
            n => EnvSource::Remote(config.env_workers[index % n].clone(), config.env_timeout(), env_token.clone()),
        };
        let args = RolloutArgs { index, env, shared: shared.clone() };
        children.push(Arc::new(Child::<RolloutActor>::worker(format!("rollout-{index}"), move || {
            (RolloutActor, args.clone())
        })));
    }

    tracing::info!(
        actor_id = %actor_id,
        slots = config.slots,
        group_size = config.group_size,
        feedback = %cfg.run.feedback,
        env_workers = config.env_workers.len(),
        "actor starting"
    );
    let supervised = Supervised::start(SupervisorArgs {
        children,
        policy: config.restart_policy(),
        drain,
        service_stop_timeout: SERVICE_STOP_TIMEOUT,
        record: Arc::default(),
    })
    .await?;
    let outcome = endpoint.ready_during(supervised.wait(config.grace() + LEAVE_MARGIN)).await;
    let report = stats.report(*outcome.as_ref().unwrap_or(&0), Ended::Shutdown);
    tracing::info!(%report, "actor stopped");
    outcome.map(|_| report)
}

/// Waits up to `wait` for a first published version when none is there yet; `false` when
/// cancelled meanwhile.
async fn wait_for_weights(store: &WeightStore, wait: Duration, cancel: &CancellationToken) -> Result<bool> {
    if wait.is_zero() || store.latest_version().await?.is_some() {
        return Ok(true);
    }
    tracing::info!(wait_ms = wait.as_millis() as u64, "waiting for a first published weight version");
    let mut watcher = store.subscribe(None).await;
    tokio::select! {
        found = watcher.next_version(wait) => {
            if found?.is_none() {
                tracing::info!("no weights published in time; starting from actor.model");
            }
            Ok(true)
        }
        _ = cancel.cancelled() => Ok(false),
    }
}
