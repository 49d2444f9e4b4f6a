//! The routes of `reagent serve`, on axum.
//!
//! ```text
//!  POST /v1/chat/completions ─ key? (401) ─ body ≤ limit? (413) ─ JSON, fields (400 naming the field;
//!       unsupported OpenAI fields refused by name) ─ the model's chat template
//!     ─ n × PolicyMsg::GenerateWith (the request's temperature, top_p, max_tokens, seed + i, stop,
//!       top_logprobs) ─► policy actor (batches with other requests)
//!     ─ within the deadline (504) ─► choices (logprobs if asked), usage, system_fingerprint
//!       reagent-v<policy version that wrote them>; or, with stream: true, server-sent events
//!  GET  /v1/models   ─ key? ─► the one model
//!  GET  /metrics     ─► Prometheus text (no key: scrape it from the private network)
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use actors::handle::Handle;
use actors::inference::{Custom, Generated, PolicyMsg};
use actors::{ActorError, InferenceError};
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use policy::tokenizer::ChatMessage;
use policy::{ChatTemplate, SamplingParams, StopReason, Tokenizer};
use protocol::metrics::{SERVE_COMPLETION_TOKENS, SERVE_LATENCY, SERVE_REQUESTS};
use protocol::wire::Role;
use serde_json::{json, Value};
use tokio::sync::mpsc::UnboundedSender;

use super::api::{self, ApiError, Choice, Limits};

/// What every request handler shares.
pub struct AppState {
    /// The policy actor.
    pub policy: Handle<PolicyMsg>,
    /// The model's tokenizer and chat template.
    pub tokenizer: Arc<dyn Tokenizer>,
    /// How turns are framed.
    pub template: ChatTemplate,
    /// The server's sampling: its temperature is the default; its stop ids and EOS end every
    /// completion.
    pub sampling: SamplingParams,
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

/// One choice from a generation, and its completion tokens.
fn choice(state: &AppState, index: usize, g: Generated, logprobs: Option<usize>) -> (Choice, usize) {
    let reason = finish_reason(g.stop_reason);
    let count = g.tokens.len();
    SERVE_COMPLETION_TOKENS.with_label_values(&[reason]).inc_by(count as u64);
    let logprobs = match logprobs {
        Some(_) => json!({ "content": token_logprobs(state.tokenizer.as_ref(), &g) }),
        None => Value::Null,
    };
    let message = json!({ "role": "assistant", "content": g.text });
    (Choice { index, message, finish_reason: reason, logprobs }, count)
}

/// OpenAI's finish reason: `length` when the budget ended it, else `stop`.
fn finish_reason(reason: StopReason) -> &'static str {
    match reason {
        StopReason::MaxTokens => "length",
        StopReason::Eos | StopReason::StopSequence { .. } | StopReason::Caller => "stop",
    }
}

/// OpenAI's per-token log-probs: each token's text, log-prob, UTF-8 bytes and the most likely
/// alternatives; the end-of-turn token that closed the turn is not part of the content.
fn token_logprobs(tok: &dyn Tokenizer, g: &Generated) -> Vec<Value> {
    let closed = matches!(g.stop_reason, StopReason::Eos | StopReason::StopSequence { .. });
    let shown = if closed { g.tokens.len().saturating_sub(1) } else { g.tokens.len() };
    let entry = |id: u32, lp: f32| {
        let text = tok.decode(&[id], false);
        json!({ "token": text, "logprob": lp, "bytes": text.as_bytes() })
    };
    (0..shown)
        .map(|i| {
            let mut e = entry(g.tokens[i], g.logprobs[i]);
            let top = g.top_logprobs.get(i).map_or(&[][..], Vec::as_slice);
            e["top_logprobs"] = top.iter().map(|&(id, lp)| entry(id, lp)).collect();
            e
        })
        .collect()
}

/// The request's prompt ids: the conversation rendered by the model's own chat template with
/// its generation prompt (exactly `apply_chat_template`'s text), or, for the built-in byte-level
/// models, by their framing.
fn prompt_ids(state: &AppState, checked: &api::Checked) -> policy::Result<Vec<u32>> {
    let tok = state.tokenizer.as_ref();
    match tok.jinja() {
        Some(jinja) => {
            let messages: Vec<ChatMessage> =
                checked.turns.iter().map(|(role, text)| ChatMessage::new(openai_role(*role), text)).collect();
            tok.encode(&jinja.render(&messages, true)?)
        }
        None => {
            let turns: Vec<(Role, &str)> = checked.turns.iter().map(|(r, t)| (*r, t.as_str())).collect();
            state.template.generation_prompt(tok, &turns)
        }
    }
}

/// OpenAI's name for `role`.
fn openai_role(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Agent => "assistant",
        Role::Tool => "tool",
    }
}

/// What a request became once read and checked.
struct Prepared {
    checked: api::Checked,
    prompt: Vec<u32>,
    model: String,
}

async fn prepare(state: &AppState, headers: &HeaderMap, body: Body) -> Result<Prepared, ApiError> {
    authorised(state, headers)?;
    let bytes = read_body(state, body).await?;
    let req = api::parse(&bytes)?;
    let checked = api::check(&req, &state.limits, state.sampling.temperature)?;
    let prompt = prompt_ids(state, &checked)
        .map_err(|e| ApiError::invalid("messages", format!("cannot tokenise the conversation: {e}")))?;
    Ok(Prepared { checked, prompt, model: req.model.unwrap_or_else(|| state.model_name.clone()) })
}

/// The request's sampling for completion `index`, streaming into `stream` if given.
fn custom(state: &AppState, c: &api::Checked, index: usize, stream: Option<UnboundedSender<String>>) -> Box<Custom> {
    let params = SamplingParams {
        temperature: c.temperature,
        top_p: c.top_p,
        max_new_tokens: c.max_tokens,
        ..state.sampling.clone()
    };
    Box::new(Custom {
        params,
        seed: c.seed.map(|s| s.wrapping_add(index as u64)),
        top_logprobs: c.logprobs.unwrap_or(0),
        stop_texts: c.stop.clone(),
        stream,
    })
}

/// Asks the policy actor for completion `index` of the request.
async fn generate(
    state: &AppState,
    p: &Prepared,
    index: usize,
    stream: Option<UnboundedSender<String>>,
) -> Result<Generated, ApiError> {
    let (prompt, custom) = (p.prompt.clone(), custom(state, &p.checked, index, stream));
    let out = state
        .policy
        .call("generate", move |reply| PolicyMsg::GenerateWith(prompt, custom, reply), state.deadline)
        .await;
    out.map_err(generation_error)?.map_err(inference_error)
}

fn created() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn usage(prompt: usize, completion: usize) -> Value {
    json!({ "prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion })
}

async fn complete(state: &AppState, p: Prepared) -> Result<Value, ApiError> {
    let calls = (0..p.checked.n).map(|i| generate(state, &p, i, None));
    let mut choices = Vec::with_capacity(p.checked.n);
    let (mut completion, mut version) = (0, 0);
    for (i, out) in futures::future::join_all(calls).await.into_iter().enumerate() {
        let g = out?;
        version = version.max(g.policy_version.0);
        let (c, count) = choice(state, i, g, p.checked.logprobs);
        completion += count;
        choices.push(c);
    }
    Ok(json!({
        "id": format!("chatcmpl-{:032x}", rand::random::<u128>()),
        "object": "chat.completion",
        "created": created(),
        "model": p.model,
        "system_fingerprint": format!("reagent-v{version}"),
        "choices": choices,
        "usage": usage(p.prompt.len(), completion),
    }))
}

/// The answer as server-sent events, as OpenAI streams it: per completion a first chunk with
/// the role, then its text piece by piece as it is generated, then a chunk with its finish
/// reason; with `include_usage` a chunk with the usage; then `data: [DONE]`. A failure after
/// the first byte is an `error` event.
fn stream(state: Arc<AppState>, p: Prepared) -> Response {
    let (events, body) = tokio::sync::mpsc::unbounded_channel::<Bytes>();
    let id = format!("chatcmpl-{:032x}", rand::random::<u128>());
    let model = p.model.clone();
    let chunk = move |choices: Value, usage: Value| {
        let c = json!({ "id": id, "object": "chat.completion.chunk", "created": created(), "model": model,
                        "system_fingerprint": null, "choices": choices, "usage": usage });
        Bytes::from(format!("data: {c}\n\n"))
    };
    tokio::spawn(async move {
        let send = |b: Bytes| drop(events.send(b));
        let n = p.checked.n;
        for i in 0..n {
            send(chunk(
                json!([{ "index": i, "delta": { "role": "assistant", "content": "" }, "logprobs": null, "finish_reason": null }]),
                Value::Null,
            ));
        }
        let calls = (0..n).map(|i| {
            let (pieces, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
            let (state, p, send, chunk) = (&state, &p, &send, &chunk);
            async move {
                let forward = async {
                    while let Some(piece) = rx.recv().await {
                        send(chunk(json!([{ "index": i, "delta": { "content": piece }, "logprobs": null, "finish_reason": null }]), Value::Null));
                    }
                };
                let (out, ()) = tokio::join!(generate(state, p, i, Some(pieces)), forward);
                out.map(|g| {
                    let reason = finish_reason(g.stop_reason);
                    SERVE_COMPLETION_TOKENS.with_label_values(&[reason]).inc_by(g.tokens.len() as u64);
                    send(chunk(json!([{ "index": i, "delta": {}, "logprobs": null, "finish_reason": reason }]), Value::Null));
                    g.tokens.len()
                })
            }
        });
        let mut completion = 0;
        for out in futures::future::join_all(calls).await {
            match out {
                Ok(count) => completion += count,
                Err(e) => {
                    send(Bytes::from(format!("data: {}\n\n", e.body())));
                    break;
                }
            }
        }
        if p.checked.include_usage {
            send(chunk(json!([]), usage(p.prompt.len(), completion)));
        }
        send(Bytes::from_static(b"data: [DONE]\n\n"));
    });
    let body = futures::stream::unfold(body, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, std::convert::Infallible>(b), rx))
    });
    SERVE_REQUESTS.with_label_values(&["chat", "200"]).inc();
    ([(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")], Body::from_stream(body))
        .into_response()
}

async fn chat_completions(State(state): State<Arc<AppState>>, headers: HeaderMap, body: Body) -> Response {
    let started = Instant::now();
    let out = match prepare(&state, &headers, body).await {
        Ok(p) if p.checked.stream => return stream(state.clone(), p),
        Ok(p) => complete(&state, p).await,
        Err(e) => Err(e),
    };
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
