//! The OpenAI-compatible judge: Agent-RRM (or any instruct model) behind `/v1/chat/completions`
//! on one or more endpoints (vLLM, SGLang), asked through the shared chat client
//! (`env_workers::chat`: endpoints, deadlines, retries, backoff).
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
pub mod prompt;
mod request;

use std::sync::Mutex;
use std::time::Instant;

use env_workers::chat::{ChatClient, ChatSettings, Message};
use protocol::wire::{Episode, Judgement, Trajectory};

pub use env_workers::chat::{completions_url, Pool};
pub use request::read_answer;

use crate::config::{PromptFormat, RrmConfig};
use crate::error::{JudgeError, RrmError};
use crate::judge::{Judge, JudgeFuture};
use crate::output::Blocks;
use echo::EchoGuard;
use protocol::metrics;

/// Everything the judge needs; [`OpenAiSettings::from_config`] builds it from `[rrm]`.
#[derive(Debug, Clone)]
pub struct OpenAiSettings {
    /// How the judge's model is reached (the judge always decodes greedily: its temperature is
    /// set to 0 whatever this says).
    pub chat: ChatSettings,
    /// What the judge is sent.
    pub prompt: PromptFormat,
    /// Characters of prompt per request.
    pub max_prompt_chars: usize,
}

impl OpenAiSettings {
    /// From `[rrm]`; the API key is read from the variable `api_key_env` names, which must be set
    /// when it is named (and is refused over plain http to another host unless allowed).
    pub fn from_config(cfg: &RrmConfig) -> Result<Self, RrmError> {
        // The judge always decodes greedily.
        let chat = cfg.openai.settings(crate::config::OPENAI, cfg.max_concurrency, 0.0)?;
        Ok(Self { chat, prompt: cfg.prompt, max_prompt_chars: cfg.max_prompt_chars })
    }
}

/// The judge behind OpenAI-compatible endpoints.
#[derive(Debug)]
pub struct OpenAiJudge {
    id: String,
    settings: OpenAiSettings,
    chat: ChatClient,
}

impl OpenAiJudge {
    /// A judge over `settings.chat.endpoints` (at least one).
    pub fn new(settings: OpenAiSettings) -> Result<Self, RrmError> {
        if settings.chat.endpoints.is_empty() {
            return Err(RrmError::config("endpoints", "at least one URL", "[]"));
        }
        let greedy = ChatSettings { temperature: 0.0, ..settings.chat.clone() };
        let chat = ChatClient::new("judge", greedy, metrics::ChatMetrics::judge()).map_err(RrmError::Client)?;
        Ok(Self { id: format!("openai:{}", settings.chat.model), settings, chat })
    }

    /// From `[rrm]`.
    pub fn from_config(cfg: &RrmConfig) -> Result<Self, RrmError> {
        Self::new(OpenAiSettings::from_config(cfg)?)
    }

    /// Requests in flight per endpoint, in configuration order.
    pub fn in_flight(&self) -> Vec<usize> {
        self.chat.in_flight()
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
        let messages = [Message::system(prompt.system.as_str()), Message::user(prompt.user.as_str())];
        // The latest well-formed answer whose score was out of range: clipped if nothing better comes.
        let out_of_range: Mutex<Option<Blocks>> = Mutex::new(None);
        let read = |endpoint: &str, completion| {
            let blocks = request::blocks(endpoint, completion)?;
            guard.check(&blocks).map_err(|detail| JudgeError::Echoed { endpoint: endpoint.to_string(), detail })?;
            if (0.0..=1.0).contains(&blocks.score) {
                return Ok(blocks);
            }
            let err = JudgeError::OutOfRange { endpoint: endpoint.to_string(), score: blocks.score };
            if let Ok(mut kept) = out_of_range.lock() {
                *kept = Some(blocks);
            }
            Err(err)
        };
        let exhausted = match self.chat.complete(&messages, read).await {
            Ok(blocks) => return Ok(self.judgement(blocks, started)),
            Err(exhausted) => exhausted,
        };
        if let Some(blocks) = out_of_range.into_inner().ok().flatten() {
            metrics::RRM_SCORES_CLIPPED.inc();
            tracing::warn!(
                score = blocks.score,
                attempts = exhausted.attempts,
                "no in-range score after the last attempt; clipping into [0, 1]"
            );
            return Ok(self.judgement(blocks, started));
        }
        Err(JudgeError::Exhausted { attempts: exhausted.attempts, last: Box::new(exhausted.last) })
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
            "[rrm]\njudge = \"openai\"\n[rrm.openai]\nendpoints = [\"{endpoint}\"]\napi_key_env = \"PATH\"\n\
             allow_insecure_api_key = {allow}\n"
        );
        let cfg = protocol::config::ReagentConfig::from_toml_str(&text).unwrap();
        OpenAiSettings::from_config(&RrmConfig::from_config(&cfg).unwrap())
    }

    #[test]
    fn a_key_is_refused_over_plain_http_to_another_host_unless_allowed() {
        let err = settings("http://judge.example:8000/v1", false).unwrap_err().to_string();
        assert!(err.contains("rrm.openai.endpoints") && err.contains("rrm.openai.allow_insecure_api_key"), "{err}");
        assert!(settings("http://judge.example:8000/v1", true).is_ok());
        for ok in ["https://judge.example/v1", "http://127.0.0.1:8000", "http://localhost:8000", "http://[::1]:8000"] {
            assert!(settings(ok, false).is_ok(), "{ok}");
        }
    }
}
