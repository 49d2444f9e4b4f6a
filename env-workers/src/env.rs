//! The `Environment` trait every text family implements, and what a step returns.
//!
//! ```text
//!  make(spec) ──► prompt (system + first user message)
//!  step(agent message) ──► Observation { text, from: Tool | User | Env, flaw?, end? }
//!                           … until end = Some(Outcome { reward, success })
//!  reference() ──► the agent messages of a correct episode
//!  verify(agent messages) ──► findings, each at a step (what the reference judge explains)
//! ```

use protocol::wire::TaskSpec;
pub use protocol::wire::{Observation, Outcome, Prompt, Source};

use crate::verify::Finding;

/// A multi-turn text task: deterministic given its [`TaskSpec`].
pub trait Environment: Send {
    /// The task this environment runs.
    fn spec(&self) -> TaskSpec;
    /// The system prompt and first user message.
    fn prompt(&self) -> &Prompt;
    /// Takes one agent message, returns what the agent sees next. Never panics, whatever the
    /// message; after the end it keeps answering with a flawed "episode is over" observation.
    fn step(&mut self, message: &str) -> Observation;
    /// The agent messages of a correct episode, in order.
    fn reference(&self) -> Vec<String>;
    /// Findings about a whole episode given its agent messages (replayed on a fresh copy of the
    /// task), each at the index of the message it concerns. Empty for a flawless episode.
    fn verify(&self, agent_messages: &[String]) -> Vec<Finding>;
}
