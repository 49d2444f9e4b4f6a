//! The learner as a role process (`reagent learner`): the `[learner]` section of the job's
//! configuration turned into a [`ServiceSpec`] and an initial model, then the queue learner
//! ([`crate::service`]) run until shut down ([`run_role`], serving its metrics endpoint).
//!
//! ```text
//!  [learner] ─┬─ model, checkpoint_dir, consumer   (role keys, read here)
//!             ├─ [learner.service]                 (ServiceConfig: batching, deadlines)
//!             └─ everything else                   (LearnerConfig: loss, optimizer, resume)
//!  run.feedback ─► LearnerConfig::feedback
//!  model: a built-in size (seeded by learner.seed) or a model directory ─► LoadedModel on CUDA if any
//! ```

use std::path::{Path, PathBuf};

use policy::device::DeviceChoice;
use policy::{LoadedModel, ModelConfig};
use protocol::config::{section, Precision, ReagentConfig};
use protocol::http::Endpoint;
use protocol::link::RedisLink;
use protocol::role::{Ended, RoleReport};
use protocol::wire::RunId;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use crate::config::LearnerConfig;
use crate::error::{LearnerError, Result};
use crate::service::config::ServiceConfig;
use crate::service::{LearnerService, LearnerStatus, ServiceSpec};

/// The `[learner]` keys that are about the process rather than the training method.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoleKeys {
    /// The model to start from: a built-in size (`micro`, `tiny`, `small`) or a model
    /// directory (config.json + safetensors, e.g. `reagent sft`'s output).
    pub model: String,
    /// Where checkpoints go; empty: `<run.dir>/<run.id>/checkpoints`.
    pub checkpoint_dir: String,
    /// The consumer name in group `learner`; keep it stable across restarts.
    pub consumer: String,
    /// Where the model trains: `auto` (the first CUDA device, else the CPU; the choice is
    /// logged), `cpu`, or `cuda` (an error at start when libtorch sees no CUDA device).
    pub device: DeviceChoice,
}

/// The `[learner]` keys the role reads itself; the rest is the method's [`LearnerConfig`].
pub(crate) const ROLE_KEYS: [&str; 4] = ["model", "checkpoint_dir", "consumer", "device"];

fn config_error(e: protocol::config::ConfigError) -> LearnerError {
    match e {
        protocol::config::ConfigError::Key { key, detail } => LearnerError::config(key, "a valid value", detail),
        other => LearnerError::config("learner", "a valid section", other),
    }
}

/// What a learner process runs with: the spec and where its initial model comes from.
#[derive(Debug, Clone)]
pub struct LearnerRole {
    /// The service's spec.
    pub spec: ServiceSpec,
    /// The role keys.
    pub keys: RoleKeys,
}

impl LearnerRole {
    /// Reads `[learner]` (and `run.feedback`) from the job's configuration; errors name the key.
    pub fn from_config(cfg: &ReagentConfig) -> Result<Self> {
        let mut method = cfg.learner.clone();
        let service = method.remove("service").unwrap_or_else(|| toml::Value::Table(toml::Table::new()));
        let service_table = match service {
            toml::Value::Table(t) => t,
            other => return Err(LearnerError::config("learner.service", "a table ([learner.service])", other)),
        };
        let mut role = toml::Table::new();
        for key in ROLE_KEYS {
            if let Some(v) = method.remove(key) {
                role.insert(key.to_string(), v);
            }
        }
        let keys: RoleKeys = section("learner", &role).map_err(config_error)?;
        let mut learner: LearnerConfig = section("learner", &method).map_err(config_error)?;
        learner.feedback = cfg.run.feedback;
        let refine = episode::RefineWhich::of_job(cfg)?;
        let service: ServiceConfig = section("learner.service", &service_table).map_err(config_error)?;
        let run = RunId::new(cfg.run.id.clone()).map_err(|e| LearnerError::config("run.id", e.expected, e.found))?;
        let checkpoint_dir = if keys.checkpoint_dir.trim().is_empty() {
            Path::new(&cfg.run.dir).join(&cfg.run.id).join("checkpoints")
        } else {
            PathBuf::from(&keys.checkpoint_dir)
        };
        let spec = ServiceSpec {
            run,
            consumer: keys.consumer.clone(),
            checkpoint_dir,
            learner,
            service,
            queue: (&cfg.queue).into(),
            weights: (&cfg.weights).into(),
            refine,
            // The pad id of the model's own tokenizer (padded positions are masked either way).
            pad_id: policy::pretrained::tokenizer_for_model(&keys.model)?.special_ids().pad,
            records: Some(Path::new(&cfg.run.dir).join(&cfg.run.id).join("metrics.jsonl")),
            tensorboard: Some(Path::new(&cfg.run.dir).join(&cfg.run.id).join(crate::tensorboard::DIR)),
        };
        spec.validate()?;
        Ok(Self { spec, keys })
    }

    /// The initial model on `learner.device` (resolved and logged here; `cuda` without a CUDA
    /// device is an error naming the key): the model directory, or the built-in size with
    /// weights drawn from `learner.seed`.
    pub fn initial_model(&self) -> Result<LoadedModel> {
        let device = policy::device::resolve(self.keys.device, "learner.device").map_err(|e| {
            LearnerError::config("learner.device", format!("\"auto\" or \"cpu\" here ({e})"), "\"cuda\"")
        })?;
        load_model_on(&self.keys.model, self.spec.learner.seed, self.spec.learner.precision, device)
    }
}

/// A built-in size (weights from `seed`) or a model directory, on CUDA when there is one, in
/// the device's kind.
pub fn load_model(model: &str, seed: u64) -> Result<LoadedModel> {
    load_model_on(model, seed, Precision::Auto, policy::device::pick())
}

/// [`load_model`] on `device`, with weights of the kind `precision` gives there
/// (`learner.precision`: the optimizer keeps fp32 masters of weights in another kind).
pub fn load_model_on(model: &str, seed: u64, precision: Precision, device: tch::Device) -> Result<LoadedModel> {
    let kind = policy::device::precision_kind(precision, device);
    let path = Path::new(model);
    if policy::pretrained::is_model_dir(path) {
        return Ok(LoadedModel::from_dir_as(path, device, kind, false)?);
    }
    let config = ModelConfig::builtin(model).map_err(|_| {
        LearnerError::config(
            "learner.model",
            "a built-in size (micro, tiny, small) or a model directory with config.json",
            format!("{model:?}"),
        )
    })?;
    Ok(policy::seed::seeded(seed as i64, || LoadedModel::fresh_as(&config, device, kind, false))?)
}

/// Runs the learner role until `shutdown`: joins the job's Redis (`redis.url`), serves its
/// metrics endpoint (ready once the service has started), resumes or starts, then consumes,
/// trains, publishes and checkpoints (see [`crate::service`]); returns what it did
/// ([`report`]). Creates the run directory, where `metrics.jsonl` goes.
pub async fn run_role(cfg: &ReagentConfig, shutdown: CancellationToken) -> Result<RoleReport> {
    let role = LearnerRole::from_config(cfg)?;
    protocol::role::redis_url(&cfg.redis)?;
    let link = RedisLink::from_config(&cfg.redis)?;
    let dir = Path::new(&cfg.run.dir).join(&cfg.run.id);
    std::fs::create_dir_all(&dir).map_err(|e| LearnerError::io(&dir, e))?;
    let endpoint = Endpoint::start(&cfg.metrics.listen).await?;
    // learner.precision decides the kind the model trains in.
    let loader = role.clone();
    let model = tokio::task::spawn_blocking(move || loader.initial_model())
        .await
        .map_err(|source| LearnerError::Task { what: "loading the initial model".into(), source })??;
    let service = LearnerService::start(role.spec, model, &link).await?;
    {
        let s = service.status().borrow().clone();
        tracing::info!(step = s.step, version = s.version.0, resumed_from = ?s.resumed_from, "learner started");
    }
    let status = endpoint.ready_during(service.run(shutdown)).await;
    status.map(|s| report(&s))
}

/// The learner role's report: where it stopped (`step`, `version`) and what this process did.
pub fn report(status: &LearnerStatus) -> RoleReport {
    RoleReport::new("learner", Ended::Shutdown)
        .with("step", status.step)
        .with("version", status.version.0)
        .with("applied", status.applied)
        .with("duplicates", status.duplicates)
        .with("stale_dropped", status.stale_dropped)
        .with("dead_lettered", status.dead_lettered)
        .with("skipped_updates", status.skipped_updates)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_job_gives_a_valid_spec_and_errors_name_their_key() {
        let cfg = ReagentConfig::from_toml_str("[run]\nfeedback = \"score\"\n").unwrap();
        let role = LearnerRole::from_config(&cfg).unwrap();
        assert_eq!(role.spec.learner.feedback, protocol::wire::FeedbackMode::Score, "run.feedback is copied in");
        assert_eq!(role.spec.service, ServiceConfig::default());
        assert_eq!(
            role.spec.learner,
            LearnerConfig { feedback: role.spec.learner.feedback, ..LearnerConfig::default() }
        );
        assert_eq!(role.spec.checkpoint_dir, Path::new("runs/default/checkpoints"));
        assert_eq!(role.spec.refine, episode::RefineWhich::All);
        let failed = ReagentConfig::from_toml_str("[actor]\nrefine = \"failed\"\n").unwrap();
        assert_eq!(LearnerRole::from_config(&failed).unwrap().spec.refine, episode::RefineWhich::Failed, "copied in");
        assert_eq!((role.keys.model.as_str(), role.spec.consumer.as_str()), ("tiny", "learner"));

        let err = |text: &str| {
            LearnerRole::from_config(&ReagentConfig::from_toml_str(text).unwrap()).unwrap_err().to_string()
        };
        assert!(err("[learner]\nclip_hgh = 1\n").contains("clip_hgh"));
        assert!(err("[learner.service]\ngroup_size = \"eight\"\n").contains("learner.service.group_size"));
        assert!(err("[learner]\nclip_low = 2.0\n").contains("learner.clip_low"));
        assert!(err("[actor]\nrefine = \"some\"\n").contains("actor.refine"));
        // A high-water mark below what the learner holds until a checkpoint is fine: backpressure
        // counts only undelivered entries (learner/tests/suite/service/flow.rs runs such a job).
        let small_mark = "[queue]\nhigh_water_mark = 100\n[learner]\ncheckpoint_every = 4\n";
        assert!(LearnerRole::from_config(&ReagentConfig::from_toml_str(small_mark).unwrap()).is_ok());
        let model = load_model("huge", 0).unwrap_err().to_string();
        assert!(model.contains("learner.model") && model.contains("huge"), "{model}");
    }

    /// `learner.device = "cuda"` where libtorch sees no CUDA device is refused at start, naming
    /// the key, instead of training on the CPU unnoticed (the learner used to pick the device
    /// itself, silently); `auto` takes the CPU here.
    #[test]
    fn a_missing_gpu_stops_the_learner_naming_learner_device() {
        let role = |text: &str| LearnerRole::from_config(&ReagentConfig::from_toml_str(text).unwrap()).unwrap();
        let cuda = role("[learner]\nmodel = \"micro\"\ndevice = \"cuda\"\n");
        assert_eq!(cuda.keys.device, DeviceChoice::Cuda);
        let auto = role("[learner]\nmodel = \"micro\"\n");
        assert_eq!(auto.keys.device, DeviceChoice::Auto, "the default");
        let cpu = role("[learner]\nmodel = \"micro\"\ndevice = \"cpu\"\n");
        assert_eq!(cpu.initial_model().unwrap().model.device(), tch::Device::Cpu);
        if policy::device::cuda_available() {
            assert!(cuda.initial_model().unwrap().model.device().is_cuda());
            return;
        }
        assert_eq!(auto.initial_model().unwrap().model.device(), tch::Device::Cpu);
        let err = cuda.initial_model().unwrap_err().to_string();
        assert!(err.contains("learner.device") && err.contains("no CUDA device"), "{err}");
        let bad = LearnerRole::from_config(&ReagentConfig::from_toml_str("[learner]\ndevice = \"gpu\"\n").unwrap());
        assert!(bad.unwrap_err().to_string().contains("device"));
    }

    /// `learner.precision` decides the kind the role's model trains in (it used to be read and
    /// ignored: the role loaded its model in the device's default kind).
    #[test]
    fn the_initial_model_follows_learner_precision() {
        let kind = |precision: &str| {
            let cfg =
                ReagentConfig::from_toml_str(&format!("[learner]\nmodel = \"micro\"\nprecision = \"{precision}\"\n"))
                    .unwrap();
            let model = LearnerRole::from_config(&cfg).unwrap().initial_model().unwrap();
            let kinds: std::collections::BTreeSet<String> =
                model.vs.variables().values().map(|t| format!("{:?}", t.kind())).collect();
            kinds.into_iter().collect::<Vec<_>>()
        };
        assert_eq!(kind("bf16"), vec!["BFloat16".to_string()]);
        assert_eq!(kind("f32"), vec!["Float".to_string()]);
    }

    #[tokio::test]
    async fn run_role_without_a_redis_url_gives_the_one_message() {
        let cfg = ReagentConfig::from_toml_str("[run]\ndir = \"/nonexistent/never-created\"\n").unwrap();
        let err = run_role(&cfg, CancellationToken::new()).await.unwrap_err();
        assert_eq!(err.to_string(), protocol::role::redis_url(&cfg.redis).unwrap_err().to_string());
        assert_eq!(err.config_key(), Some("redis.url"));
        assert!(!Path::new("/nonexistent/never-created").exists(), "nothing is created before the check");
    }
}
