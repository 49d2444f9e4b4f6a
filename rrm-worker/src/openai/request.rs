//! One chat-completion request to one endpoint, and the reading of its answer into the three
//! Agent-RRM blocks. Every failure becomes a [`JudgeError`] naming the endpoint.
//!
//! ```text
//!  POST <endpoint>/v1/chat/completions  {model, messages: [system, user], temperature: 0, max_tokens}
//!    ◄── 200 {choices: [{message: {content, reasoning_content?}, finish_reason}]} ──► output::parse
//!    ◄── other status ──► Status    no answer in time ──► Timeout    I/O ──► Transport
//! ```

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::prompt::Prompt;
use crate::error::JudgeError;
use crate::output::{self, Blocks};

/// The request body.
#[derive(Debug, Serialize)]
pub struct ChatRequest<'a> {
    model: &'a str,
    messages: [Message<'a>; 2],
    temperature: f32,
    max_tokens: u32,
    stream: bool,
}

#[derive(Debug, Serialize)]
struct Message<'a> {
    role: &'static str,
    content: &'a str,
}

impl<'a> ChatRequest<'a> {
    /// Greedy decoding (temperature 0) of at most `max_tokens` tokens for `prompt`.
    pub fn new(model: &'a str, prompt: &'a Prompt, max_tokens: u32) -> Self {
        Self {
            model,
            messages: [
                Message { role: "system", content: &prompt.system },
                Message { role: "user", content: &prompt.user },
            ],
            temperature: 0.0,
            max_tokens,
            stream: false,
        }
    }
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

/// The most characters of an error body kept in an error.
const BODY_EXCERPT: usize = 300;

fn excerpt(text: &str) -> String {
    let t: String = text.trim().chars().take(BODY_EXCERPT).collect();
    if text.trim().chars().count() > BODY_EXCERPT {
        format!("{t}…")
    } else {
        t
    }
}

/// The error and its sources, without the URL (which could carry credentials).
fn describe(e: reqwest::Error) -> String {
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

/// Reads the blocks out of a response body. An answer cut at the length limit
/// (`finish_reason = "length"`) is malformed whatever it parses to: its blocks may be the
/// judge's unfinished echo of the trajectory.
pub fn read_answer(endpoint: &str, body: &[u8]) -> Result<Blocks, JudgeError> {
    let malformed = |detail: String| JudgeError::Malformed { endpoint: endpoint.to_string(), detail };
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
    output::parse(&content, choice.message.reasoning_content.as_deref())
        .map_err(|why| malformed(format!("{why}; the answer began {:?}", excerpt(&content))))
}

/// Sends `body` to `url` and reads the answer, all within `timeout`.
pub async fn send(
    client: &reqwest::Client,
    url: &str,
    endpoint: &str,
    api_key: Option<&str>,
    body: &ChatRequest<'_>,
    timeout: Duration,
) -> Result<Blocks, JudgeError> {
    let transport = |e: reqwest::Error| JudgeError::Transport { endpoint: endpoint.to_string(), detail: describe(e) };
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
            return Err(JudgeError::Status { endpoint: endpoint.to_string(), status: status.as_u16(), body });
        }
        read_answer(endpoint, &bytes)
    };
    tokio::time::timeout(timeout, exchange).await.unwrap_or_else(|_| {
        Err(JudgeError::Timeout { endpoint: endpoint.to_string(), after_ms: timeout.as_millis() as u64 })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_from_chat_completions() {
        let body = serde_json::json!({
            "choices": [{"message": {"role": "assistant", "content": output::render("t", "c", 0.5)}, "finish_reason": "stop"}]
        });
        let b = read_answer("e:1", body.to_string().as_bytes()).unwrap();
        assert_eq!((b.critique.as_str(), b.score), ("c", 0.5));
    }

    #[test]
    fn odd_bodies_are_malformed_and_say_why() {
        let err = read_answer("e:1", b"<html>busy</html>").unwrap_err().to_string();
        assert!(err.contains("e:1: malformed judge output: not a chat completion") && err.contains("busy"), "{err}");
        let err = read_answer("e:1", br#"{"choices": []}"#).unwrap_err().to_string();
        assert!(err.ends_with("no choices"), "{err}");
        let cut = r#"{"choices": [{"message": {"content": "<think>long"}, "finish_reason": "length"}]}"#;
        let err = read_answer("e:1", cut.as_bytes()).unwrap_err().to_string();
        assert!(err.contains("cut at max_tokens"), "{err}");
    }

    #[test]
    fn an_answer_cut_at_the_length_limit_is_malformed_even_when_it_parses() {
        let body = |finish: &str| {
            serde_json::json!({"choices": [{"message": {"content": output::render("t", "c", 0.9)}, "finish_reason": finish}]})
                .to_string()
        };
        assert_eq!(read_answer("e:1", body("stop").as_bytes()).unwrap().score, 0.9);
        let err = read_answer("e:1", body("length").as_bytes()).unwrap_err();
        assert_eq!(err.kind(), "malformed");
        assert!(err.to_string().contains("finish_reason \"length\""), "{err}");
    }

    #[test]
    fn the_request_is_greedy_and_carries_both_messages() {
        let p = Prompt { system: "s".into(), user: "u".into(), omitted_chars: 0 };
        let v = serde_json::to_value(ChatRequest::new("m", &p, 7)).unwrap();
        assert_eq!(v["temperature"], 0.0);
        assert_eq!(v["max_tokens"], 7);
        assert_eq!(v["messages"][1]["content"], "u");
        assert_eq!(v["model"], "m");
    }
}
