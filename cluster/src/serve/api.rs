//! The OpenAI chat-completions wire shapes `reagent serve` reads and writes, and the checks a
//! request passes before it reaches the model (each failure names the field).

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// One chat message of a request.
#[derive(Debug, Clone, Deserialize)]
pub struct Message {
    /// `system` (or `developer`), `user`, `assistant` or `tool`.
    pub role: String,
    /// The text: a string, or a list of `{"type": "text", "text": …}` parts.
    pub content: Content,
    /// Everything else the message carries (`name`, `tool_call_id` are accepted; `tool_calls`
    /// is refused).
    #[serde(flatten)]
    pub rest: serde_json::Map<String, Value>,
}

/// A message's content.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Content {
    /// Plain text.
    Text(String),
    /// Content parts; only text parts are supported.
    Parts(Vec<Value>),
}

/// `stop`: one string or a list.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Stop {
    /// One stop text.
    One(String),
    /// Up to four.
    Many(Vec<String>),
}

/// `stream_options`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct StreamOptions {
    /// Send a last chunk with the usage.
    #[serde(default)]
    pub include_usage: Option<bool>,
}

/// `POST /v1/chat/completions`'s body. Fields OpenAI defines that this server does not
/// implement are refused by name unless they are null or ask for nothing (a zero penalty, an
/// empty tool list); unknown fields are refused too.
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
    /// Sampling temperature in [0, 2] (0: greedy); the server's --temperature by default.
    #[serde(default)]
    pub temperature: Option<f64>,
    /// Nucleus mass in [0, 1] (0: greedy); 1 by default.
    #[serde(default)]
    pub top_p: Option<f64>,
    /// Makes sampling repeatable: the same request with the same seed gets the same completions.
    #[serde(default)]
    pub seed: Option<i64>,
    /// Texts that end a completion (not included in it).
    #[serde(default)]
    pub stop: Option<Stop>,
    /// Return each token's log-prob.
    #[serde(default)]
    pub logprobs: Option<bool>,
    /// With `logprobs`: the most likely tokens at each position (0–20).
    #[serde(default)]
    pub top_logprobs: Option<u64>,
    /// Send the completion as server-sent events, piece by piece.
    #[serde(default)]
    pub stream: Option<bool>,
    /// Streaming options.
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    /// Every other field.
    #[serde(flatten)]
    pub rest: serde_json::Map<String, Value>,
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

/// What a valid request asks for.
pub struct Checked {
    /// (role, text), roles mapped to ours.
    pub turns: Vec<(protocol::wire::Role, String)>,
    /// Tokens to generate at most.
    pub max_tokens: usize,
    /// Completions.
    pub n: usize,
    /// Temperature (0: greedy).
    pub temperature: f64,
    /// Nucleus mass in (0, 1].
    pub top_p: f64,
    /// The seed of completion 0 (completion i gets seed + i).
    pub seed: Option<u64>,
    /// Texts that end a completion.
    pub stop: Vec<String>,
    /// Whether to return log-probs, and how many alternatives per token.
    pub logprobs: Option<usize>,
    /// Stream the answer as server-sent events.
    pub stream: bool,
    /// With `stream`: a last chunk carries the usage.
    pub include_usage: bool,
}

/// Whether a field's value asks for nothing this server would have to do.
type IsNeutral = fn(&Value) -> bool;

/// Fields of OpenAI's request this server accepts when they ask for nothing: (name, the
/// neutral value's test).
const NEUTRAL: &[(&str, IsNeutral)] = &[
    ("presence_penalty", |v| v.as_f64() == Some(0.0)),
    ("frequency_penalty", |v| v.as_f64() == Some(0.0)),
    ("logit_bias", |v| v.as_object().is_some_and(|m| m.is_empty())),
    ("tools", |v| v.as_array().is_some_and(|a| a.is_empty())),
    ("functions", |v| v.as_array().is_some_and(|a| a.is_empty())),
    ("tool_choice", |v| v == "none"),
    ("parallel_tool_calls", |v| v.is_boolean()),
    ("response_format", |v| v["type"] == "text"),
    ("store", |v| v == false),
    ("metadata", |v| v.as_object().is_some_and(|m| m.is_empty())),
    ("service_tier", |v| v == "auto" || v == "default"),
    ("user", |v| v.is_string()),
];

/// Why a field that is present is not supported.
fn unsupported(field: &str) -> String {
    match field {
        "tools" | "functions" | "tool_choice" => format!(
            "`{field}` is not supported: this server does not parse tool calls; the model writes its actions as text \
             in its reply (Reagent's action protocol), which you can read from message.content"
        ),
        "response_format" => "`response_format` other than {\"type\": \"text\"} is not supported".into(),
        other => format!("`{other}` is not supported by this server"),
    }
}

/// Checks a parsed request against `limits`; `default_temperature` is the server's.
pub fn check(req: &ChatRequest, limits: &Limits, default_temperature: f64) -> Result<Checked, ApiError> {
    for (field, value) in &req.rest {
        let neutral = NEUTRAL.iter().find(|(name, _)| name == field).is_some_and(|(_, ok)| ok(value));
        if !(value.is_null() || neutral) {
            return Err(ApiError::invalid(field.clone(), unsupported(field)));
        }
    }
    if req.messages.is_empty() || req.messages.len() > limits.max_messages {
        return Err(ApiError::invalid(
            "messages",
            format!("between 1 and {} messages are accepted, got {}", limits.max_messages, req.messages.len()),
        ));
    }
    let turns = req.messages.iter().enumerate().map(|(i, m)| message(i, m)).collect::<Result<_, _>>()?;
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
    let mut temperature = match req.temperature {
        None => default_temperature,
        Some(t) if (0.0..=2.0).contains(&t) => t,
        Some(t) => return Err(ApiError::invalid("temperature", format!("must be in [0, 2], got {t}"))),
    };
    let top_p = match req.top_p {
        None => 1.0,
        Some(p) if p > 0.0 && p <= 1.0 => p,
        Some(0.0) => {
            temperature = 0.0;
            1.0
        }
        Some(p) => return Err(ApiError::invalid("top_p", format!("must be in [0, 1], got {p}"))),
    };
    let stop = match &req.stop {
        None => Vec::new(),
        Some(Stop::One(s)) => vec![s.clone()],
        Some(Stop::Many(v)) => v.clone(),
    };
    if stop.len() > 4 || stop.iter().any(String::is_empty) {
        return Err(ApiError::invalid("stop", format!("up to 4 non-empty texts, got {stop:?}")));
    }
    let logprobs = match (req.logprobs.unwrap_or(false), req.top_logprobs) {
        (false, None | Some(0)) => None,
        (false, Some(_)) => return Err(ApiError::invalid("top_logprobs", "top_logprobs needs logprobs: true")),
        (true, None) => Some(0),
        (true, Some(k)) if k <= 20 => Some(k as usize),
        (true, Some(k)) => return Err(ApiError::invalid("top_logprobs", format!("must be 0..=20, got {k}"))),
    };
    let stream = req.stream.unwrap_or(false);
    if stream && logprobs.is_some() {
        return Err(ApiError::invalid(
            "logprobs",
            "logprobs are not supported with stream: true; ask without streaming",
        ));
    }
    if req.stream_options.is_some() && !stream {
        return Err(ApiError::invalid("stream_options", "stream_options needs stream: true"));
    }
    let include_usage = req.stream_options.as_ref().and_then(|o| o.include_usage).unwrap_or(false);
    Ok(Checked {
        turns,
        max_tokens,
        n,
        temperature,
        top_p,
        seed: req.seed.map(|s| s as u64),
        stop,
        logprobs,
        stream,
        include_usage,
    })
}

/// Message `i` as (role, text), or the error naming its field.
fn message(i: usize, m: &Message) -> Result<(protocol::wire::Role, String), ApiError> {
    use protocol::wire::Role;
    let role = match m.role.as_str() {
        "system" | "developer" => Role::System,
        "user" => Role::User,
        "assistant" => Role::Agent,
        "tool" => Role::Tool,
        other => {
            return Err(ApiError::invalid(
                format!("messages[{i}].role"),
                format!("unknown role {other:?}; expected system, developer, user, assistant or tool"),
            ))
        }
    };
    if let Some((field, _)) =
        m.rest.iter().find(|(k, v)| !matches!(k.as_str(), "name" | "tool_call_id") && !v.is_null())
    {
        return Err(ApiError::invalid(format!("messages[{i}].{field}"), unsupported(field)));
    }
    let text = match &m.content {
        Content::Text(t) => t.clone(),
        Content::Parts(parts) => {
            let mut text = String::new();
            for (j, part) in parts.iter().enumerate() {
                match (part["type"].as_str(), part["text"].as_str()) {
                    (Some("text"), Some(t)) => text.push_str(t),
                    (kind, _) => {
                        return Err(ApiError::invalid(
                            format!("messages[{i}].content[{j}]"),
                            format!("only text parts are supported, got type {}", kind.unwrap_or("(none)")),
                        ))
                    }
                }
            }
            text
        }
    };
    Ok((role, text))
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
    /// `{"content": [per token]}` when the request asked for log-probs, else null.
    pub logprobs: Value,
}
