//! What the OpenAI-compatible judge sends: the Agent-RRM instruction (system message) and the
//! whole multi-turn trajectory rendered as the user message, within a character budget.
//!
//! ```text
//!  system: INSTRUCTION (three blocks, exactly; the critique never reveals the answer)
//!  user:   header ─ [system prompt] ─ [user] ─ [agent, message 1] ─ [tool result] ─ … ─ [agent, message n]
//!          over budget: the first half and the last half of the budget are kept, and a line in
//!          the middle says how many characters (of how many turns) were left out
//! ```

use protocol::wire::{Episode, Role, Trajectory};

/// The Agent-RRM instruction: what to judge and the exact output format.
pub const INSTRUCTION: &str =
    "You are Agent-RRM, a reasoning reward model. You judge the complete trajectory of an AI \
agent that works on a multi-turn task with tools: the task, every agent message, and every tool result or user reply.

Answer with exactly three blocks, in this order, and nothing else:
<think>Your step-by-step analysis: what the task requires; for each agent message, what it did and whether it was \
correct, supported by the task or by earlier observations, and necessary; and where the reasoning or the tool use went \
wrong.</think>
<critique>A concise critique addressed to the agent: name the flawed messages (which message, what kind of mistake) \
and how to do better. Never state the correct final answer, and never give values or hints that reveal it.</critique>
<score>One number between 0 and 1 for the quality of the whole trajectory: 1 for a correct, efficient and \
well-supported solution; lower for flawed or unnecessary steps, unsupported claims, and a wrong or missing final \
answer.</score>";

/// Room kept for the line that reports an omitted middle.
const MARKER_ROOM: usize = 200;

/// The two chat messages of a request: the instruction and the rendered trajectory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompt {
    /// The system message.
    pub system: String,
    /// The user message.
    pub user: String,
    /// Characters of the trajectory left out of the middle (0 when it fit).
    pub omitted_chars: usize,
}

fn label(role: Role, agent_index: usize) -> String {
    match role {
        Role::System => "[system prompt]".to_string(),
        Role::User => "[user]".to_string(),
        Role::Agent => format!("[agent, message {agent_index}]"),
        Role::Tool => "[tool result]".to_string(),
    }
}

/// The trajectory's turns, one block each, in order.
fn blocks(trajectory: &Trajectory) -> Vec<String> {
    let Episode::Text(turns) = &trajectory.episode else { return Vec::new() };
    let mut agent = 0;
    turns
        .iter()
        .map(|t| {
            agent += usize::from(t.role == Role::Agent);
            format!("{}\n{}\n\n", label(t.role, agent), t.text.trim_end())
        })
        .collect()
}

/// The first `n` characters of `s`.
fn head(s: &str, n: usize) -> &str {
    s.char_indices().nth(n).map_or(s, |(i, _)| &s[..i])
}

/// The last `n` characters of `s`.
fn tail(s: &str, n: usize) -> &str {
    let len = s.chars().count();
    if n >= len {
        return s;
    }
    s.char_indices().nth(len - n).map_or("", |(i, _)| &s[i..])
}

/// Joins `blocks`, keeping at most `budget` characters: over it, the beginning and the end are
/// kept and a line in the middle says what was left out. Returns the text and the characters
/// omitted.
pub fn fit(blocks: &[String], budget: usize) -> (String, usize) {
    let full: String = blocks.concat();
    let total = full.chars().count();
    if total <= budget {
        return (full, 0);
    }
    let keep = budget.saturating_sub(MARKER_ROOM);
    let (first, last) = (keep / 2, keep - keep / 2);
    let omitted = total - first - last;
    // Turns touched by the omitted range [first, total - last).
    let mut start = 0;
    let touched = blocks
        .iter()
        .filter(|b| {
            let (s, e) = (start, start + b.chars().count());
            start = e;
            s < total - last && e > first
        })
        .count();
    let marker = format!(
        "\n[… {omitted} characters from the middle of the trajectory (all or part of {touched} turns) are omitted here to fit the judge's prompt budget …]\n\n"
    );
    (format!("{}{marker}{}", head(&full, first), tail(&full, last)), omitted)
}

/// The request's messages for `trajectory`, the whole prompt within `max_chars` characters.
pub fn render(trajectory: &Trajectory, max_chars: usize) -> Prompt {
    let t = &trajectory.task;
    let header = format!(
        "Task family: {} (difficulty {}). The complete trajectory follows; agent messages are numbered in order.\n\n",
        t.family, t.difficulty
    );
    let budget = max_chars.saturating_sub(INSTRUCTION.chars().count() + header.chars().count());
    let (body, omitted_chars) = fit(&blocks(trajectory), budget);
    Prompt { system: INSTRUCTION.to_string(), user: format!("{header}{body}"), omitted_chars }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_trajectories_are_whole() {
        let blocks = vec!["a\n".to_string(), "b\n".to_string()];
        assert_eq!(fit(&blocks, 100), ("a\nb\n".to_string(), 0));
    }

    #[test]
    fn long_ones_keep_both_ends_say_so_and_stay_within_budget() {
        let blocks: Vec<String> = (0..50).map(|i| format!("[turn {i}]\n{}\n\n", "é".repeat(100))).collect();
        let (text, omitted) = fit(&blocks, 1_000);
        assert!(text.chars().count() <= 1_000, "{}", text.chars().count());
        assert!(text.starts_with("[turn 0]") && text.trim_end().ends_with(&"é".repeat(100)));
        assert!(omitted > 4_000 && text.contains(&format!("{omitted} characters from the middle")), "{text}");
        assert!(text.contains("turns) are omitted here"), "{text}");
    }

    #[test]
    fn one_huge_turn_is_cut_in_its_middle() {
        let blocks = vec![format!("[agent, message 1]\n{}{}\n\n", "x".repeat(5_000), "y".repeat(5_000))];
        let (text, omitted) = fit(&blocks, 1_200);
        assert!(text.starts_with("[agent, message 1]\nxxx") && text.trim_end().ends_with("yyy"));
        assert_eq!(omitted, blocks[0].chars().count() - 1_000);
        assert!(text.contains("(all or part of 1 turns)"));
    }
}
