//! How one chat-completion request fails ([`ChatError`]), and how the retry loop treats a failed
//! attempt ([`AttemptError`]): retried or not, blamed on the endpoint or on the model's answer.

/// Why one request to one endpoint gave no usable completion. Messages are lowercase and name
/// the endpoint (`host:port`, never credentials).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ChatError {
    /// The request did not complete: connection refused or reset, TLS, a broken response.
    #[error("endpoint {endpoint}: request failed: {detail}")]
    Transport {
        /// The endpoint.
        endpoint: String,
        /// What the client said.
        detail: String,
    },
    /// No response within the per-request timeout.
    #[error("endpoint {endpoint}: no response within {after_ms} ms")]
    Timeout {
        /// The endpoint.
        endpoint: String,
        /// The timeout.
        after_ms: u64,
    },
    /// The endpoint answered with an HTTP error status.
    #[error("endpoint {endpoint}: http status {status}: {body}")]
    Status {
        /// The endpoint.
        endpoint: String,
        /// The status code.
        status: u16,
        /// The start of the response body.
        body: String,
    },
    /// The response is not a chat completion, has no choice, was cut at `max_tokens`, or its
    /// content is not what the caller asked for.
    #[error("endpoint {endpoint}: malformed output: {detail}")]
    Malformed {
        /// The endpoint.
        endpoint: String,
        /// What is wrong with it.
        detail: String,
    },
}

/// What the retry loop needs to know about a failed attempt. A caller's own error type (the
/// judge's) implements it so that its checks of the answer take part in the same loop.
pub trait AttemptError: From<ChatError> + std::fmt::Display {
    /// Whether another attempt may succeed.
    fn retryable(&self) -> bool;
    /// Whether the failure says something about the endpoint (so it is passed over for its
    /// cool-down), rather than about the model's answer.
    fn blames_endpoint(&self) -> bool;
    /// A short label for metrics and logs.
    fn kind(&self) -> &'static str;
}

impl AttemptError for ChatError {
    /// Transport failures, timeouts, 408/429/5xx and malformed output are retried; other 4xx
    /// statuses mean a configuration error.
    fn retryable(&self) -> bool {
        match self {
            Self::Transport { .. } | Self::Timeout { .. } | Self::Malformed { .. } => true,
            Self::Status { status, .. } => *status == 408 || *status == 429 || *status >= 500,
        }
    }

    fn blames_endpoint(&self) -> bool {
        !matches!(self, Self::Malformed { .. })
    }

    fn kind(&self) -> &'static str {
        match self {
            Self::Transport { .. } => "transport",
            Self::Timeout { .. } => "timeout",
            Self::Status { .. } => "http_status",
            Self::Malformed { .. } => "malformed",
        }
    }
}

/// Every attempt failed: how many were made, and how the last one did.
#[derive(Debug, Clone, PartialEq)]
pub struct Exhausted<E> {
    /// Attempts made.
    pub attempts: u32,
    /// The last attempt's error.
    pub last: E,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_classes_and_kinds() {
        let status = |status| ChatError::Status { endpoint: "e:1".into(), status, body: String::new() };
        assert!(status(503).retryable() && status(429).retryable() && status(408).retryable());
        assert!(!status(404).retryable() && !status(401).retryable());
        let malformed = ChatError::Malformed { endpoint: "e:1".into(), detail: "empty".into() };
        assert!(malformed.retryable() && !malformed.blames_endpoint());
        assert_eq!(malformed.to_string(), "endpoint e:1: malformed output: empty");
        let timeout = ChatError::Timeout { endpoint: "e:1".into(), after_ms: 5 };
        assert!(timeout.blames_endpoint() && timeout.kind() == "timeout");
    }
}
