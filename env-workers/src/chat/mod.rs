//! The OpenAI-compatible chat client shared by everything that asks a model over
//! `/v1/chat/completions`: the RRM worker's judge and the simulated user played by a model
//! ([`crate::user_model`]). One or more endpoints (vLLM, SGLang), each request within a deadline,
//! failed attempts retried on another endpoint with backoff.
//!
//! ```text
//!  complete(messages, read):
//!    attempt 1..=retries+1:
//!      [every endpoint failed since the last pause? back off, doubling with jitter]
//!      permit (max_concurrency) ─► endpoint = least loaded, not failed this request, not cooling down
//!      POST within timeout ─► Completion ─► read(endpoint, completion) ─► T    (the caller's checks)
//!        transport / timeout / 408, 429, 5xx / malformed ─► counted, logged; retry
//!        other 4xx, or a caller's error it calls final ─► no retry
//!    nothing usable ─► Exhausted { attempts, last }
//! ```
//!
//! HTTP is reqwest with rustls (ring) and bundled Mozilla roots, so `https://` endpoints work.

pub mod config;
mod endpoints;
mod error;
mod request;

use std::time::Duration;

use protocol::metrics::ChatMetrics;
use tokio::sync::Semaphore;

pub use config::{exposes_key, list_or_csv, ChatEndpoint};
pub use endpoints::{completions_url, Pool};
pub use error::{AttemptError, ChatError, Exhausted};
pub use request::{describe, excerpt, read_completion, ChatRequest, Completion, Message};

/// How a client reaches its model.
#[derive(Clone)]
pub struct ChatSettings {
    /// Base URLs of the servers.
    pub endpoints: Vec<String>,
    /// The model name sent with each request.
    pub model: String,
    /// The API key, sent as a bearer token.
    pub api_key: Option<String>,
    /// Deadline of one request, connecting included.
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
    /// Tokens the model may generate per request.
    pub max_tokens: u32,
    /// Sampling temperature (0: greedy).
    pub temperature: f32,
}

impl std::fmt::Debug for ChatSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatSettings")
            .field("endpoints", &self.endpoints.iter().map(|e| protocol::secret::redact_url(e)).collect::<Vec<_>>())
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .field("timeout", &self.timeout)
            .field("retries", &self.retries)
            .field("max_concurrency", &self.max_concurrency)
            .finish_non_exhaustive()
    }
}

impl ChatSettings {
    /// The longest one [`ChatClient::complete`] can take: every attempt's timeout and the
    /// largest backoff before each.
    pub fn worst_case(&self) -> Duration {
        (self.timeout + self.backoff_max) * (self.retries + 1)
    }
}

/// A client over one or more endpoints.
#[derive(Debug)]
pub struct ChatClient {
    name: &'static str,
    settings: ChatSettings,
    client: reqwest::Client,
    pool: Pool,
    permits: Semaphore,
    metrics: ChatMetrics,
}

impl ChatClient {
    /// A client over `settings.endpoints` (at least one), named `name` in its logs, counting in
    /// `metrics`. Errors say why the HTTP client could not be built.
    pub fn new(name: &'static str, settings: ChatSettings, metrics: ChatMetrics) -> Result<Self, String> {
        if settings.endpoints.is_empty() {
            return Err("no endpoint configured".into());
        }
        let client = reqwest::Client::builder()
            .connect_timeout(settings.timeout)
            .pool_max_idle_per_host(settings.max_concurrency)
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Self {
            name,
            pool: Pool::new(&settings.endpoints, settings.endpoint_cooldown, metrics),
            permits: Semaphore::new(settings.max_concurrency.max(1)),
            client,
            settings,
            metrics,
        })
    }

    /// The settings it was built with.
    pub fn settings(&self) -> &ChatSettings {
        &self.settings
    }

    /// Requests in flight per endpoint, in configuration order.
    pub fn in_flight(&self) -> Vec<usize> {
        self.pool.in_flight()
    }

    /// Asks for a completion of `messages`, retrying as the module header says; `read` turns a
    /// completion into the caller's answer or refuses it (its error decides whether to retry).
    pub async fn complete<T, E: AttemptError>(
        &self,
        messages: &[Message],
        read: impl Fn(&str, Completion) -> Result<T, E>,
    ) -> Result<T, Exhausted<E>> {
        let s = &self.settings;
        let body = ChatRequest::new(&s.model, messages, s.temperature, s.max_tokens);
        let attempts = s.retries + 1;
        let (mut tried, mut backoff) = (Vec::new(), s.backoff);
        let mut last = None;
        for attempt in 1..=attempts {
            if tried.len() >= self.pool.len() {
                tokio::time::sleep(protocol::link::jitter(backoff)).await;
                backoff = (backoff * 2).min(s.backoff_max);
                tried.clear();
            }
            // The endpoint is chosen once a permit is held, so the loads compared are current.
            let Ok(permit) = self.permits.acquire().await else { break };
            let i = self.pool.pick(&tried);
            let endpoint = self.pool.get(i);
            let sent = {
                let _in_flight = self.pool.start(i);
                request::send(&self.client, &endpoint.url, &endpoint.label, s.api_key.as_deref(), &body, s.timeout)
                    .await
            };
            drop(permit);
            let err = match sent.map_err(E::from).and_then(|c| read(&endpoint.label, c)) {
                Ok(answer) => {
                    self.pool.succeeded(i);
                    return Ok(answer);
                }
                Err(err) => err,
            };
            if err.blames_endpoint() {
                self.pool.failed(i);
            }
            self.metrics.attempt_failed(&endpoint.label, err.kind());
            tracing::warn!(client = self.name, endpoint = %endpoint.label, attempt, of = attempts, error = %err, "chat attempt failed");
            tried.push(i);
            let retry = err.retryable();
            last = Some((attempt, err));
            if !retry {
                break;
            }
        }
        match last {
            Some((attempts, last)) => Err(Exhausted { attempts, last }),
            // Only when the semaphore was closed, which this client never does.
            None => Err(Exhausted {
                attempts: 0,
                last: E::from(ChatError::Transport { endpoint: String::new(), detail: "client closed".into() }),
            }),
        }
    }
}
