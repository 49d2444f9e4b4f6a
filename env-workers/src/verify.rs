//! Step-verifier findings: what went wrong, at which agent message.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The kinds of flaw a verifier reports.
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

/// One flaw of an episode.
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
