//! The routes of `reagent serve`, on axum.
//!
//! ```text
//!  POST /v1/chat/completions ─ key? (401) ─ body ≤ limit? (413) ─ JSON, fields (400 naming the field)
//!     ─ chat template ─ n × PolicyMsg::Generate ─► policy actor (batches with other requests)
//!     ─ within the deadline (504) ─► choices cut at max_tokens, usage, system_fingerprint
//!       reagent-v<policy version that wrote them>
//!  GET  /v1/models   ─ key? ─► the one model
//!  GET  /metrics     ─► Prometheus text (no key: scrape it from the private network)
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use actors::handle::Handle;
use actors::inference::{Generated, PolicyMsg};
use actors::{ActorError, InferenceError};
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use policy::{ChatTemplate, Tokenizer};
use protocol::metrics::{SERVE_COMPLETION_TOKENS, SERVE_LATENCY, SERVE_REQUESTS};
use serde_json::{json, Value};

use super::api::{self, ApiError, Choice, Limits};

/// What every request handler shares.
pub struct AppState {
    /// The policy actor.
    pub policy: Handle<PolicyMsg>,
    /// The model's tokenizer and chat template.
    pub tokenizer: Arc<dyn Tokenizer>,
    /// How turns are framed.
    pub template: ChatTemplate,
    /// The name `/v1/models` lists and responses echo.
    pub model_name: String,
    /// The bearer token clients must send, if any.
    pub api_key: Option<String>,
    /// Request limits.
    pub limits: Limits,
    /// Largest body in bytes.
    pub max_body_bytes: usize,
    /// Longest a request may take, reading its body included.
    pub deadline: Duration,
}

fn respond(route: &'static str, status: u16, body: Value) -> Response {
    SERVE_REQUESTS.with_label_values(&[route, &status.to_string()]).inc();
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (code, Json(body)).into_response()
}

fn fail(route: &'static str, e: ApiError) -> Response {
    let mut r = respond(route, e.status, e.body());
    if e.status == 401 {
        r.headers_mut().insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer"));
    }
    r
}

/// Constant-time comparison of the presented key with the configured one.
fn authorised(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(key) = &state.api_key else { return Ok(()) };
    let given =
        headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
    let ok = given.is_some_and(|g| {
        g.len() == key.len() && g.bytes().zip(key.bytes()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
    });
    if ok {
        Ok(())
    } else {
        Err(ApiError::other(401, "authentication_error", "missing or wrong API key (Authorization: Bearer <key>)"))
    }
}

async fn read_body(state: &AppState, body: Body) -> Result<Bytes, ApiError> {
    let too_large =
        || ApiError::other(413, "invalid_request_error", format!("the body exceeds {} bytes", state.max_body_bytes));
    match tokio::time::timeout(state.deadline, axum::body::to_bytes(body, state.max_body_bytes)).await {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(_)) => Err(too_large()),
        Err(_) => Err(ApiError::other(408, "timeout", "the body did not arrive within the deadline")),
    }
}

fn generation_error(e: ActorError) -> ApiError {
    match e {
        ActorError::Timeout { .. } => ApiError::other(504, "timeout", "the model did not answer within the deadline"),
        ActorError::Unavailable { .. } => {
            ApiError::other(503, "server_error", format!("the model is unavailable: {e}"))
        }
        other => ApiError::other(500, "server_error", other.to_string()),
    }
}

fn inference_error(e: InferenceError) -> ApiError {
    match e {
        InferenceError::PromptDoesNotFit { len, max } => {
            ApiError::invalid("messages", format!("the prompt is {len} tokens; at most {max} fit beside max_tokens"))
        }
        other => ApiError::other(500, "server_error", other.to_string()),
    }
}

/// One choice from a generation, cut at `max_tokens`.
fn choice(state: &AppState, index: usize, g: Generated, max_tokens: usize) -> (Choice, usize) {
    let ended = state.template.stop_sequences().iter().any(|s| !s.is_empty() && g.tokens.ends_with(s))
        || g.tokens.last() == Some(&state.tokenizer.special_ids().eos);
    let (text, count, reason) = if g.tokens.len() > max_tokens {
        (state.tokenizer.decode(&g.tokens[..max_tokens], true), max_tokens, "length")
    } else {
        (g.text, g.tokens.len(), if ended { "stop" } else { "length" })
    };
    SERVE_COMPLETION_TOKENS.with_label_values(&[reason]).inc_by(count as u64);
    let message = json!({ "role": "assistant", "content": text });
    (Choice { index, message, finish_reason: reason }, count)
}

async fn complete(state: &AppState, headers: &HeaderMap, body: Body) -> Result<Value, ApiError> {
    authorised(state, headers)?;
    let bytes = read_body(state, body).await?;
    let req = api::parse(&bytes)?;
    let checked = api::check(&req, &state.limits)?;
    let turns: Vec<(protocol::wire::Role, &str)> = checked.turns.iter().map(|(r, t)| (*r, t.as_str())).collect();
    let prompt = state
        .template
        .generation_prompt(state.tokenizer.as_ref(), &turns)
        .map_err(|e| ApiError::invalid("messages", format!("cannot tokenise the conversation: {e}")))?;
    let calls = (0..checked.n).map(|_| {
        let p = prompt.clone();
        state.policy.call("generate", move |reply| PolicyMsg::Generate(p, reply), state.deadline)
    });
    let mut choices = Vec::with_capacity(checked.n);
    let (mut completion, mut version) = (0, 0);
    for (i, out) in futures::future::join_all(calls).await.into_iter().enumerate() {
        let g = out.map_err(generation_error)?.map_err(inference_error)?;
        version = version.max(g.policy_version.0);
        let (c, count) = choice(state, i, g, checked.max_tokens);
        completion += count;
        choices.push(c);
    }
    let created = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    Ok(json!({
        "id": format!("chatcmpl-{:032x}", rand::random::<u128>()),
        "object": "chat.completion",
        "created": created,
        "model": req.model.unwrap_or_else(|| state.model_name.clone()),
        "system_fingerprint": format!("reagent-v{version}"),
        "choices": choices,
        "usage": { "prompt_tokens": prompt.len(), "completion_tokens": completion,
                   "total_tokens": prompt.len() + completion },
    }))
}

async fn chat_completions(State(state): State<Arc<AppState>>, headers: HeaderMap, body: Body) -> Response {
    let started = Instant::now();
    let out = complete(&state, &headers, body).await;
    SERVE_LATENCY.observe(started.elapsed().as_secs_f64());
    match out {
        Ok(v) => respond("chat", 200, v),
        Err(e) => fail("chat", e),
    }
}

async fn models(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    if let Err(e) = authorised(&state, &headers) {
        return fail("models", e);
    }
    let data = json!([{ "id": state.model_name, "object": "model", "created": 0, "owned_by": "reagent" }]);
    respond("models", 200, json!({ "object": "list", "data": data }))
}

async fn metrics() -> Response {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], protocol::metrics::render()).into_response()
}

/// The server's routes over `state`.
pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/models", get(models))
        .route("/metrics", get(metrics))
        .with_state(state)
}
