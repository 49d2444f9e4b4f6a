//! The OpenAI-compatible judge: Agent-RRM (or any instruct model) behind `/v1/chat/completions`
//! on one or more endpoints (vLLM, SGLang).
//!
//! ```text
//!  judge(trajectory) ─► prompt::render (rrm.prompt: agent-rrm | trajectory, within max_prompt_chars)
//!                       echo::EchoGuard (the score and critique blocks written in the trajectory)
//!    attempt 1..=retries+1:
//!      [every endpoint failed since the last pause? back off, doubling with jitter]
//!      endpoint = least loaded, not failed this judgement, not cooling down
//!      permit (max_concurrency) ─► POST, within timeout ─► blocks (finish_reason "length": malformed)
//!        repeats a block of the trajectory ─► refused (Echoed), no retry
//!        score in [0, 1] ─► Judgement
//!        score outside   ─► kept; retry          (after the last attempt: clipped, counted)
//!        malformed / transport / timeout / 408, 429, 5xx ─► counted, logged; retry
//!        other 4xx       ─► no retry
//!    nothing usable ─► JudgeError::Exhausted (the worker records Verdict::Failed)
//! ```
//!
//! HTTP is reqwest with rustls (ring) and bundled Mozilla roots, so `https://` endpoints work.

pub mod echo;
mod endpoints;
pub mod prompt;
mod request;

use std::time::{Duration, Instant};

use protocol::wire::{Episode, Judgement, Trajectory};
use tokio::sync::Semaphore;

pub use endpoints::{completions_url, Pool};
pub use request::read_answer;

use crate::config::{PromptFormat, RrmConfig};
use crate::error::{JudgeError, RrmError};
use crate::judge::{Judge, JudgeFuture};
use crate::output::Blocks;
use echo::EchoGuard;
use protocol::metrics;
use request::ChatRequest;

/// Everything the judge needs; [`OpenAiSettings::from_config`] builds it from `[rrm]`.
#[derive(Clone)]
pub struct OpenAiSettings {
    /// Base URLs of the servers.
    pub endpoints: Vec<String>,
    /// The model name sent with each request.
    pub model: String,
    /// What the judge is sent.
    pub prompt: PromptFormat,
    /// The API key, sent as a bearer token.
    pub api_key: Option<String>,
    /// Deadline of one request.
    pub timeout: Duration,
    /// Attempts after the first.
    pub retries: u32,
    /// First backoff once every endpoint has failed.
    pub backoff: Duration,
    /// Largest backoff.
    pub backoff_max: Duration,
    /// How long a failed endpoint is passed over.
    pub endpoint_cooldown: Duration,
    /// Requests in flight at once.
    pub max_concurrency: usize,
    /// Characters of prompt per request.
    pub max_prompt_chars: usize,
    /// Tokens the judge may generate.
    pub max_tokens: u32,
}

impl std::fmt::Debug for OpenAiSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiSettings")
            .field("endpoints", &self.endpoints.iter().map(|e| protocol::secret::redact_url(e)).collect::<Vec<_>>())
            .field("model", &self.model)
            .field("prompt", &self.prompt)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .field("timeout", &self.timeout)
            .field("retries", &self.retries)
            .field("max_concurrency", &self.max_concurrency)
            .finish_non_exhaustive()
    }
}

impl OpenAiSettings {
    /// From `[rrm]`; the API key is read from the variable `api_key_env` names, which must be set
    /// when it is named.
    pub fn from_config(cfg: &RrmConfig) -> Result<Self, RrmError> {
        let api_key = if cfg.api_key_env.is_empty() {
            None
        } else {
            let key = std::env::var(&cfg.api_key_env).ok().filter(|k| !k.trim().is_empty());
            let expected = "the name of a set, non-empty environment variable";
            let found = format!("{} (unset or empty)", cfg.api_key_env);
            Some(key.ok_or_else(|| RrmError::config("api_key_env", expected, found))?)
        };
        if api_key.is_some() && !cfg.allow_insecure_api_key {
            if let Some(url) = cfg.endpoints.iter().find(|u| exposes_key(u)) {
                return Err(RrmError::config(
                    "endpoints",
                    "https:// (or http:// to localhost) when api_key_env is set; \
                     rrm.allow_insecure_api_key = true sends the key in the clear anyway",
                    protocol::secret::redact_url(url),
                ));
            }
        }
        Ok(Self {
            endpoints: cfg.endpoints.clone(),
            model: cfg.model.clone(),
            prompt: cfg.prompt,
            api_key,
            timeout: Duration::from_millis(cfg.timeout_ms),
            retries: cfg.retries,
            backoff: Duration::from_millis(cfg.backoff_ms),
            backoff_max: Duration::from_millis(cfg.backoff_max_ms),
            endpoint_cooldown: Duration::from_millis(cfg.endpoint_cooldown_ms),
            max_concurrency: cfg.max_concurrency,
            max_prompt_chars: cfg.max_prompt_chars,
            max_tokens: cfg.max_tokens,
        })
    }
}

/// Whether a bearer token sent to `url` crosses the network unencrypted: plain `http://` to a
/// host other than this machine's loopback.
fn exposes_key(url: &str) -> bool {
    let Some(rest) = url.strip_prefix("http://") else { return false };
    let host = protocol::secret::host_port(&format!("http://{rest}"));
    let host = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default().to_string(),
        None => host.rsplit_once(':').map_or(host.as_str(), |(h, _)| h).to_string(),
    };
    let loopback =
        host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
    !loopback
}

/// The judge behind OpenAI-compatible endpoints.
#[derive(Debug)]
pub struct OpenAiJudge {
    id: String,
    settings: OpenAiSettings,
    client: reqwest::Client,
    pool: Pool,
    permits: Semaphore,
}

fn jitter(d: Duration) -> Duration {
    d.mul_f64(0.5 + rand::random::<f64>() * 0.5)
}

impl OpenAiJudge {
    /// A judge over `settings.endpoints` (at least one).
    pub fn new(settings: OpenAiSettings) -> Result<Self, RrmError> {
        if settings.endpoints.is_empty() {
            return Err(RrmError::config("endpoints", "at least one URL", "[]"));
        }
        let client = reqwest::Client::builder()
            .connect_timeout(settings.timeout)
            .pool_max_idle_per_host(settings.max_concurrency)
            .build()
            .map_err(|e| RrmError::Client(e.to_string()))?;
        Ok(Self {
            id: format!("openai:{}", settings.model),
            pool: Pool::new(&settings.endpoints, settings.endpoint_cooldown),
            permits: Semaphore::new(settings.max_concurrency.max(1)),
            client,
            settings,
        })
    }

    /// From `[rrm]`.
    pub fn from_config(cfg: &RrmConfig) -> Result<Self, RrmError> {
        Self::new(OpenAiSettings::from_config(cfg)?)
    }

    /// Requests in flight per endpoint, in configuration order.
    pub fn in_flight(&self) -> Vec<usize> {
        self.pool.in_flight()
    }

    /// One attempt on endpoint `i` (the caller holds a concurrency permit); an answer that
    /// repeats a block of the trajectory is refused.
    async fn attempt(&self, i: usize, body: &ChatRequest<'_>, guard: &EchoGuard) -> Result<Blocks, JudgeError> {
        let endpoint = self.pool.get(i);
        let _in_flight = self.pool.start(i);
        let key = self.settings.api_key.as_deref();
        let blocks =
            request::send(&self.client, &endpoint.url, &endpoint.label, key, body, self.settings.timeout).await?;
        guard.check(&blocks).map_err(|detail| JudgeError::Echoed { endpoint: endpoint.label.clone(), detail })?;
        Ok(blocks)
    }

    fn judgement(&self, blocks: Blocks, started: Instant) -> Judgement {
        Judgement {
            trace: blocks.trace,
            critique: blocks.critique,
            score: blocks.score.clamp(0.0, 1.0),
            judge_id: self.id.clone(),
            latency_ms: u32::try_from(started.elapsed().as_millis()).unwrap_or(u32::MAX),
        }
    }

    async fn run(&self, trajectory: &Trajectory) -> Result<Judgement, JudgeError> {
        if matches!(trajectory.episode, Episode::Control(_)) {
            return Err(JudgeError::Unsupported(format!(
                "{} is a control task with no text to judge",
                trajectory.task.family
            )));
        }
        let started = Instant::now();
        let prompt = prompt::render(trajectory, self.settings.prompt, self.settings.max_prompt_chars);
        if prompt.omitted_chars > 0 {
            tracing::debug!(omitted_chars = prompt.omitted_chars, "trajectory over the prompt budget; middle omitted");
        }
        let guard = EchoGuard::new(trajectory);
        let body = ChatRequest::new(&self.settings.model, &prompt, self.settings.max_tokens);
        let attempts = self.settings.retries + 1;
        let (mut tried, mut backoff) = (Vec::new(), self.settings.backoff);
        let mut out_of_range: Option<Blocks> = None;
        let mut last = JudgeError::Internal("no attempt was made".into());
        let mut made = 0;
        for attempt in 1..=attempts {
            if tried.len() >= self.pool.len() {
                tokio::time::sleep(jitter(backoff)).await;
                backoff = (backoff * 2).min(self.settings.backoff_max);
                tried.clear();
            }
            // The endpoint is chosen once a permit is held, so the loads compared are current.
            let permit = self.permits.acquire().await.map_err(|e| JudgeError::Internal(e.to_string()))?;
            let i = self.pool.pick(&tried);
            made = attempt;
            let label = self.pool.get(i).label.clone();
            let result = self.attempt(i, &body, &guard).await;
            drop(permit);
            let err = match result {
                Ok(blocks) if (0.0..=1.0).contains(&blocks.score) => {
                    self.pool.succeeded(i);
                    return Ok(self.judgement(blocks, started));
                }
                Ok(blocks) => {
                    self.pool.succeeded(i);
                    let err = JudgeError::OutOfRange { endpoint: label.clone(), score: blocks.score };
                    out_of_range = Some(blocks);
                    err
                }
                Err(err) => {
                    if err.blames_endpoint() {
                        self.pool.failed(i);
                    }
                    err
                }
            };
            metrics::RRM_ATTEMPT_FAILURES.with_label_values(&[label.as_str(), err.kind()]).inc();
            tracing::warn!(endpoint = %label, attempt, of = attempts, error = %err, "judge attempt failed");
            tried.push(i);
            let retry = err.retryable();
            last = err;
            if !retry {
                break;
            }
        }
        if let Some(blocks) = out_of_range {
            metrics::RRM_SCORES_CLIPPED.inc();
            tracing::warn!(
                score = blocks.score,
                attempts = made,
                "no in-range score after the last attempt; clipping into [0, 1]"
            );
            return Ok(self.judgement(blocks, started));
        }
        Err(JudgeError::Exhausted { attempts: made, last: Box::new(last) })
    }
}

impl Judge for OpenAiJudge {
    fn id(&self) -> &str {
        &self.id
    }

    fn judge<'a>(&'a self, trajectory: &'a Trajectory) -> JudgeFuture<'a> {
        Box::pin(self.run(trajectory))
    }
}

#[cfg(test)]
mod key_tests {
    use super::*;

    fn settings(endpoint: &str, allow: bool) -> Result<OpenAiSettings, RrmError> {
        // PATH is set in every test process: it stands in for the key's variable.
        let text = format!(
            "[rrm]\njudge = \"openai\"\nendpoints = [\"{endpoint}\"]\napi_key_env = \"PATH\"\n\
             allow_insecure_api_key = {allow}\n"
        );
        let cfg = protocol::config::ReagentConfig::from_toml_str(&text).unwrap();
        OpenAiSettings::from_config(&RrmConfig::from_reagent(&cfg).unwrap())
    }

    #[test]
    fn a_key_is_refused_over_plain_http_to_another_host_unless_allowed() {
        let err = settings("http://judge.example:8000/v1", false).unwrap_err().to_string();
        assert!(err.contains("rrm.endpoints") && err.contains("allow_insecure_api_key"), "{err}");
        assert!(settings("http://judge.example:8000/v1", true).is_ok());
        for ok in ["https://judge.example/v1", "http://127.0.0.1:8000", "http://localhost:8000", "http://[::1]:8000"] {
            assert!(settings(ok, false).is_ok(), "{ok}");
        }
    }

    #[test]
    fn loopback_hosts_are_recognised() {
        assert!(exposes_key("http://10.0.0.5:8000"));
        assert!(exposes_key("http://u:p@judge"));
        assert!(!exposes_key("http://127.0.0.2:8000/v1"));
        assert!(!exposes_key("https://10.0.0.5"));
    }
}
