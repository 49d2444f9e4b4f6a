//! `reagent serve`: an OpenAI-compatible chat server over a model directory (or a built-in
//! size), or over a live run's newest weights, followed version by version as actors follow
//! them. Requests are batched by the actors' policy actor, so concurrent clients share
//! batches; the routes are in [`http`].
//!
//! ```text
//!  clients ─HTTP─► axum (key, limits, deadline) ─Generate─► PolicyActor ─► policy thread (tch)
//!                                                 WeightSync ─Swap─┘   (--follow: the run's WeightStore)
//! ```

pub mod api;
mod http;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use actors::config::{DeviceChoice, ModelSource};
use actors::handle::Handle;
use actors::inference::worker::ModelSpec;
use actors::inference::{PolicyActor, PolicyArgs};
use actors::weight_sync::{WeightSync, WeightSyncArgs};
use anyhow::{bail, Context, Result};
use policy::{ByteTokenizer, ModelConfig, SamplingParams, Tokenizer};
use protocol::config::ReagentConfig;
use protocol::link::RedisLink;
use protocol::weights::WeightStore;
use protocol::wire::RunId;
use ractor::Actor;
use tokio_util::sync::CancellationToken;

use api::Limits;
use http::AppState;

/// `reagent serve`'s arguments.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// A model directory (config.json, safetensors, optional tokenizer.json; e.g. `reagent
    /// export`'s) or a built-in size. With --follow: the run's actor.model by default.
    #[arg(long)]
    pub model: Option<String>,
    /// Serve the newest weights the run of --config publishes, swapping in each new version
    /// between batches (needs the run's Redis).
    #[arg(long)]
    pub follow: bool,
    /// Address to listen on (port 0 picks a free one; the address is printed).
    #[arg(long, default_value = "127.0.0.1:8000")]
    pub listen: String,
    /// Bearer token clients must send; when unset, no key is asked for.
    #[arg(long, env = "REAGENT_SERVE_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// The model name /v1/models lists (default: the directory's or size's name).
    #[arg(long)]
    pub served_model_name: Option<String>,
    /// The sampling temperature of requests that give none (0: greedy); a request's own
    /// `temperature` wins.
    #[arg(long, default_value_t = 0.7)]
    pub temperature: f64,
    /// The largest max_tokens a request may ask for (and the default).
    #[arg(long, default_value_t = 512)]
    pub max_tokens: usize,
    /// The most messages in one request.
    #[arg(long, default_value_t = 64)]
    pub max_messages: usize,
    /// The most completions (n) in one request.
    #[arg(long, default_value_t = 8)]
    pub max_n: usize,
    /// The largest request body in bytes.
    #[arg(long, default_value_t = 1 << 20)]
    pub max_body_bytes: usize,
    /// Seconds a request may take, from its body's first byte to its answer.
    #[arg(long, default_value_t = 120.0)]
    pub deadline_s: f64,
    /// Most requests in one generation batch.
    #[arg(long, default_value_t = 16)]
    pub max_batch: usize,
    /// Longest a request waits for its batch to fill, in milliseconds.
    #[arg(long, default_value_t = 10)]
    pub max_wait_ms: u64,
    /// cpu, cuda or auto.
    #[arg(long, default_value = "auto")]
    pub device: String,
    /// MB of keys and values kept between requests, so that a conversation's next request
    /// prefills only what it adds (0: none).
    #[arg(long, default_value_t = 1024)]
    pub prefix_cache_mb: usize,
}

/// The model's architecture, weights directory, tokenizer and default name.
type ModelParts = (ModelConfig, Option<PathBuf>, Arc<dyn Tokenizer>, String);

/// The [`ModelParts`] of `--model`.
fn model_parts(spec: &str) -> Result<ModelParts> {
    let source = match spec.trim() {
        name @ ("micro" | "tiny" | "small") => ModelSource::Builtin(name.to_string()),
        dir => ModelSource::Dir(PathBuf::from(dir)),
    };
    Ok(match source {
        ModelSource::Builtin(name) => (ModelConfig::builtin(&name)?, None, Arc::new(ByteTokenizer), name),
        ModelSource::Dir(dir) => {
            let config = dir.join("config.json");
            if !config.is_file() {
                bail!("--model {}: no config.json there (a model directory, or micro, tiny, small)", dir.display());
            }
            let cfg = ModelConfig::from_file(&config)?;
            let tok: Arc<dyn Tokenizer> = Arc::from(policy::pretrained::tokenizer_for_dir(&dir)?);
            let name = dir.file_name().map_or("model".into(), |n| n.to_string_lossy().into_owned());
            (cfg, Some(dir), tok, name)
        }
    })
}

fn device(text: &str) -> Result<DeviceChoice> {
    Ok(match text {
        "auto" => DeviceChoice::Auto,
        "cpu" => DeviceChoice::Cpu,
        "cuda" => DeviceChoice::Cuda,
        other => bail!("--device {other:?}: expected auto, cpu or cuda"),
    })
}

/// The run's weight store, for --follow.
fn store(cfg: &ReagentConfig) -> Result<WeightStore> {
    let url = cfg.redis.url();
    if url.is_none() {
        bail!("--follow needs the run's Redis: pass --config <run dir>/config.toml (redis.url is empty)");
    }
    let link = RedisLink::from_config(&cfg.redis)?;
    let run = RunId::new(cfg.run.id.clone()).map_err(|e| anyhow::anyhow!("run.id: {e:?}"))?;
    Ok(WeightStore::reader(cfg, &link, &run)?)
}

fn check(args: &ServeArgs) -> Result<()> {
    if !(args.temperature.is_finite() && args.temperature >= 0.0) {
        bail!("--temperature must be finite and ≥ 0, got {}", args.temperature);
    }
    if args.max_tokens == 0 || args.max_messages == 0 || args.max_n == 0 || args.max_batch == 0 {
        bail!("--max-tokens, --max-messages, --max-n and --max-batch must be at least 1");
    }
    if !(args.deadline_s.is_finite() && args.deadline_s > 0.0) {
        bail!("--deadline-s must be a positive number of seconds, got {}", args.deadline_s);
    }
    if args.api_key.as_deref().is_some_and(|k| k.trim().is_empty()) {
        bail!("--api-key (REAGENT_SERVE_API_KEY) is set but empty");
    }
    Ok(())
}

/// `reagent serve`: serves until SIGTERM or Ctrl-C.
pub async fn run(cfg: Option<&ReagentConfig>, args: ServeArgs) -> Result<()> {
    check(&args)?;
    let store = match (args.follow, cfg) {
        (true, Some(cfg)) => Some(store(cfg)?),
        (true, None) => bail!("--follow needs the run's configuration (--config <run dir>/config.toml)"),
        (false, _) => None,
    };
    let spec = match (&args.model, args.follow, cfg) {
        (Some(m), _, _) => m.clone(),
        (None, true, Some(cfg)) => actors::ActorConfig::from_config(cfg)?.model,
        (None, _, _) => bail!("--model is required (a model directory or micro, tiny, small) unless --follow"),
    };
    let (config, dir, tokenizer, default_name) = model_parts(&spec)?;
    let template = tokenizer.chat_template();
    let sampling = SamplingParams {
        temperature: args.temperature,
        top_p: 1.0,
        max_new_tokens: args.max_tokens,
        stop_sequences: template.stop_sequences(),
        eos_id: Some(tokenizer.special_ids().eos),
    };
    let deadline = Duration::from_secs_f64(args.deadline_s);
    let policy = Handle::new("policy");
    let policy_args = PolicyArgs {
        model: ModelSpec { config, dir, device: device(&args.device)? },
        tokenizer: tokenizer.clone(),
        sampling: sampling.clone(),
        max_batch: args.max_batch,
        max_wait: Duration::from_millis(args.max_wait_ms),
        store: store.clone(),
        load_timeout: Duration::from_secs(300),
        seed: rand::random(),
        prefix_cache_bytes: args.prefix_cache_mb << 20,
    };
    let (actor, _policy_task) =
        Actor::spawn(None, PolicyActor, policy_args).await.context("starting the policy actor")?;
    policy.set(actor.clone());
    let sync = match store {
        Some(store) => {
            let sync_args = WeightSyncArgs {
                store,
                policy: policy.clone(),
                slice: Duration::from_secs(1),
                call_timeout: deadline,
                stats: Arc::default(),
            };
            Some(Actor::spawn(None, WeightSync, sync_args).await.context("starting the weight sync")?.0)
        }
        None => None,
    };
    let state = Arc::new(AppState {
        policy,
        tokenizer,
        template,
        sampling,
        model_name: args.served_model_name.clone().unwrap_or(default_name),
        api_key: args.api_key.clone(),
        limits: Limits { max_messages: args.max_messages, max_tokens: args.max_tokens, max_n: args.max_n },
        max_body_bytes: args.max_body_bytes,
        deadline,
    });
    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .with_context(|| format!("binding --listen {}", args.listen))?;
    let addr = listener.local_addr()?;
    println!("serving {} on http://{addr}/v1 (chat/completions, models; /metrics)", state.model_name);
    let stop = CancellationToken::new();
    protocol::role::cancel_on_signal(stop.clone()).context("listening for SIGTERM and SIGINT")?;
    let served = axum::serve(listener, http::router(state)).with_graceful_shutdown(stop.cancelled_owned()).await;
    if let Some(sync) = sync {
        sync.stop(None);
    }
    actor.stop(None);
    served.context("serving")
}
