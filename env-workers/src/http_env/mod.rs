//! Environments in any language: the client of the HTTP/JSON environment protocol
//! (`docs/env-http.md`, `docs/env-http.openapi.yaml`). Actors reach an environment server as
//! they reach an env-worker (through [`crate::service::EnvClient`]), with the same deadlines,
//! limits and shared token; the RRM worker's reference judge asks the server's `verify`.
//!
//! ```text
//!  actor ── GET  /v1/info ──────────────────────► server   {protocol, name, verify, reference}
//!        ── POST /v1/open {task: {seed, difficulty}} ──►   {session, system, user}
//!        ── POST /v1/step {session, message} ─────────►   {text, from, flaw?, end?}
//!        ── POST /v1/close {session} ──────────────────►   {closed}
//!  rrm   ── POST /v1/verify {task, messages} ─────────►   {findings: [{step, kind, detail}]}   (optional)
//!        ── POST /v1/reference {task} ────────────────►   {messages}                        (optional)
//!  every request: Authorization: Bearer <the token env_worker.token_env names>
//! ```

mod client;
mod endpoint;
pub mod wire;

pub use client::HttpEnv;
pub use endpoint::{is_http, Endpoint};
