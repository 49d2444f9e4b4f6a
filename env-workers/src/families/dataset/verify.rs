//! The dataset family's step verifier: what the reference judge explains for a dataset task.
//! Its tasks carry only a question and an answer, so it checks the protocol, the tools and the
//! outcome, not the reasoning. Replayed on a fresh copy of the task, per message in order:
//!
//! | message | finding |
//! |---|---|
//! | does not parse as an action, or comes after the episode ended | `FormatError` |
//! | free text (there is no user) or a tool the task does not offer | `WrongTool` |
//! | an offered tool whose call fails (e.g. a malformed expression) | `WrongArguments` |
//! | the same call as an earlier successful one (spaces ignored) | `RedundantCall` |
//! | a final answer the file's match mode rejects | `WrongAnswer` |
//! | no final answer at all | `GaveUpEarly` at the last message (0 when there is none) |

use super::DatasetEnv;
use crate::action::{self, Action};
use crate::verify::{Finding, FindingKind};

/// The findings of `messages` as an episode of `env`'s task (`env` is fresh).
pub fn verify(env: &DatasetEnv, messages: &[String]) -> Vec<Finding> {
    let mut findings = Vec::new();
    let mut calls: Vec<String> = Vec::new();
    let mut answered = false;
    for (i, message) in messages.iter().enumerate() {
        let mut found = |kind: FindingKind, detail: String| findings.push(Finding::new(i, kind, detail));
        if answered {
            found(FindingKind::FormatError, "a message after the final answer".into());
            continue;
        }
        match action::parse(message) {
            Err(e) => found(FindingKind::FormatError, e.to_string()),
            Ok(Action::Say(_)) => found(FindingKind::WrongTool, "free text, but there is no user".into()),
            Ok(Action::Tool(call)) => match env.offered(&call.name) {
                None => found(FindingKind::WrongTool, format!("`{}` is not offered by this task", call.name)),
                Some(tool) => {
                    let key: String = format!("{}({})", call.name, call.raw_args).split_whitespace().collect();
                    match tool.call(&call.raw_args) {
                        Err(why) => found(FindingKind::WrongArguments, why),
                        Ok(_) if calls.contains(&key) => {
                            found(FindingKind::RedundantCall, format!("repeats {}", call));
                        }
                        Ok(_) => calls.push(key),
                    }
                }
            },
            Ok(Action::Answer(text)) => {
                answered = true;
                if !env.task().answer.accepts(&text) {
                    found(FindingKind::WrongAnswer, format!("the answer {:?} is not accepted", short(&text)));
                }
            }
        }
    }
    if !answered {
        let last = messages.len().saturating_sub(1);
        findings.push(Finding::new(last, FindingKind::GaveUpEarly, "no final answer"));
    }
    findings
}

/// At most 80 characters of `text`.
pub fn short(text: &str) -> String {
    text.chars().take(80).collect()
}
