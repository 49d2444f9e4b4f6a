//! The configuration's sections, as typed structs. Defaults are not here: they live in
//! `config/default.toml`, the base layer, so there is one place to read and change them.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The whole configuration of a job; every role reads the same file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReagentConfig {
    /// Which run and where its files go.
    pub run: RunConfig,
    /// How to reach Redis.
    pub redis: RedisConfig,
    /// The Redis Streams queues.
    pub queue: QueueConfig,
    /// The weight store.
    pub weights: WeightsConfig,
    /// Logs.
    pub logging: LoggingConfig,
    /// Prometheus metrics.
    pub metrics: MetricsConfig,
    /// `[learner]`: typed and checked by the learner crate ([`super::section`]).
    #[serde(default)]
    pub learner: toml::Table,
    /// `[actor]`: typed and checked by the actors crate.
    #[serde(default)]
    pub actor: toml::Table,
    /// `[rrm]`: typed and checked by the rrm-worker crate.
    #[serde(default)]
    pub rrm: toml::Table,
    /// `[user_model]`: who plays the simulated user (rules or a chat model); typed by the
    /// env-workers crate.
    #[serde(default)]
    pub user_model: toml::Table,
    /// `[launch]`: how `reagent run` lays the job out on one machine; typed by the cluster crate.
    #[serde(default)]
    pub launch: toml::Table,
    /// `[env_worker]`: the env-worker service's token and limits; typed by the env-workers crate.
    #[serde(default)]
    pub env_worker: toml::Table,
    /// `[dataset]`: a user's own tasks from JSON-lines files (family `dataset`); typed and loaded
    /// by the env-workers crate.
    #[serde(default)]
    pub dataset: toml::Table,
}

/// `[run]`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunConfig {
    /// The run id; namespaces every Redis key.
    pub id: String,
    /// The directory under which run directories are written.
    pub dir: String,
    /// How the RRM's judgement is used; every role reads it.
    pub feedback: crate::wire::FeedbackMode,
}

/// `[redis]`. Debug and the TOML form ([`ReagentConfig::to_toml`]) never show a password.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedisConfig {
    /// `redis://` or `rediss://` (TLS) `[user[:password]@]host:port[/db]`; empty means "start a
    /// private redis-server". Better without the password: see `password_env`.
    #[serde(serialize_with = "redacted")]
    pub url: String,
    /// The ACL user this process authenticates as (`learner`, `actor`, `rrm`, `admin`, …); empty:
    /// the URL's user, or Redis's default user.
    pub user: String,
    /// The name of an environment variable holding the password (from a Kubernetes Secret, or set
    /// by `reagent run` for its roles); empty: the URL's password, or none.
    pub password_env: String,
    /// A PEM file of CA certificates that `rediss://` servers are verified against; empty: the
    /// system's roots.
    pub tls_ca_file: String,
    /// Accept the placeholder password `change-me` (throw-away test clusters only: the
    /// cpu-smoke overlay sets it).
    pub allow_placeholder_password: bool,
    /// Deadline for opening a connection.
    pub connect_timeout_ms: u64,
    /// Deadline for one command's reply (blocking reads add their block time).
    pub op_timeout_ms: u64,
    /// How long a failing command is retried, reconnecting with backoff, before it errors.
    pub retry_for_ms: u64,
    /// First backoff between reconnect attempts.
    pub backoff_min_ms: u64,
    /// Largest backoff between reconnect attempts.
    pub backoff_max_ms: u64,
}

fn redacted<S: serde::Serializer>(url: &str, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&crate::secret::redact_url(url))
}

impl std::fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisConfig")
            .field("url", &crate::secret::redact_url(&self.url))
            .field("user", &self.user)
            .field("password_env", &self.password_env)
            .field("tls_ca_file", &self.tls_ca_file)
            .field("allow_placeholder_password", &self.allow_placeholder_password)
            .field("connect_timeout_ms", &self.connect_timeout_ms)
            .field("op_timeout_ms", &self.op_timeout_ms)
            .field("retry_for_ms", &self.retry_for_ms)
            .finish_non_exhaustive()
    }
}

impl RedisConfig {
    /// The configured URL, if any.
    pub fn url(&self) -> Option<&str> {
        Some(self.url.trim()).filter(|u| !u.is_empty())
    }
    /// Connect deadline.
    pub fn connect_timeout(&self) -> Duration {
        Duration::from_millis(self.connect_timeout_ms)
    }
    /// Per-command deadline.
    pub fn op_timeout(&self) -> Duration {
        Duration::from_millis(self.op_timeout_ms)
    }
    /// Retry budget.
    pub fn retry_for(&self) -> Duration {
        Duration::from_millis(self.retry_for_ms)
    }
}

/// `[queue]`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueConfig {
    /// Largest payload accepted, in bytes (the format-version byte included).
    pub max_payload_bytes: u64,
    /// Producers wait while a stream holds more unconsumed entries than this.
    pub high_water_mark: u64,
    /// How long a producer waits at the mark before it errors.
    pub backpressure_timeout_ms: u64,
    /// Entries read per XREADGROUP.
    pub read_count: usize,
    /// How long one read blocks waiting for entries.
    pub block_ms: u64,
    /// Entries pending longer than this are reclaimed from their (presumed dead) consumer.
    pub claim_idle_ms: u64,
    /// Failed deliveries (processing failed, or was under way when its consumer died) after
    /// which an entry goes to the dead-letter stream.
    pub max_deliveries: u64,
    /// Each dead-letter stream keeps about this many newest entries (approximate MAXLEN).
    #[serde(default = "default_dead_letter_maxlen")]
    pub dead_letter_maxlen: u64,
    /// A dead letter keeps its payload only up to this many bytes (larger: its size and SHA-1);
    /// 0 keeps every payload.
    #[serde(default = "default_dead_letter_max_payload_bytes")]
    pub dead_letter_max_payload_bytes: u64,
    /// Acknowledged entries are trimmed after this many acknowledgements.
    pub trim_every: u64,
}

fn default_dead_letter_maxlen() -> u64 {
    10_000
}

fn default_dead_letter_max_payload_bytes() -> u64 {
    256 << 10
}

/// `[weights]`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WeightsConfig {
    /// Chunk size of published weights, in bytes.
    pub chunk_bytes: u64,
    /// How many newest versions are kept without an expiry.
    pub keep_versions: u64,
    /// Older versions expire this many seconds after being superseded (lets fetches finish).
    pub expire_grace_s: u64,
    /// Actors poll for a new version this often in case a notification was missed.
    pub poll_interval_ms: u64,
    /// The element type of published weights: `auto` (the learner's compute kind: bf16 on
    /// CUDA, f32 on the CPU; what actors on the same hardware serve in), `f32` or `bf16`. Actors
    /// cast what they fetch to their own kind; bf16 halves the bytes every version moves.
    #[serde(default)]
    pub dtype: Precision,
    /// Where weight readers (actors, `reagent serve` following a run) read `latest`, manifests
    /// and chunks and hear notifications: a node-local replica of the job's Redis, with the
    /// credentials and TLS settings of `[redis]`. Empty: `redis.url`. The learner always
    /// writes to `redis.url`; readers fall back to it while this one is unreachable.
    #[serde(default, serialize_with = "redacted")]
    pub read_url: String,
}

impl WeightsConfig {
    /// The configured read URL, if any.
    pub fn read_url(&self) -> Option<&str> {
        Some(self.read_url.trim()).filter(|u| !u.is_empty())
    }
}

/// A floating-point precision setting (`learner.precision`, `weights.dtype`): `auto` follows the
/// device (bf16 on CUDA, f32 on the CPU), `f32` and `bf16` force that kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// bf16 on CUDA, f32 on the CPU.
    #[default]
    Auto,
    /// 32-bit floats everywhere.
    F32,
    /// bfloat16 everywhere (on the CPU: slow; for tests of the GPU path).
    Bf16,
}

/// `[logging]`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoggingConfig {
    /// `text` (readable) or `json` (one object per line).
    pub format: LogFormat,
    /// A tracing filter, e.g. `info` or `info,protocol=debug`.
    pub filter: String,
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// JSON lines, for log collectors.
    Json,
}

/// `[metrics]`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsConfig {
    /// Address the roles serve `/metrics` on (`host:port`; port 0 picks a free one); empty
    /// disables the endpoint.
    pub listen: String,
}
