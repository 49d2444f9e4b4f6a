//! The crate's error types: [`JudgeError`] when one judgement fails (the worker records it as
//! `Verdict::Failed` and goes on) and [`RrmError`] when the role itself cannot go on.

use env_workers::chat::{AttemptError, ChatError};
use protocol::config::ConfigError;
use protocol::wire::TaskFamily;

/// Why a judge gave no judgement for a trajectory. Messages are lowercase and name the
/// endpoint or task concerned.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum JudgeError {
    /// This judge cannot judge this kind of trajectory (a control episode, say).
    #[error("cannot judge this trajectory: {0}")]
    Unsupported(String),
    /// The task's environment could not be rebuilt to replay the trajectory.
    #[error("environment for {family} seed {seed} difficulty {difficulty}: {detail}")]
    Environment {
        /// The task family.
        family: TaskFamily,
        /// The task seed.
        seed: u64,
        /// The task difficulty.
        difficulty: u32,
        /// What went wrong.
        detail: String,
    },
    /// The request failed: transport, timeout, HTTP status (the shared chat client's errors,
    /// which name the endpoint).
    #[error(transparent)]
    Chat(ChatError),
    /// The model's answer is not the three blocks `<think>`, `<critique>`, `<score>`, was cut at
    /// `max_tokens`, or the response is not a chat completion.
    #[error("endpoint {endpoint}: malformed judge output: {detail}")]
    Malformed {
        /// The endpoint.
        endpoint: String,
        /// What is wrong with it.
        detail: String,
    },
    /// The answer's score or critique repeats a block written in the trajectory: the judge may
    /// be echoing agent text, so nothing in the answer is used. Not retried (a deterministic
    /// judge echoes again).
    #[error("endpoint {endpoint}: judgement refused: {detail}")]
    Echoed {
        /// The endpoint.
        endpoint: String,
        /// What was repeated.
        detail: String,
    },
    /// A well-formed answer whose score lies outside [0, 1].
    #[error("endpoint {endpoint}: score {score} is outside [0, 1]")]
    OutOfRange {
        /// The endpoint.
        endpoint: String,
        /// The score given.
        score: f32,
    },
    /// Every attempt failed; `last` says how the last one did.
    #[error("no usable judgement after {attempts} attempts; last: {last}")]
    Exhausted {
        /// Attempts made.
        attempts: u32,
        /// The last attempt's error.
        last: Box<JudgeError>,
    },
    /// The judging task itself failed (a panic in a blocking task).
    #[error("judging task failed: {0}")]
    Internal(String),
}

impl JudgeError {
    /// A short label for metrics and logs (`reason` of `reagent_rrm_judge_failures_total`);
    /// an exhausted retry loop is labelled by its last error.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Unsupported(_) => "unsupported",
            Self::Environment { .. } => "environment",
            Self::Chat(e) => e.kind(),
            Self::Malformed { .. } => "malformed",
            Self::Echoed { .. } => "echoed",
            Self::OutOfRange { .. } => "out_of_range",
            Self::Exhausted { last, .. } => last.kind(),
            Self::Internal(_) => "internal",
        }
    }

    /// How many attempts were made before giving up.
    pub fn attempts(&self) -> u32 {
        match self {
            Self::Exhausted { attempts, .. } => *attempts,
            _ => 1,
        }
    }

    /// Whether another attempt may succeed: transport failures, timeouts, 408/429/5xx, and
    /// bad model output (sampling is deterministic, but another endpoint or a retry after a
    /// cut-off response may do better). Other 4xx statuses mean a configuration error.
    pub fn retryable(&self) -> bool {
        match self {
            Self::Chat(e) => e.retryable(),
            Self::Malformed { .. } | Self::OutOfRange { .. } => true,
            _ => false,
        }
    }

    /// Whether the failure says something about the endpoint (so it is avoided for a while),
    /// rather than about the model's answer.
    pub fn blames_endpoint(&self) -> bool {
        matches!(self, Self::Chat(e) if e.blames_endpoint())
    }
}

/// The chat client's errors; its malformed outputs are the judge's (`malformed judge output`).
impl From<ChatError> for JudgeError {
    fn from(e: ChatError) -> Self {
        match e {
            ChatError::Malformed { endpoint, detail } => Self::Malformed { endpoint, detail },
            other => Self::Chat(other),
        }
    }
}

/// The judge's own checks (echoes, out-of-range scores) take part in the chat client's retries.
impl AttemptError for JudgeError {
    fn retryable(&self) -> bool {
        JudgeError::retryable(self)
    }

    fn blames_endpoint(&self) -> bool {
        JudgeError::blames_endpoint(self)
    }

    fn kind(&self) -> &'static str {
        JudgeError::kind(self)
    }
}

/// Why the RRM worker role stopped or could not start.
#[derive(Debug, thiserror::Error)]
pub enum RrmError {
    /// The configuration is wrong: the `[rrm]` section could not be typed (unknown key, wrong
    /// type), or a value is out of range or inconsistent ([`ConfigError::Invalid`]); names the
    /// dotted key.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Redis or the queue failed past their retries.
    #[error(transparent)]
    Protocol(#[from] protocol::ProtocolError),
    /// The HTTP client could not be built.
    #[error("http client: {0}")]
    Client(String),
    /// A local I/O error, with what was being done.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

impl RrmError {
    /// An [`RrmError::Config`] for `rrm.<key>`.
    pub fn config(key: &str, expected: impl Into<String>, found: impl ToString) -> Self {
        Self::Config(ConfigError::invalid(format!("rrm.{key}"), expected, found))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_and_retry_classes() {
        let ep = || "127.0.0.1:1".to_string();
        let status = |status| JudgeError::Chat(ChatError::Status { endpoint: ep(), status, body: String::new() });
        assert!(status(503).retryable() && status(429).retryable() && !status(404).retryable());
        let malformed = JudgeError::Malformed { endpoint: ep(), detail: "x".into() };
        assert!(malformed.retryable() && !malformed.blames_endpoint());
        let out = JudgeError::Exhausted { attempts: 4, last: Box::new(malformed) };
        assert_eq!((out.kind(), out.attempts()), ("malformed", 4));
        assert!(out.to_string().starts_with("no usable judgement after 4 attempts; last: endpoint 127.0.0.1:1"));
        assert!(RrmError::config("retries", "an integer", 99).to_string().contains("`rrm.retries`"));
        let cut = JudgeError::from(ChatError::Malformed { endpoint: ep(), detail: "cut".into() });
        assert_eq!(cut.to_string(), "endpoint 127.0.0.1:1: malformed judge output: cut", "the judge's wording");
        let late = JudgeError::from(ChatError::Timeout { endpoint: ep(), after_ms: 9 });
        assert!(late.retryable() && late.blames_endpoint() && late.kind() == "timeout");
        let echoed = JudgeError::Echoed { endpoint: ep(), detail: "x".into() };
        assert!(!echoed.retryable() && !echoed.blames_endpoint() && echoed.kind() == "echoed");
    }
}
