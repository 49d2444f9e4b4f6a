//! The chat template as ids: a conversation of (role, text) turns becomes one id sequence with
//! a loss mask that is `true` exactly on the agent's tokens — its text and its end-of-turn
//! marker, which is what the model must learn to emit — and `false` on everything it was given.
//!
//! ```text
//!  start [default system] | header(system) text footer | header(user) text footer | header(agent) text end sep
//!  mask:   0      0       |  0              0    0     |  0            0    0     |  0             1    1   0
//! ```
//!
//! A footer is what follows a turn's text: for the agent, its end-of-turn marker (trained on,
//! and the stop sequence) then a separator (not trained on).
//! Byte-level: `start = <|bos|>`, `header(r) = <|r|>`, every footer `<|end|>`.
//! A Hugging Face model's framing is read off its own Jinja template ([`super::framing`]): for
//! SmolLM2, `header(r) = <|im_start|>r\n`, footers `<|im_end|>\n`, and a default system turn
//! when the conversation has none; Qwen2.5 and Qwen3 wrap a tool result in a user turn,
//! `<|im_start|>user\n<tool_response>\n … \n</tool_response><|im_end|>\n`.
//!
//! An agent turn that was sampled should keep its sampled ids (the learner recomputes the
//! log-probs of exactly those); re-encoding its text can give other ids with a BPE tokenizer.

use protocol::wire::Role;

use super::Tokenizer;
use crate::error::Result;

/// How a tokenizer's models frame turns, as ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatTemplate {
    /// Put once before the first turn.
    pub start: Vec<u32>,
    /// Put after `start` when the conversation does not open with a system turn (the system
    /// turn a template writes by default, as SmolLM2's and Qwen2.5's do; often empty).
    pub default_system: Vec<u32>,
    /// The header that opens a turn, per role in the order system, user, agent, tool.
    pub headers: [Vec<u32>; 4],
    /// What follows a turn's text, per role in the same order. The agent's is
    /// `end_of_turn` then `separator`.
    pub footers: [Vec<u32>; 4],
    /// Closes the agent's turn; trained on, and the stop sequence of generation.
    pub end_of_turn: Vec<u32>,
    /// Follows the agent's end of turn; never trained on.
    pub separator: Vec<u32>,
}

/// One turn's ids and their loss mask.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RenderedTurn {
    /// Header, text, end of turn, separator.
    pub ids: Vec<u32>,
    /// `true` on the agent's text and end of turn.
    pub loss_mask: Vec<bool>,
}

/// A whole conversation's ids, loss mask, and where each turn begins.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RenderedChat {
    /// `start` and every turn.
    pub ids: Vec<u32>,
    /// `true` exactly on the agent's text and end-of-turn tokens.
    pub loss_mask: Vec<bool>,
    /// Index in `ids` where each turn's header begins.
    pub turn_starts: Vec<usize>,
}

impl ChatTemplate {
    /// The header ids that open a turn of `role`.
    pub fn header(&self, role: Role) -> &[u32] {
        &self.headers[role_index(role)]
    }

    /// The footer that follows a turn of `role`'s text.
    pub fn footer(&self, role: Role) -> &[u32] {
        &self.footers[role_index(role)]
    }

    /// What opens a conversation whose first turn is of `first`: `start`, and the default
    /// system turn unless `first` is a system turn.
    pub fn opening(&self, first: Role) -> Vec<u32> {
        let mut ids = self.start.clone();
        if first != Role::System {
            ids.extend_from_slice(&self.default_system);
        }
        ids
    }

    /// The stop sequences for generating an agent turn: the end-of-turn marker.
    pub fn stop_sequences(&self) -> Vec<Vec<u32>> {
        vec![self.end_of_turn.clone()]
    }

    /// Renders one turn (without the opening): header, text, footer; for the agent, the text
    /// and the footer's end-of-turn part are trained on.
    pub fn render_turn(&self, tok: &dyn Tokenizer, role: Role, text: &str) -> Result<RenderedTurn> {
        let (header, footer) = (self.header(role), self.footer(role));
        let body = tok.encode(text)?;
        let trained = role == Role::Agent;
        let mut ids = Vec::with_capacity(header.len() + body.len() + footer.len());
        ids.extend_from_slice(header);
        ids.extend_from_slice(&body);
        ids.extend_from_slice(footer);
        let mut loss_mask = vec![false; ids.len()];
        if trained {
            let end = header.len() + body.len() + self.end_of_turn.len();
            loss_mask[header.len()..end].fill(true);
        }
        Ok(RenderedTurn { ids, loss_mask })
    }

    /// Renders a whole conversation.
    pub fn render(&self, tok: &dyn Tokenizer, turns: &[(Role, &str)]) -> Result<RenderedChat> {
        let opening = self.opening(turns.first().map_or(Role::System, |t| t.0));
        let mut out = RenderedChat {
            loss_mask: vec![false; opening.len()],
            ids: opening,
            turn_starts: Vec::with_capacity(turns.len()),
        };
        for &(role, text) in turns {
            let turn = self.render_turn(tok, role, text)?;
            out.turn_starts.push(out.ids.len());
            out.ids.extend(turn.ids);
            out.loss_mask.extend(turn.loss_mask);
        }
        Ok(out)
    }

    /// The prompt for generating the agent's next turn: the conversation so far and an agent
    /// header. The model continues with the turn's text and ends it with `end_of_turn`.
    pub fn generation_prompt(&self, tok: &dyn Tokenizer, turns: &[(Role, &str)]) -> Result<Vec<u32>> {
        let mut ids = self.render(tok, turns)?.ids;
        ids.extend_from_slice(self.header(Role::Agent));
        Ok(ids)
    }
}

/// The index of `role` in [`ChatTemplate::headers`] and [`ChatTemplate::footers`].
fn role_index(role: Role) -> usize {
    match role {
        Role::System => 0,
        Role::User => 1,
        Role::Agent => 2,
        Role::Tool => 3,
    }
}
