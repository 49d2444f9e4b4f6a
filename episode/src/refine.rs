//! The prompt of a refined attempt (Reagent-C and Reagent-U, DESIGN.md section 3): the task,
//! the first attempt and the RRM's critique of it, in the first user turn.
//!
//! ```text
//!  user:  <the task>
//!
//!         Your previous attempt:
//!         your first message: <agent message 1>
//!         tool: <observation 1>
//!         your second message: …         (oldest messages left out first if over budget;
//!                                         the rest keep their numbers)
//!
//!         Critique of the previous attempt:
//!         <critique>
//!
//!         <REFINE_INSTRUCTION>
//! ```
//!
//! The task comes first. Measured both ways on 2026-11-24 with a `micro` cold start of 3,000
//! updates and 30 % refinement examples (BENCHMARKS.md, "The critique channel…"): with the task
//! last, right before the agent's first message, the cold start learnt far less (greedy
//! difficulty-1 success 7 % against 74 %, loss 0.40 against 0.19) — the refinement examples then
//! look like first attempts with a transcript that holds the solution's steps to copy.
//!
//! This layout is our reading of the paper (its trainer code for C and U was never published).
//! The first attempt's outcome is not shown: the critique is the only judgement the agent sees.
//! The agent's messages are numbered in words, as the reference judge's critique names them
//! ("In your third message, …"), so a critique points at a line the agent can find, also when
//! older lines were left out.

use policy::Tokenizer;
use protocol::wire::{Episode as Body, Prompt, Role, Trajectory};

use crate::error::Result;

/// The closing line of a refined attempt's user turn.
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

/// The prompt of an attempt that refines `first` after `critique`: `prompt`'s system turn, and
/// a user turn holding the task, the first attempt and the critique. When that turn would take
/// more than `max_tokens` tokens of `tok`, the oldest messages of the first attempt are left out
/// (and the omission said), never the task or the critique.
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
