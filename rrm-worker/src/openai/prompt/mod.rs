//! What the OpenAI-compatible judge sends: a system and a user message, in the format
//! `rrm.prompt` names, within `rrm.max_prompt_chars` characters.
//!
//! ```text
//!  render(trajectory, format, max_chars)
//!    agent-rrm  ─► agent_rrm::render   the released Agent-RRM's prompt: Question + final message
//!    trajectory ─► trajectory::render  our instruction + every turn, fenced as data
//!  both: agent, tool and user text goes through fence::neutralise first
//! ```

pub mod agent_rrm;
pub mod fence;
pub mod fit;
pub mod trajectory;

use protocol::wire::Trajectory;

use crate::config::PromptFormat;

pub use agent_rrm::REWARD_MODEL_PROMPT;
pub use trajectory::INSTRUCTION;

/// The two chat messages of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompt {
    /// The system message.
    pub system: String,
    /// The user message.
    pub user: String,
    /// Characters of agent, tool or user text left out to fit the budget (0 when all fit).
    pub omitted_chars: usize,
}

/// The request's messages for `trajectory` in `format`, within `max_chars` characters.
pub fn render(trajectory: &Trajectory, format: PromptFormat, max_chars: usize) -> Prompt {
    match format {
        PromptFormat::AgentRrm => agent_rrm::render(trajectory, max_chars),
        PromptFormat::Trajectory => trajectory::render(trajectory, max_chars),
    }
}
