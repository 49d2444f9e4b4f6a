//! What environments say, as it crosses the env-worker service and reaches the judge: the
//! prompt, each step's observation, the outcome, the step verifier's findings, and control
//! observations. The `Environment` trait itself lives in `env-workers`.

use std::fmt;

use serde::{Deserialize, Serialize};

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

/// What a control step returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ControlObservation {
    /// The observation vector.
    pub observation: Vec<f32>,
    /// The reward for the action just taken.
    pub reward: f32,
    /// The episode ended by failure (the pole fell or the cart left the track).
    pub terminated: bool,
    /// The episode was cut at the step limit.
    pub truncated: bool,
}

/// The kinds of flaw a step verifier reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FindingKind {
    /// A tool that does not help at this point (or does not exist).
    WrongTool,
    /// The right tool with wrong arguments.
    WrongArguments,
    /// A call that repeats an earlier one without need.
    RedundantCall,
    /// An answer that no observation supports.
    UnsupportedAnswer,
    /// A statement or argument that contradicts an earlier observation.
    Contradiction,
    /// A fact (a number, an id, a name) that appears in no observation nor in the task.
    Fabrication,
    /// A message that breaks the action protocol.
    FormatError,
    /// The episode ended (or was abandoned) before the task was done.
    GaveUpEarly,
    /// A necessary step of the reference solution never happened.
    SkippedStep,
    /// The final answer or final state is wrong.
    WrongAnswer,
}

impl FindingKind {
    /// A short lowercase name for logs and judge prompts.
    pub fn name(self) -> &'static str {
        match self {
            Self::WrongTool => "wrong tool",
            Self::WrongArguments => "wrong arguments",
            Self::RedundantCall => "redundant call",
            Self::UnsupportedAnswer => "unsupported answer",
            Self::Contradiction => "contradiction",
            Self::Fabrication => "fabrication",
            Self::FormatError => "format error",
            Self::GaveUpEarly => "gave up early",
            Self::SkippedStep => "skipped step",
            Self::WrongAnswer => "wrong answer",
        }
    }
}

/// One flaw of an episode, found by a step verifier.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// Index of the agent message it concerns (0-based; the last message for end-of-episode
    /// findings, or the number of messages when the episode has none left to blame).
    pub step: usize,
    /// What kind of flaw.
    pub kind: FindingKind,
    /// What exactly, in a sentence that may name the expected value (for the judge's trace;
    /// the judge must not copy it into a critique).
    pub detail: String,
}

impl Finding {
    /// Builds one.
    pub fn new(step: usize, kind: FindingKind, detail: impl Into<String>) -> Self {
        Self { step, kind, detail: detail.into() }
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "step {}: {}: {}", self.step, self.kind.name(), self.detail)
    }
}
