//! One chat-completion request to one endpoint, and the reading of its answer. Every failure
//! becomes a [`ChatError`] naming the endpoint.
//!
//! ```text
//!  POST <endpoint>/v1/chat/completions  {model, messages, temperature, max_tokens, stream: false}
//!    ◄── 200 {choices: [{message: {content, reasoning_content?}, finish_reason}]} ──► Completion
//!        (finish_reason "length": Malformed — the answer was cut at max_tokens)
//!    ◄── other status ──► Status    no answer in time ──► Timeout    I/O ──► Transport
//! ```

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::error::ChatError;

/// One message of a conversation, in the OpenAI format.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Message {
    /// `system`, `user` or `assistant`.
    pub role: &'static str,
    /// The text.
    pub content: String,
}

impl Message {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self { role: "system", content: content.into() }
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self { role: "user", content: content.into() }
    }

    /// An assistant message.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self { role: "assistant", content: content.into() }
    }
}

/// The request body.
#[derive(Debug, Serialize)]
pub struct ChatRequest<'a> {
    model: &'a str,
    messages: &'a [Message],
    temperature: f32,
    max_tokens: u32,
    stream: bool,
}

impl<'a> ChatRequest<'a> {
    /// At most `max_tokens` tokens at `temperature` (0: greedy) for `messages`.
    pub fn new(model: &'a str, messages: &'a [Message], temperature: f32, max_tokens: u32) -> Self {
        Self { model, messages, temperature, max_tokens, stream: false }
    }
}

/// The first choice of a completion that ran to its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    /// The message content (empty when the server sent none).
    pub content: String,
    /// A reasoning parser's separate field, if the server split one off.
    pub reasoning: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ChatResponse {
    choices: Vec<Choice>,
}

#[derive(Debug, Deserialize)]
struct Choice {
    message: AnswerMessage,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct AnswerMessage {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
}

/// The most characters of a body or an answer kept in an error.
const BODY_EXCERPT: usize = 300;

/// The start of `text`, trimmed, for errors (an ellipsis marks a cut).
pub fn excerpt(text: &str) -> String {
    let t: String = text.trim().chars().take(BODY_EXCERPT).collect();
    if text.trim().chars().count() > BODY_EXCERPT {
        format!("{t}…")
    } else {
        t
    }
}

/// The error and its sources, without the URL (which could carry credentials).
pub fn describe(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// Reads the first choice out of a response body. An answer cut at the length limit
/// (`finish_reason = "length"`) is malformed whatever it says: it is unfinished.
pub fn read_completion(endpoint: &str, body: &[u8]) -> Result<Completion, ChatError> {
    let malformed = |detail: String| ChatError::Malformed { endpoint: endpoint.to_string(), detail };
    let response: ChatResponse = serde_json::from_slice(body)
        .map_err(|e| malformed(format!("not a chat completion ({e}): {}", excerpt(&String::from_utf8_lossy(body)))))?;
    let choice = response.choices.into_iter().next().ok_or_else(|| malformed("no choices".into()))?;
    let content = choice.message.content.unwrap_or_default();
    if choice.finish_reason.as_deref() == Some("length") {
        return Err(malformed(format!(
            "the answer was cut at max_tokens (finish_reason \"length\"); it began {:?}",
            excerpt(&content)
        )));
    }
    Ok(Completion { content, reasoning: choice.message.reasoning_content })
}

/// Sends `body` to `url` and reads the completion, all within `timeout`.
pub async fn send(
    client: &reqwest::Client,
    url: &str,
    endpoint: &str,
    api_key: Option<&str>,
    body: &ChatRequest<'_>,
    timeout: Duration,
) -> Result<Completion, ChatError> {
    let transport = |e: reqwest::Error| ChatError::Transport { endpoint: endpoint.to_string(), detail: describe(e) };
    let exchange = async {
        let mut request = client.post(url).json(body);
        if let Some(key) = api_key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.map_err(transport)?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(transport)?;
        if !status.is_success() {
            let body = excerpt(&String::from_utf8_lossy(&bytes));
            return Err(ChatError::Status { endpoint: endpoint.to_string(), status: status.as_u16(), body });
        }
        read_completion(endpoint, &bytes)
    };
    tokio::time::timeout(timeout, exchange).await.unwrap_or_else(|_| {
        Err(ChatError::Timeout { endpoint: endpoint.to_string(), after_ms: timeout.as_millis() as u64 })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completions_are_read_with_their_reasoning() {
        let body = serde_json::json!({
            "choices": [{"message": {"role": "assistant", "content": "hi", "reasoning_content": "r"}, "finish_reason": "stop"}]
        });
        let c = read_completion("e:1", body.to_string().as_bytes()).unwrap();
        assert_eq!((c.content.as_str(), c.reasoning.as_deref()), ("hi", Some("r")));
    }

    #[test]
    fn odd_bodies_and_cut_answers_are_malformed_and_say_why() {
        let err = read_completion("e:1", b"<html>busy</html>").unwrap_err().to_string();
        assert!(err.contains("e:1: malformed output: not a chat completion") && err.contains("busy"), "{err}");
        let err = read_completion("e:1", br#"{"choices": []}"#).unwrap_err().to_string();
        assert!(err.ends_with("no choices"), "{err}");
        let cut = r#"{"choices": [{"message": {"content": "<think>long"}, "finish_reason": "length"}]}"#;
        let err = read_completion("e:1", cut.as_bytes()).unwrap_err().to_string();
        assert!(err.contains("cut at max_tokens") && err.contains("finish_reason \"length\""), "{err}");
    }

    #[test]
    fn the_request_carries_the_messages_and_the_sampling_settings() {
        let messages = [Message::system("s"), Message::user("u"), Message::assistant("a")];
        let v = serde_json::to_value(ChatRequest::new("m", &messages, 0.0, 7)).unwrap();
        assert_eq!((v["temperature"].as_f64(), v["max_tokens"].as_u64()), (Some(0.0), Some(7)));
        assert_eq!((v["model"].as_str(), v["stream"].as_bool()), (Some("m"), Some(false)));
        let roles: Vec<&str> = v["messages"].as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap()).collect();
        assert_eq!(roles, ["system", "user", "assistant"]);
        assert_eq!(v["messages"][1]["content"], "u");
    }
}
