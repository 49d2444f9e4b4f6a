//! The start of a refined attempt (Reagent-C and Reagent-U, docs/architecture.md section 3): what the
//! policy sees before it writes again, built from the task, the first attempt and the RRM's
//! critique. Two layouts ([`RefineFrom`], setting `actor.refine_from`):
//!
//! ```text
//!  start (the whole attempt in the prompt)      first_flaw (the default: the attempt kept up to its first flaw)
//!  user:  <the task>                            user:  <the task>
//!
//!         Your previous attempt:                       Critique of your previous attempt:
//!         your first message: <agent 1>                <critique>
//!         tool: <observation 1>
//!         your second message: …                       <REFINE_FROM_FLAW_INSTRUCTION>
//!         (oldest left out first if over budget;
//!          the rest keep their numbers)         agent: <first attempt's message 1>   (replayed, not trained)
//!                                               tool:  <observation 1>                (the environment's answer again)
//!         Critique of the previous attempt:     agent: … up to the message the critique flags first,
//!         <critique>                                   which the policy writes anew, and the rest
//!
//!         <REFINE_INSTRUCTION>
//! ```
//!
//! `start`: the task comes first. Measured both ways on 2026-11-24 with a `micro` cold start of
//! 3,000 updates and 30 % refinement examples (docs/experiments/critique-channel.md): with the
//! task last the cold start learnt far less (greedy difficulty-1 success 7 % against 74 %). Even
//! task-first, the refined attempts of that model solved 15 % against 58.5 % for first attempts:
//! a small model copies numbers out of a long transcript into its new calculations.
//!
//! `first_flaw`: the messages before the first one the critique names ("your third message",
//! "message 3"; the earliest when it names several) are kept as they were: replayed into the
//! conversation and through the environment, marked as not trained; the policy writes from the
//! flagged message on. A critique that names no message keeps every message but the last (the
//! final answer is written again). The policy then continues its own conversation, the shape it
//! was trained on, with the critique in view, instead of reading a transcript. Measured
//! (docs/experiments/critique-channel.md): the same `micro` cold start that made `start` refinements lose 43.5 points
//! against first attempts made `first_flaw` refinements gain 3 (and break 1 % of successes, not
//! 76 %). Quoting the message to write again in the prompt was tried and made the cold start
//! itself collapse (greedy 23 % against 64 %): the examples again hold text to copy. It needs a
//! critique that names messages, as the reference judge's does and the `trajectory` judge
//! prompt asks for; a free-text critique that names none leaves only the last message to redo.
//!
//! Both layouts are our reading of the paper (its trainer code for C and U was never
//! published). The first attempt's outcome is not shown: the critique is the only judgement the
//! agent sees. Agent messages are named in words as the reference judge's critique names them.

use policy::Tokenizer;
use protocol::wire::{Episode as Body, Prompt, Role, Trajectory};
use serde::{Deserialize, Serialize};

use crate::error::Result;

/// Where a refined attempt starts (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RefineFrom {
    /// From the beginning, the whole first attempt numbered in the prompt.
    Start,
    /// From the first message the critique flags, the messages before it kept.
    #[default]
    FirstFlaw,
}

impl std::str::FromStr for RefineFrom {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "start" => Ok(Self::Start),
            "first_flaw" => Ok(Self::FirstFlaw),
            other => Err(format!("unknown refinement start {other:?}; expected \"start\" or \"first_flaw\"")),
        }
    }
}

/// How a refined attempt opens: its prompt, and the first attempt's agent messages it keeps
/// (replayed in order, through the environment, before the policy writes; none for `start`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefinedStart {
    /// The system turn and the user turn.
    pub prompt: Prompt,
    /// Agent messages replayed as they were, not trained on.
    pub kept: Vec<String>,
}

impl RefinedStart {
    /// A start with nothing kept.
    pub fn fresh(prompt: Prompt) -> Self {
        Self { prompt, kept: Vec::new() }
    }
}

/// The closing line of a `first_flaw` refined attempt's user turn.
pub const REFINE_FROM_FLAW_INSTRUCTION: &str =
    "Your previous attempt follows, kept up to the first message the critique names; write from there on, taking the critique into account.";

/// The closing line of a `start` refined attempt's user turn.
pub const REFINE_INSTRUCTION: &str = "Solve the task again from the start, taking the critique into account.";

/// The label of the agent's `n`-th message (from 1), in the critique's words.
pub fn agent_label(n: usize) -> String {
    format!("your {} message", env_workers::judge::ordinal(n))
}

/// The first attempt's exchanges after the task: every agent, tool and user turn except the
/// opening system and task turns, agent messages numbered.
fn transcript(first: &Trajectory) -> Vec<String> {
    let Body::Text(turns) = &first.episode else { return Vec::new() };
    let opening = turns.iter().take_while(|t| t.role == Role::System).count() + 1;
    let mut agent = 0;
    turns
        .iter()
        .skip(opening)
        .map(|t| {
            let label = match t.role {
                Role::Agent => {
                    agent += 1;
                    agent_label(agent)
                }
                Role::Tool => "tool".to_string(),
                Role::User => "user".to_string(),
                Role::System => "system".to_string(),
            };
            format!("{label}: {}", t.text)
        })
        .collect()
}

fn compose(task: &str, lines: &[String], left_out: usize, critique: &str) -> String {
    let mut text = format!("{task}\n\nYour previous attempt:\n");
    if left_out > 0 {
        text.push_str(&format!("[{left_out} earlier messages left out]\n"));
    }
    for line in lines {
        text.push_str(line);
        text.push('\n');
    }
    text.push_str(&format!("\nCritique of the previous attempt:\n{}\n\n{REFINE_INSTRUCTION}", critique.trim()));
    text
}

/// The `start` prompt of an attempt that refines `first` after `critique`: `prompt`'s system
/// turn, and a user turn holding the task, the first attempt and the critique. When that turn
/// would take more than `max_tokens` tokens of `tok`, the oldest messages of the first attempt
/// are left out (and the omission said), never the task or the critique.
pub fn refined_prompt(
    prompt: &Prompt,
    first: &Trajectory,
    critique: &str,
    tok: &dyn Tokenizer,
    max_tokens: usize,
) -> Result<Prompt> {
    let lines = transcript(first);
    let mut skip = 0;
    let user = loop {
        let text = compose(&prompt.user, &lines[skip..], skip, critique);
        if skip == lines.len() || tok.encode(&text)?.len() <= max_tokens {
            break text;
        }
        skip += 1;
    };
    Ok(Prompt { system: prompt.system.clone(), user })
}

/// The 1-based number of the earliest agent message `critique` names — "your third message",
/// "the 3rd message", "message 3", "message #3" — or `None` when it names none.
pub fn flagged_message(critique: &str) -> Option<usize> {
    let words: Vec<String> = critique
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '#'))
        .filter(|w| !w.is_empty())
        .map(|w| w.trim_matches('-').to_ascii_lowercase())
        .collect();
    let mut earliest: Option<usize> = None;
    for (i, w) in words.iter().enumerate() {
        if w != "message" {
            continue;
        }
        let before = i.checked_sub(1).and_then(|j| parse_ordinal(&words[j]));
        let after = words.get(i + 1).and_then(|n| n.trim_start_matches('#').parse::<usize>().ok());
        if let Some(n) = before.or(after).filter(|&n| n >= 1) {
            earliest = Some(earliest.map_or(n, |e| e.min(n)));
        }
    }
    earliest
}

/// "third" → 3, "twenty-first" → 21, "3rd" → 3.
fn parse_ordinal(word: &str) -> Option<usize> {
    if let Some(n) = ["st", "nd", "rd", "th"].iter().find_map(|s| word.strip_suffix(s)?.parse::<usize>().ok()) {
        return Some(n);
    }
    (1..100).find(|&n| env_workers::judge::ordinal(n) == word)
}

/// How many of `messages` agent messages a `first_flaw` refinement keeps after `critique`: the
/// ones before the first flagged message, or all but the last when none is flagged.
pub fn kept_count(critique: &str, messages: usize) -> usize {
    let last = messages.saturating_sub(1);
    flagged_message(critique).map_or(last, |n| (n - 1).min(last))
}

/// The start of an attempt that refines `first` after `critique`, in the `from` layout (see the
/// module documentation); `max_tokens` bounds the `start` layout's transcript.
pub fn refined_start(
    prompt: &Prompt,
    first: &Trajectory,
    critique: &str,
    from: RefineFrom,
    tok: &dyn Tokenizer,
    max_tokens: usize,
) -> Result<RefinedStart> {
    match from {
        RefineFrom::Start => Ok(RefinedStart::fresh(refined_prompt(prompt, first, critique, tok, max_tokens)?)),
        RefineFrom::FirstFlaw => {
            let mut kept = env_workers::judge::agent_messages(first).unwrap_or_default();
            kept.truncate(kept_count(critique, kept.len()));
            let user = format!(
                "{}\n\nCritique of your previous attempt:\n{}\n\n{REFINE_FROM_FLAW_INSTRUCTION}",
                prompt.user,
                critique.trim()
            );
            Ok(RefinedStart { prompt: Prompt { system: prompt.system.clone(), user }, kept })
        }
    }
}
