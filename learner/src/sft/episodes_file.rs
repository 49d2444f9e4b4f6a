//! SFT on a user's own demonstrations: a JSON-lines file of whole reference episodes, one chat
//! per line in the OpenAI format, rendered with the policy's chat template so that exactly the
//! assistant's tokens (its text and end-of-turn marker) are trained on — the same layout as the
//! reference episodes the cold start otherwise plays ([`super::data`]).
//!
//! ```text
//!  {"messages": [{"role": "system",    "content": "…"},     system turn: as rollout.system_prompt
//!                {"role": "user",      "content": "…"},       says (kept, left out or replaced)
//!                {"role": "assistant", "content": "<tool>calc(6 * 8)</tool>"},   ◄ trained on
//!                {"role": "tool",      "content": "48"},
//!                {"role": "assistant", "content": "<answer>48</answer>"}]}        ◄ trained on
//!  ─ check every line (file, line, field named on error) ─ render ─► Sequence{ids, loss_mask}
//!  ─ shuffled each pass ─► batches of batch_size
//! ```
//!
//! Tool calls are written in the content with the action protocol (`<tool>name(args)</tool>`);
//! OpenAI's structured `tool_calls` are refused, not dropped. `name` and `tool_call_id` may be
//! present and are not used. Every line must hold an assistant message and fit
//! `max_context_tokens`; nothing is skipped.

use std::path::Path;

use episode::{RolloutConfig, SystemPrompt};
use policy::Tokenizer;
use protocol::wire::Role;
use serde_json::{Map, Value};

use crate::error::{LearnerError, Result};
use crate::rng::SampleRng;
use crate::tensors::Sequence;

/// Keys a message may have; `name` and `tool_call_id` are accepted and not used.
const MESSAGE_KEYS: [&str; 4] = ["role", "content", "name", "tool_call_id"];

fn bad(file: &Path, line: usize, field: impl Into<String>, detail: impl Into<String>) -> LearnerError {
    LearnerError::EpisodesFile { file: file.to_path_buf(), line, field: field.into(), detail: detail.into() }
}

fn role(name: &str) -> Option<Role> {
    Some(match name {
        "system" => Role::System,
        "user" => Role::User,
        "assistant" => Role::Agent,
        "tool" => Role::Tool,
        _ => return None,
    })
}

/// The turns of line `line` of `file`: (role, text), checked.
pub fn parse_line(file: &Path, line: usize, text: &str) -> Result<Vec<(Role, String)>> {
    let bad = |field: &str, detail: String| bad(file, line, field, detail);
    let obj: Map<String, Value> =
        serde_json::from_str(text).map_err(|e| bad("(line)", format!("not a JSON object: {e}")))?;
    if let Some(k) = obj.keys().find(|k| k.as_str() != "messages") {
        return Err(bad(k, "unknown field (a line is {\"messages\": [...]})".into()));
    }
    let messages = match obj.get("messages") {
        Some(Value::Array(m)) if !m.is_empty() => m,
        Some(_) => return Err(bad("messages", "expected a non-empty list of messages".into())),
        None => return Err(bad("messages", "missing".into())),
    };
    let mut turns = Vec::with_capacity(messages.len());
    for (i, m) in messages.iter().enumerate() {
        let at = |key: &str| format!("messages[{i}].{key}");
        let m = m.as_object().ok_or_else(|| bad(&format!("messages[{i}]"), "expected an object".into()))?;
        if m.contains_key("tool_calls") {
            return Err(bad(
                &at("tool_calls"),
                "structured tool calls are not supported: write the call in the content, <tool>name(arguments)</tool>"
                    .into(),
            ));
        }
        if let Some(k) = m.keys().find(|k| !MESSAGE_KEYS.contains(&k.as_str())) {
            return Err(bad(&at(k), format!("unknown key (a message has {})", MESSAGE_KEYS.join(", "))));
        }
        let r = m
            .get("role")
            .and_then(Value::as_str)
            .and_then(role)
            .ok_or_else(|| bad(&at("role"), "expected one of system, user, assistant, tool".into()))?;
        let content =
            m.get("content").and_then(Value::as_str).ok_or_else(|| bad(&at("content"), "expected a string".into()))?;
        if r == Role::Agent && content.trim().is_empty() {
            return Err(bad(&at("content"), "an assistant message is empty".into()));
        }
        turns.push((r, content.to_string()));
    }
    if !turns.iter().any(|(r, _)| *r == Role::Agent) {
        return Err(bad("messages", "no assistant message: nothing to train on".into()));
    }
    Ok(turns)
}

/// One chat as a training sequence: system turns as `rollout.system_prompt` says, rendered
/// with `tok`'s chat template; `Err(tokens)` when it is longer than `max_context_tokens`.
pub fn sequence(turns: &[(Role, String)], tok: &dyn Tokenizer, rollout: &RolloutConfig) -> Result<Sequence> {
    let kept: Vec<(Role, &str)> = turns
        .iter()
        .filter_map(|(r, text)| match (r, &rollout.system_prompt) {
            (Role::System, SystemPrompt::Omit) => None,
            (Role::System, SystemPrompt::Replace(t)) => Some((Role::System, t.as_str())),
            _ => Some((*r, text.as_str())),
        })
        .collect();
    let chat = tok.chat_template().render(tok, &kept)?;
    let logprobs = vec![0.0; chat.ids.len()];
    Ok(Sequence { ids: chat.ids, loss_mask: chat.loss_mask, logprobs })
}

/// Every line of `file` as a training sequence, checked.
pub fn load(file: &Path, tok: &dyn Tokenizer, rollout: &RolloutConfig) -> Result<Vec<Sequence>> {
    let text = std::fs::read_to_string(file).map_err(|e| LearnerError::io(file, e))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            return Err(bad(file, i + 1, "(line)", "the line is empty (one chat per line; remove blank lines)"));
        }
        let seq = sequence(&parse_line(file, i + 1, line)?, tok, rollout)?;
        if seq.ids.len() > rollout.max_context_tokens {
            let detail = format!(
                "the chat is {} tokens, more than max_context_tokens ({})",
                seq.ids.len(),
                rollout.max_context_tokens
            );
            return Err(bad(file, i + 1, "messages", detail));
        }
        out.push(seq);
    }
    if out.is_empty() {
        return Err(bad(file, 0, "(file)", "the file holds no chats"));
    }
    Ok(out)
}

/// An endless stream of batches of a file's chats, each pass over them in a new seeded order.
#[derive(Debug)]
pub struct EpisodeBatches {
    sequences: Vec<Sequence>,
    order: Vec<usize>,
    next: usize,
    batch_size: usize,
    rng: SampleRng,
}

impl EpisodeBatches {
    /// Batches of `batch_size` of `sequences` (non-empty), shuffled with `seed`.
    pub fn new(sequences: Vec<Sequence>, batch_size: usize, seed: u64) -> Self {
        let order = (0..sequences.len()).collect();
        Self { sequences, order, next: usize::MAX, batch_size: batch_size.max(1), rng: SampleRng::new(seed ^ 0xDE30) }
    }

    /// The next batch (a pass's last batch may be shorter).
    pub fn next_batch(&mut self) -> Vec<Sequence> {
        if self.next >= self.order.len() {
            for i in (1..self.order.len()).rev() {
                self.order.swap(i, self.rng.below(i + 1));
            }
            self.next = 0;
        }
        let end = (self.next + self.batch_size).min(self.order.len());
        let batch = self.order[self.next..end].iter().map(|&i| self.sequences[i].clone()).collect();
        self.next = end;
        batch
    }
}
