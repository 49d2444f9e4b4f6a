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
use serde::{Deserialize, Serialize};

use crate::verify::Finding;

/// What the agent sees first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prompt {
    /// The system prompt: the role, the tools and the action protocol.
    pub system: String,
    /// The first user message: the task.
    pub user: String,
}

/// Who produced an observation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Source {
    /// A tool's result.
    Tool,
    /// The (simulated) user's reply.
    User,
    /// The environment itself: a format error, a limit, the end of the episode.
    Env,
}

/// How an episode ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// The outcome reward in [0, 1].
    pub reward: f32,
    /// Whether the task was solved.
    pub success: bool,
    /// One line on why, for logs and the judge.
    pub summary: String,
}

/// What the agent gets back for one message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    /// The text shown to the agent.
    pub text: String,
    /// Who produced it.
    pub from: Source,
    /// Set when the step was flawed (a format error, an unknown tool, bad arguments), saying how.
    pub flaw: Option<String>,
    /// Set when the episode is over.
    pub end: Option<Outcome>,
}

impl Observation {
    /// A tool result.
    pub fn tool(text: impl Into<String>) -> Self {
        Self { text: text.into(), from: Source::Tool, flaw: None, end: None }
    }
    /// A user reply.
    pub fn user(text: impl Into<String>) -> Self {
        Self { text: text.into(), from: Source::User, flaw: None, end: None }
    }
    /// A flawed step: the text says what was wrong.
    pub fn flawed(text: impl Into<String>) -> Self {
        let text = text.into();
        Self { flaw: Some(text.clone()), text, from: Source::Env, end: None }
    }
    /// The end of the episode.
    pub fn end(outcome: Outcome) -> Self {
        Self { text: outcome.summary.clone(), from: Source::Env, flaw: None, end: Some(outcome) }
    }
}

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
