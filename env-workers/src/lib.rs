//! Environments for Reagent (docs/architecture.md section 4): the [`Environment`] trait for multi-turn text
//! tasks, the one [action protocol](action), the task families with their reference solutions
//! and step verifiers, and (in `service`) the env-worker that serves them over tarpc.
//!
//! ```text
//!  registry::make(spec, limits) ──► Guarded<family env> ──step(msg)──► Observation … Outcome
//!                                          │ reference() / verify(msgs) ──► Findings
//! ```
//!
//! Every task is deterministic given (family, seed, difficulty).

pub mod action;
pub mod chat;
pub mod control;
pub mod env;
pub mod error;
pub mod families;
pub mod http_env;
pub mod judge;
pub mod registry;
pub mod rng;
pub mod scoring;
pub mod service;
pub mod session;
pub mod user_model;
pub mod verify;

pub use env::{Environment, Observation, Outcome, Prompt, Source};
pub use error::EnvError;
pub use protocol::wire::{TaskFamily, TaskSpec};
pub use session::{Guarded, Limits};
pub use verify::{Finding, FindingKind};
