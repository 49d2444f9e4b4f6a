//! The `[actor]` configuration section: typed from the raw table with unknown keys refused,
//! no serde defaults (every key and its default is in `config/default.toml`), and a
//! `validate()` that names the bad key.

use protocol::config::Section;
use std::path::PathBuf;
use std::time::Duration;

use env_workers::http_env::is_http;
use env_workers::Limits;
use episode::{RefineFrom, RefineWhich, RolloutConfig, SystemPrompt};
use protocol::config::ReagentConfig;
use protocol::wire::TaskFamily;
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::supervisor::RestartPolicy;

#[cfg(test)]
mod tests;

/// One value or a list of them (`difficulty = 2` or `difficulty = [1, 2, 3]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany<T> {
    /// A single value.
    One(T),
    /// A list.
    Many(Vec<T>),
}

impl<T: Clone> OneOrMany<T> {
    /// The values as a list.
    pub fn to_vec(&self) -> Vec<T> {
        match self {
            Self::One(v) => vec![v.clone()],
            Self::Many(v) => v.clone(),
        }
    }
}

/// Where the policy runs (`actor.device`).
pub use policy::device::DeviceChoice;

/// What the policy is shown before the task (`actor.system_prompt`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SystemPromptMode {
    /// The environment's own system prompt (role, tools, protocol).
    Full,
    /// No system turn (small models that learnt the protocol in SFT).
    Omit,
}

/// The model the policy starts from, before any weights are published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSource {
    /// A built-in size of `policy::ModelConfig` (`tiny`, `small`), byte-level tokenizer.
    Builtin(String),
    /// A Hugging Face model directory (`config.json`, safetensors, optional `tokenizer.json`).
    Dir(PathBuf),
}

/// `[actor]`: the rollout actor role.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActorConfig {
    /// This process's actor id; empty: `actor-<host name>-<process id>`.
    pub id: String,
    /// Rollout slots (rollout actors) in this process.
    pub slots: usize,
    /// Attempts per task: one GRPO group (default 8).
    pub group_size: usize,
    /// Task families drawn from, in turn.
    pub family: OneOrMany<TaskFamily>,
    /// Difficulties drawn from, in turn.
    pub difficulty: OneOrMany<u32>,
    /// Most generation requests in one batch.
    pub max_batch: usize,
    /// Longest a request waits for its batch to fill, in milliseconds.
    pub max_wait_ms: u64,
    /// MB of keys and values the policy thread keeps between an episode's turns, so that each
    /// turn prefills only its new tokens (0: none; every turn prefills its whole transcript).
    pub prefix_cache_mb: usize,
    /// A built-in model size (`micro`, `tiny`, `small`) or a model directory.
    pub model: String,
    /// `auto`, `cpu` or `cuda`.
    pub device: DeviceChoice,
    /// Sampling temperature (default 0.7, as in the paper).
    pub temperature: f64,
    /// Nucleus mass in (0, 1].
    pub top_p: f64,
    /// Most tokens of one agent message.
    pub max_new_tokens: usize,
    /// Agent messages after which an in-process episode ends unsolved.
    pub max_turns: usize,
    /// Longest conversation in tokens; an episode that would pass it ends unsolved.
    pub max_context_tokens: usize,
    /// `full` or `omit`.
    pub system_prompt: SystemPromptMode,
    /// How long an initial attempt waits for its critique before going on without refinement.
    pub critique_wait_ms: u64,
    /// Where a refined attempt starts: `first_flaw` (the first attempt kept up to the first
    /// message the critique names) or `start` (the whole first attempt in the prompt).
    pub refine_from: RefineFrom,
    /// Which initial attempts get a refined attempt: `all`, or `failed` (those short of the
    /// full outcome reward).
    pub refine: RefineWhich,
    /// Env-worker addresses (`host:port`); empty: environments run in this process.
    pub env_workers: Vec<String>,
    /// Deadline of each env-worker call, in milliseconds.
    pub env_timeout_ms: u64,
    /// Deadline of a call to another actor of this process (a generation, a publish).
    pub call_timeout_ms: u64,
    /// How long to wait at start for a first published weight version before starting from
    /// `model`; 0 starts at once with whatever is published.
    pub wait_for_weights_ms: u64,
    /// On SIGTERM, how long in-flight groups may take to finish before they are dropped.
    pub grace_s: u64,
    /// Restarts of one child allowed within `restart_window_s`; one more failure escalates.
    pub restart_max: usize,
    /// The window failures are counted in, in seconds.
    pub restart_window_s: u64,
    /// First delay before restarting a failed child; doubles with each recent failure.
    pub restart_backoff_min_ms: u64,
    /// Largest delay before restarting a failed child.
    pub restart_backoff_max_ms: u64,
}

/// The section these checks name keys under.
const SECTION: Section<'static> = Section("actor");

impl ActorConfig {
    /// Types `[actor]` of `cfg` and validates it.
    pub fn from_config(cfg: &ReagentConfig) -> Result<Self> {
        let config: Self = protocol::config::section("actor", &cfg.actor)?;
        config.validate()?;
        Ok(config)
    }

    /// Checks every value's range and form; the first problem is returned, naming its key.
    pub fn validate(&self) -> Result<()> {
        SECTION.check(self.id.chars().all(|c| !c.is_whitespace()), "id", "an id without spaces, or empty", &self.id)?;
        SECTION.check((1..=4096).contains(&self.slots), "slots", "an integer in 1..=4096", self.slots)?;
        SECTION.check(
            (1..=1024).contains(&self.group_size),
            "group_size",
            "an integer in 1..=1024",
            self.group_size,
        )?;
        let families = self.family.to_vec();
        let text_only = "a text family (math, retail, webnav, searchqa) or a non-empty list of them";
        SECTION.check(!families.is_empty(), "family", text_only, "an empty list")?;
        if let Some(f) = families.iter().find(|f| **f == TaskFamily::Cartpole) {
            return Ok(SECTION.check(false, "family", text_only, f)?);
        }
        let levels = self.difficulty.to_vec();
        let range = env_workers::registry::DIFFICULTIES;
        let expected = format!("a difficulty in {}..={} or a non-empty list of them", range.start(), range.end());
        SECTION.check(!levels.is_empty(), "difficulty", &expected, "an empty list")?;
        if let Some(d) = levels.iter().find(|d| !range.contains(d)) {
            return Err(SECTION.invalid("difficulty", expected, d).into());
        }
        SECTION.check(self.max_batch >= 1, "max_batch", "an integer >= 1", self.max_batch)?;
        SECTION.check(
            !self.model.trim().is_empty(),
            "model",
            "a built-in size (micro, tiny, small) or a model directory",
            "\"\"",
        )?;
        let t = self.temperature;
        SECTION.check(t.is_finite() && t >= 0.0, "temperature", "a finite number >= 0 (0 is greedy)", t)?;
        SECTION.check(self.top_p > 0.0 && self.top_p <= 1.0, "top_p", "a number in (0, 1]", self.top_p)?;
        SECTION.check(self.max_new_tokens >= 1, "max_new_tokens", "an integer >= 1", self.max_new_tokens)?;
        SECTION.check(self.max_turns >= 1, "max_turns", "an integer >= 1", self.max_turns)?;
        let expected = format!("an integer > max_new_tokens ({})", self.max_new_tokens);
        SECTION.check(
            self.max_context_tokens > self.max_new_tokens,
            "max_context_tokens",
            &expected,
            self.max_context_tokens,
        )?;
        SECTION.check(self.critique_wait_ms >= 1, "critique_wait_ms", "an integer >= 1", self.critique_wait_ms)?;
        for addr in &self.env_workers {
            let host_port = !addr.contains("://")
                && addr.rsplit_once(':').is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
            let ok = is_http(addr) || host_port;
            let expected = "a list of env-worker host:port addresses, or of environment server http(s):// URLs";
            SECTION.check(ok, "env_workers", expected, format!("{addr:?}"))?;
        }
        self.validate_servers(&families)?;
        SECTION.check(self.env_timeout_ms >= 1, "env_timeout_ms", "an integer >= 1", self.env_timeout_ms)?;
        SECTION.check(self.call_timeout_ms >= 1, "call_timeout_ms", "an integer >= 1", self.call_timeout_ms)?;
        SECTION.check(self.restart_window_s >= 1, "restart_window_s", "an integer >= 1", self.restart_window_s)?;
        let b = self.restart_backoff_min_ms;
        SECTION.check(b >= 1, "restart_backoff_min_ms", "an integer >= 1", b)?;
        let expected = format!("an integer >= restart_backoff_min_ms ({b})");
        Ok(SECTION.check(
            self.restart_backoff_max_ms >= b,
            "restart_backoff_max_ms",
            &expected,
            self.restart_backoff_max_ms,
        )?)
    }

    /// `http` tasks come from environment servers and only from them: `family = "http"` alone
    /// goes with `env_workers` that are all http(s):// URLs, and the other way round.
    fn validate_servers(&self, families: &[TaskFamily]) -> Result<()> {
        let http = families.contains(&TaskFamily::Http);
        let servers = self.env_workers.iter().filter(|a| is_http(a)).count();
        if !http && servers == 0 {
            return Ok(());
        }
        let expected = "\"http\" alone when actor.env_workers names environment servers (http(s):// URLs)";
        SECTION.check(http && families.len() == 1, "family", expected, format!("{families:?}"))?;
        let expected = "http(s):// URLs of environment servers, all of them, with family = \"http\"";
        let ok = servers > 0 && servers == self.env_workers.len();
        Ok(SECTION.check(ok, "env_workers", expected, format!("{:?}", self.env_workers))?)
    }

    /// The model to start from: a built-in size by name, else a directory.
    pub fn model_source(&self) -> ModelSource {
        match self.model.trim() {
            name @ ("micro" | "tiny" | "small") => ModelSource::Builtin(name.to_string()),
            dir => ModelSource::Dir(PathBuf::from(dir)),
        }
    }

    /// The model's tokenizer: the byte-level one for a built-in size, else the directory's
    /// (`tokenizer.json`, or the byte-level one when it has none).
    pub fn tokenizer(&self) -> Result<Box<dyn policy::Tokenizer>> {
        Ok(match self.model_source() {
            ModelSource::Builtin(_) => Box::new(policy::ByteTokenizer),
            ModelSource::Dir(dir) => policy::pretrained::tokenizer_for_dir(&dir)?,
        })
    }

    /// How episodes are played (the episode engine's settings).
    pub fn rollout_config(&self) -> RolloutConfig {
        RolloutConfig {
            system_prompt: match self.system_prompt {
                SystemPromptMode::Full => SystemPrompt::Full,
                SystemPromptMode::Omit => SystemPrompt::Omit,
            },
            temperature: self.temperature,
            top_p: self.top_p,
            max_new_tokens: self.max_new_tokens,
            limits: Limits { max_turns: self.max_turns, ..Limits::default() },
            max_context_tokens: self.max_context_tokens,
            max_batch: self.max_batch,
            refine_from: self.refine_from,
            refine: self.refine,
        }
    }

    /// The supervisor's restart policy.
    pub fn restart_policy(&self) -> RestartPolicy {
        RestartPolicy {
            max_restarts: self.restart_max,
            window: Duration::from_secs(self.restart_window_s),
            backoff_min: Duration::from_millis(self.restart_backoff_min_ms),
            backoff_max: Duration::from_millis(self.restart_backoff_max_ms),
        }
    }

    /// The (family, difficulty) pairs tasks are drawn from, in turn.
    pub fn task_mix(&self) -> Vec<(TaskFamily, u32)> {
        let levels = self.difficulty.to_vec();
        self.family.to_vec().into_iter().flat_map(|f| levels.iter().map(move |d| (f, *d))).collect()
    }

    /// Deadline of a call to another actor of this process.
    pub fn call_timeout(&self) -> Duration {
        Duration::from_millis(self.call_timeout_ms)
    }

    /// Deadline of each env-worker call.
    pub fn env_timeout(&self) -> Duration {
        Duration::from_millis(self.env_timeout_ms)
    }

    /// How long an initial attempt waits for its critique.
    pub fn critique_wait(&self) -> Duration {
        Duration::from_millis(self.critique_wait_ms)
    }

    /// The grace period of a graceful leave.
    pub fn grace(&self) -> Duration {
        Duration::from_secs(self.grace_s)
    }
}
