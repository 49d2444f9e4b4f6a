//! The OpenAI chat-completions wire shapes `reagent serve` reads and writes, and the checks a
//! request passes before it reaches the model (each failure names the field).

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// One chat message of a request.
#[derive(Debug, Clone, Deserialize)]
pub struct Message {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    /// The text.
    pub content: String,
}

/// `POST /v1/chat/completions`'s body (fields this server does not use are ignored).
#[derive(Debug, Clone, Deserialize)]
pub struct ChatRequest {
    /// The model name; any value is accepted (one model is served) and echoed back.
    #[serde(default)]
    pub model: Option<String>,
    /// The conversation.
    pub messages: Vec<Message>,
    /// Most tokens to generate (at most the server's limit).
    #[serde(default, alias = "max_completion_tokens")]
    pub max_tokens: Option<u64>,
    /// Completions to return.
    #[serde(default)]
    pub n: Option<u64>,
    /// Streaming is not implemented; `true` is refused by name.
    #[serde(default)]
    pub stream: Option<bool>,
}

/// A request's error as OpenAI shapes it; `status` is the HTTP status.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// HTTP status code.
    pub status: u16,
    /// OpenAI's error type (`invalid_request_error`, `authentication_error`, …).
    pub kind: &'static str,
    /// The offending field, when there is one.
    pub param: Option<String>,
    /// What was wrong.
    pub message: String,
}

impl ApiError {
    /// 400 about `param`.
    pub fn invalid(param: impl Into<String>, message: impl Into<String>) -> Self {
        Self { status: 400, kind: "invalid_request_error", param: Some(param.into()), message: message.into() }
    }

    /// Another status without a field.
    pub fn other(status: u16, kind: &'static str, message: impl Into<String>) -> Self {
        Self { status, kind, param: None, message: message.into() }
    }

    /// The JSON body.
    pub fn body(&self) -> Value {
        json!({ "error": { "message": self.message, "type": self.kind, "param": self.param, "code": null } })
    }
}

/// Limits every request is held to.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Messages per request.
    pub max_messages: usize,
    /// `max_tokens` ceiling (also the default).
    pub max_tokens: usize,
    /// Completions per request.
    pub max_n: usize,
}

/// Parses a body, naming the field that is missing or of the wrong type.
pub fn parse(body: &[u8]) -> Result<ChatRequest, ApiError> {
    let de = &mut serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            ApiError::invalid("body", format!("the body is not JSON: {inner}"))
        } else {
            let field = if path == "." { "body".to_string() } else { path };
            ApiError::invalid(field.clone(), format!("field `{field}`: {inner}"))
        }
    })
}

/// What a valid request asks for: the turns, tokens and completions.
pub struct Checked {
    /// (role, text), roles mapped to ours.
    pub turns: Vec<(protocol::wire::Role, String)>,
    /// Tokens to return at most.
    pub max_tokens: usize,
    /// Completions.
    pub n: usize,
}

/// Checks a parsed request against `limits`.
pub fn check(req: &ChatRequest, limits: &Limits) -> Result<Checked, ApiError> {
    use protocol::wire::Role;
    if req.stream == Some(true) {
        return Err(ApiError::invalid("stream", "streaming is not supported; send stream: false"));
    }
    if req.messages.is_empty() || req.messages.len() > limits.max_messages {
        return Err(ApiError::invalid(
            "messages",
            format!("between 1 and {} messages are accepted, got {}", limits.max_messages, req.messages.len()),
        ));
    }
    let turns = req
        .messages
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let role = match m.role.as_str() {
                "system" | "developer" => Role::System,
                "user" => Role::User,
                "assistant" => Role::Agent,
                "tool" => Role::Tool,
                other => {
                    return Err(ApiError::invalid(
                        format!("messages[{i}].role"),
                        format!("unknown role {other:?}; expected system, user, assistant or tool"),
                    ))
                }
            };
            Ok((role, m.content.clone()))
        })
        .collect::<Result<_, _>>()?;
    let max_tokens = match req.max_tokens {
        None => limits.max_tokens,
        Some(t) if t >= 1 && t <= limits.max_tokens as u64 => t as usize,
        Some(t) => return Err(ApiError::invalid("max_tokens", format!("must be 1..={}, got {t}", limits.max_tokens))),
    };
    let n = match req.n {
        None => 1,
        Some(n) if n >= 1 && n <= limits.max_n as u64 => n as usize,
        Some(n) => return Err(ApiError::invalid("n", format!("must be 1..={}, got {n}", limits.max_n))),
    };
    Ok(Checked { turns, max_tokens, n })
}

/// One choice of a response.
#[derive(Debug, Clone, Serialize)]
pub struct Choice {
    /// Its index.
    pub index: usize,
    /// The assistant's message.
    pub message: Value,
    /// `stop` (the turn ended) or `length` (max_tokens reached).
    pub finish_reason: &'static str,
}
