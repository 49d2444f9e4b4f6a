//! The reference judge's critique: which messages went wrong and what kind of mistake each is,
//! in fixed sentences per (family, kind). It is built from the findings' steps and kinds only,
//! never from their details (which may name the expected value), and holds no digit at all:
//! messages are named by ordinal words ("your third message"), so no number of the task, the
//! solution or the agent's own messages can appear in it.

use std::collections::BTreeMap;

use protocol::wire::{Finding, FindingKind, TaskFamily};

use super::score::weight;

/// Flawed messages described one by one; the rest are summarised in one line.
const MAX_LISTED: usize = 4;

const UNITS: [&str; 20] = [
    "",
    "first",
    "second",
    "third",
    "fourth",
    "fifth",
    "sixth",
    "seventh",
    "eighth",
    "ninth",
    "tenth",
    "eleventh",
    "twelfth",
    "thirteenth",
    "fourteenth",
    "fifteenth",
    "sixteenth",
    "seventeenth",
    "eighteenth",
    "nineteenth",
];
const TENS: [&str; 10] = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"];
const TENTHS: [&str; 10] =
    ["", "", "twentieth", "thirtieth", "fortieth", "fiftieth", "sixtieth", "seventieth", "eightieth", "ninetieth"];

/// `1 → "first"`, `23 → "twenty-third"`; beyond 99, "a later".
pub fn ordinal(n: usize) -> String {
    match n {
        0 | 100.. => "a later".to_string(),
        1..=19 => UNITS[n].to_string(),
        _ if n.is_multiple_of(10) => TENTHS[n / 10].to_string(),
        _ => format!("{}-{}", TENS[n / 10], UNITS[n % 10]),
    }
}

/// What is wrong, for one kind of finding in one family: a clause that follows "there, ".
fn sentence(family: TaskFamily, kind: FindingKind) -> &'static str {
    use FindingKind as K;
    use TaskFamily as F;
    match (kind, family) {
        (K::FormatError, _) => {
            "the message breaks the action protocol: write exactly one action per message, either one well-formed tool call or one final answer"
        }
        (K::WrongTool, F::Retail) => {
            "the tool used does not serve what the customer asked for, or it acts before the customer is identified"
        }
        (K::WrongTool, _) => "it is free text or a call to a tool that is not offered here; use only the tools this task provides",
        (K::WrongArguments, F::Math) => {
            "the calculation does not move toward the result: an operand or an operator is wrong"
        }
        (K::WrongArguments, F::Webnav) => {
            "it opens a page that does not lead toward the information although a more relevant link was already visible"
        }
        (K::WrongArguments, F::Searchqa) => {
            "the search finds nothing new on the way; search for the lead that the earlier results point to"
        }
        (K::WrongArguments, _) => {
            "the call's arguments do not match what the customer asked for or what the tool results showed"
        }
        (K::RedundantCall, _) => "it repeats an earlier call that cannot tell you anything new; reuse the result you already have",
        (K::UnsupportedAnswer, F::Math) => {
            "the value given is not backed by any calculation you made; compute it with the tool before stating it"
        }
        (K::UnsupportedAnswer, _) => "it states something that no tool result had shown; look it up before stating it",
        (K::Contradiction, _) => "it contradicts what an earlier tool result showed; reread the results before stating facts",
        (K::Fabrication, F::Math) => {
            "it uses a number that appears neither in the problem nor in an earlier result, as if worked out in your head; compute every value with the tool"
        }
        (K::Fabrication, F::Webnav) => {
            "it opens an address that no link seen so far points to; follow links instead of guessing addresses"
        }
        (K::Fabrication, F::Searchqa) => {
            "it relies on a name that appears neither in the question nor in any result so far; use only names you have actually seen"
        }
        (K::Fabrication, _) => {
            "it uses a detail that neither the customer nor any tool gave; ask for it or look it up instead of assuming it"
        }
        (K::GaveUpEarly, F::Retail) => "the conversation was closed before the customer's request was fully handled",
        (K::GaveUpEarly, _) => "the episode ended without a final answer; keep working until the task is finished, then answer",
        (K::SkippedStep, F::Math) => {
            "a necessary intermediate calculation was never made; work through the problem one operation at a time"
        }
        (K::SkippedStep, F::Webnav) => {
            "a page on the way was skipped; reach each page through the link that leads to it"
        }
        (K::SkippedStep, F::Searchqa) => {
            "it jumps ahead in the chain of facts; first find the passage that leads to each next entity"
        }
        (K::SkippedStep, _) => "a part of the customer's request was never carried out or never answered",
        (K::WrongAnswer, F::Math) => "the final answer is not correct; recheck each step of the calculation",
        (K::WrongAnswer, F::Retail) => "the records end in a different state than the customer asked for",
        (K::WrongAnswer, _) => "the final answer is not correct; check which fact the question actually asks for",
    }
}

/// Where a flaw is: "In your third message" or, past the last message, "At the end".
fn place(step: usize, messages: usize) -> String {
    if step >= messages {
        "At the end of the episode".to_string()
    } else {
        format!("In your {} message", ordinal(step + 1))
    }
}

/// The critique of an episode of `messages` agent messages with these findings; `solved` is
/// said only when given (`Some`: the judge reveals the outcome).
pub fn critique(family: TaskFamily, solved: Option<bool>, findings: &[Finding], messages: usize) -> String {
    if findings.is_empty() {
        return "No flaw found: every step is backed by the task or by tool results, and the episode ends with a \
                supported final answer. Keep working the same way."
            .to_string();
    }
    let mut by_step: BTreeMap<usize, Vec<FindingKind>> = BTreeMap::new();
    for f in findings {
        let kinds = by_step.entry(f.step).or_default();
        if !kinds.contains(&f.kind) {
            kinds.push(f.kind);
        }
    }
    let mut lines: Vec<String> = match solved {
        Some(true) => vec!["The task was solved, but the process has flaws.".to_string()],
        Some(false) => vec!["The attempt did not solve the task.".to_string()],
        None => Vec::new(),
    };
    for (step, kinds) in by_step.iter_mut().take(MAX_LISTED) {
        kinds.sort_by(|a, b| weight(*b).total_cmp(&weight(*a)));
        let what: Vec<&str> = kinds.iter().map(|k| sentence(family, *k)).collect();
        lines.push(format!("{}, {}.", place(*step, messages), what.join("; also, ")));
    }
    if by_step.len() > MAX_LISTED {
        lines.push("Later messages have flaws of the same kinds.".to_string());
    }
    let worst = findings.iter().map(|f| f.kind).max_by(|a, b| weight(*a).total_cmp(&weight(*b)));
    if let Some(advice) = worst.map(|k| closing(family, k)) {
        lines.push(advice.to_string());
    }
    lines.join(" ")
}

/// One closing piece of advice, for the most serious kind of flaw.
fn closing(family: TaskFamily, kind: FindingKind) -> &'static str {
    match (kind, family) {
        (FindingKind::RedundantCall | FindingKind::FormatError, _) => "Keep each step purposeful and well-formed.",
        (_, TaskFamily::Retail) => {
            "Identify the customer first, check each record with a tool before changing it, and handle every part of the request before closing."
        }
        (_, TaskFamily::Math) => "Take every value from the problem or from a calculator result, one step at a time.",
        (_, _) => "Base every step and the final answer on what the observations actually show.",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinals_are_words() {
        assert_eq!(ordinal(1), "first");
        assert_eq!(ordinal(12), "twelfth");
        assert_eq!(ordinal(20), "twentieth");
        assert_eq!(ordinal(23), "twenty-third");
        assert_eq!(ordinal(99), "ninety-ninth");
        assert_eq!(ordinal(100), "a later");
    }

    #[test]
    fn critiques_name_the_message_and_the_kind_but_no_detail() {
        let findings = [
            Finding::new(1, FindingKind::WrongArguments, "calc(100 + 72)) fails: the right value is 172"),
            Finding::new(3, FindingKind::WrongAnswer, "the answer is 7; the right answer is 289/9"),
            Finding::new(3, FindingKind::SkippedStep, "step 2 of the solution (172) was never computed"),
        ];
        let c = critique(TaskFamily::Math, Some(false), &findings, 4);
        assert!(c.starts_with("The attempt did not solve the task. In your second message, the calculation"), "{c}");
        assert!(c.contains("In your fourth message, the final answer is not correct"), "{c}");
        assert!(!c.chars().any(|ch| ch.is_ascii_digit()), "no digit: {c}");
        let hidden = critique(TaskFamily::Math, None, &findings, 4);
        assert!(hidden.starts_with("In your second message, the calculation"), "no outcome said: {hidden}");
    }

    #[test]
    fn long_lists_are_summarised_and_ends_are_placed() {
        let findings: Vec<Finding> = (0..9).map(|i| Finding::new(i, FindingKind::RedundantCall, "")).collect();
        let c = critique(TaskFamily::Webnav, Some(true), &findings, 9);
        assert!(c.starts_with("The task was solved, but the process has flaws."));
        assert_eq!(c.matches("In your").count(), MAX_LISTED);
        assert!(c.contains("Later messages have flaws of the same kinds."));
        let c = critique(TaskFamily::Retail, Some(false), &[Finding::new(5, FindingKind::SkippedStep, "")], 5);
        assert!(c.contains("At the end of the episode, a part of the customer's request"), "{c}");
    }
}
