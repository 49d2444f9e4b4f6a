//! The reference judge's reasoning trace (`<think>`): what each agent message did, what the step
//! verifier found there (details included: the trace is for the learner's logs and people, not
//! shown to the agent), how the replay ended, and how the score follows.

use std::fmt::Write;

use crate::action::{self, Action};
use protocol::wire::{Finding, Outcome, TaskSpec};

use super::score::{quality, score};

/// Longest excerpt of a message quoted in the trace.
const EXCERPT_CHARS: usize = 160;

fn excerpt(text: &str) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= EXCERPT_CHARS {
        return flat;
    }
    let cut: String = flat.chars().take(EXCERPT_CHARS).collect();
    format!("{cut}…")
}

/// What a message did, in a few words.
fn describe(message: &str) -> String {
    match action::parse(message) {
        Ok(Action::Tool(call)) => format!("calls {}", excerpt(&call.to_string())),
        Ok(Action::Answer(text)) => format!("answers {:?}", excerpt(&text)),
        Ok(Action::Say(text)) => format!("says {:?}", excerpt(&text)),
        Err(e) => format!("is not a valid action ({e})"),
    }
}

/// The trace for `messages` replayed as an episode of `spec`.
pub fn trace(spec: TaskSpec, messages: &[String], findings: &[Finding], end: Option<&Outcome>) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "Task: {} (seed {}, difficulty {}). I replay the {} agent messages on a fresh copy of the task and check each step.",
        spec.family,
        spec.seed,
        spec.difficulty,
        messages.len()
    );
    for (i, message) in messages.iter().enumerate() {
        let here: Vec<String> =
            findings.iter().filter(|f| f.step == i).map(|f| format!("{}: {}", f.kind.name(), f.detail)).collect();
        let verdict = if here.is_empty() { "no flaw".to_string() } else { here.join("; ") };
        let _ = writeln!(t, "Message {}: {} — {verdict}.", i + 1, describe(message));
    }
    for f in findings.iter().filter(|f| f.step >= messages.len()) {
        let _ = writeln!(t, "After the last message: {}: {}.", f.kind.name(), f.detail);
    }
    let solved = end.is_some_and(|o| o.success);
    match end {
        Some(o) => {
            let state = if o.success { "solved" } else { "not solved" };
            let _ = writeln!(t, "End: {} ({state}, outcome reward {}).", o.summary, o.reward);
        }
        None => {
            let _ = writeln!(t, "End: the messages run out before the episode ends (not solved).");
        }
    }
    let q = quality(findings);
    let total = score(solved, findings);
    if findings.is_empty() {
        let _ = write!(t, "No findings, so the process quality is 1.");
    } else {
        let _ = write!(
            t,
            "{} findings; the process quality is {q:.3} (each multiplies it by 1 − its weight).",
            findings.len()
        );
    }
    let _ = if solved {
        write!(t, " Solved, so the score is 0.5 + 0.5 × {q:.3} = {total}.")
    } else {
        write!(t, " Not solved, so the score is 0.5 × {q:.3} = {total}.")
    };
    t
}

#[cfg(test)]
mod tests {
    use protocol::wire::{FindingKind, TaskFamily};

    use super::*;

    #[test]
    fn every_message_and_the_arithmetic_of_the_score_are_shown() {
        let spec = TaskSpec { family: TaskFamily::Math, seed: 3, difficulty: 1 };
        let messages = vec!["<tool>calc(1 + 1)</tool>".to_string(), "<answer>3</answer>".to_string()];
        let findings = [Finding::new(1, FindingKind::WrongAnswer, "the answer is 3; the right answer is 2")];
        let end = Outcome { reward: 0.0, success: false, summary: "the answer 3 is wrong".into() };
        let t = trace(spec, &messages, &findings, Some(&end));
        assert!(t.contains("Message 1: calls calc(1 + 1) — no flaw."), "{t}");
        assert!(t.contains("Message 2: answers \"3\" — wrong answer: the answer is 3; the right answer is 2."), "{t}");
        assert!(t.ends_with("Not solved, so the score is 0.5 × 0.700 = 0.35."), "{t}");
    }
}
