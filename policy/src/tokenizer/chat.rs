//! The chat template: a conversation of (role, text) turns becomes one id sequence with a loss
//! mask that is `true` exactly on the agent's tokens — its text and its end-of-turn marker,
//! which is what the model must learn to emit — and `false` on everything it was given.
//!
//! ```text
//!  start | header(system) text end sep | header(user) text end sep | header(agent) text end sep
//!  mask:   0      0         0    0   0 |  0            0    0   0  |  0             1    1   0
//! ```
//!
//! Byte-level: `start = <|bos|>`, `header(r) = <|r|>`, `end = <|end|>`, no separator.
//! ChatML (Qwen2.5's tokenizer.json): no start, `header(r) = <|im_start|>r\n`,
//! `end = <|im_end|>`, `sep = \n`.
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
    /// The header that opens a turn, per role in the order system, user, agent, tool.
    pub headers: [Vec<u32>; 4],
    /// Closes every turn; the agent's copy is trained on and is the stop sequence.
    pub end_of_turn: Vec<u32>,
    /// Follows the end of a turn; never trained on.
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
        &self.headers[match role {
            Role::System => 0,
            Role::User => 1,
            Role::Agent => 2,
            Role::Tool => 3,
        }]
    }

    /// The stop sequences for generating an agent turn: the end-of-turn marker.
    pub fn stop_sequences(&self) -> Vec<Vec<u32>> {
        vec![self.end_of_turn.clone()]
    }

    /// Renders one turn (without `start`).
    pub fn render_turn(&self, tok: &dyn Tokenizer, role: Role, text: &str) -> Result<RenderedTurn> {
        let header = self.header(role);
        let body = tok.encode(text)?;
        let trained = role == Role::Agent;
        let mut ids = Vec::with_capacity(header.len() + body.len() + self.end_of_turn.len() + self.separator.len());
        let mut loss_mask = Vec::with_capacity(ids.capacity());
        ids.extend_from_slice(header);
        loss_mask.resize(header.len(), false);
        for part in [&body, &self.end_of_turn] {
            ids.extend_from_slice(part);
            loss_mask.resize(ids.len(), trained);
        }
        ids.extend_from_slice(&self.separator);
        loss_mask.resize(ids.len(), false);
        Ok(RenderedTurn { ids, loss_mask })
    }

    /// Renders a whole conversation.
    pub fn render(&self, tok: &dyn Tokenizer, turns: &[(Role, &str)]) -> Result<RenderedChat> {
        let mut out = RenderedChat {
            ids: self.start.clone(),
            loss_mask: vec![false; self.start.len()],
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
