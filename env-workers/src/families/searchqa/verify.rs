//! The searchqa step verifier: replays the messages on a fresh [`Searcher`] and applies the rules
//! below, at most one finding per message before the answer (the first rule that applies).
//!
//! Terms: hop `k`'s **passage** is the one stating the fact of the chain's entity `k` (the
//! question's entity is entity 0); a hop is **visited** once its passage was in some search's
//! results; the **next hop** is the first hop not yet visited. A query or answer **names** an
//! entity when the entity's normalised name occurs in it as whole words; a name is **observed**
//! when it occurs in the question or an earlier result.
//!
//! | message | finding |
//! |---|---|
//! | not a well-formed action, or after the answer | `FormatError` |
//! | free text (no user) or a tool other than `search` | `WrongTool` |
//! | `search` without a query | `WrongArguments` |
//! | a query with the same tokens as an earlier one (same results) | `RedundantCall` |
//! | a query naming the chain's entity `j` while an earlier hop is unvisited (a guessed shortcut) | `SkippedStep`, naming the earliest |
//! | a query naming an entity that was never observed | `Fabrication` |
//! | a search that finds no unvisited hop passage while the next hop's entity was observed | `WrongArguments` |
//! | the answer, when not an exact match | `WrongAnswer` |
//! | the answer, when in no observation: naming an unobserved entity / otherwise | `Fabrication` / `UnsupportedAnswer` |
//! | the answer, per hop never visited and not yet reported | `SkippedStep` |
//! | no answer at all | `GaveUpEarly` at the last message (0 when none) |
//!
//! Searches after every hop was visited (double-checking) are not flagged unless repeated.
//! `Contradiction` is not produced by this family.

use std::sync::Arc;

use super::bm25::tokenize;
use super::episode::{Event, Searcher};
use super::generate::Task;
use crate::families::qa::{mentions, padded, Observed};
use crate::scoring::{exact_match, normalize};
use crate::verify::{Finding, FindingKind};

struct Replay {
    task: Arc<Task>,
    hops: Vec<usize>,
    visited: Vec<bool>,
    reported: Vec<bool>,
    queries: Vec<Vec<String>>,
    observed: Observed,
    findings: Vec<Finding>,
}

/// Findings for `messages` replayed on `searcher`, which must be a fresh episode.
pub fn verify(searcher: &mut Searcher, messages: &[String]) -> Vec<Finding> {
    let task = searcher.shared();
    let hops: Vec<usize> = (0..task.hops()).filter_map(|k| task.hop_passage(k)).collect();
    let n = hops.len();
    let observed = Observed::new(&task.question);
    let mut r = Replay {
        task,
        hops,
        visited: vec![false; n],
        reported: vec![false; n],
        queries: Vec::new(),
        observed,
        findings: Vec::new(),
    };
    let mut answered = false;
    for (i, message) in messages.iter().enumerate() {
        let (obs, event) = searcher.step(message);
        match event {
            Event::Malformed => r.push(i, FindingKind::FormatError, "the message is not a valid action"),
            Event::AfterEnd => r.push(i, FindingKind::FormatError, "a message after the episode ended"),
            Event::Free => r.push(i, FindingKind::WrongTool, "free text, but there is no user here to talk to"),
            Event::UnknownTool(name) => r.push(i, FindingKind::WrongTool, format!("`{name}` is not a tool here")),
            Event::NoQuery => r.push(i, FindingKind::WrongArguments, "search() needs a query"),
            Event::Searched { query, docs } => r.search(i, &query, &docs),
            Event::Answered(text) => r.answer(i, &text),
        }
        if obs.flaw.is_none() && obs.end.is_none() {
            r.observed.add(&obs.text);
        }
        answered |= obs.end.is_some();
    }
    if !answered {
        let detail = "the episode ends without an answer";
        r.push(messages.len().saturating_sub(1), FindingKind::GaveUpEarly, detail);
    }
    r.findings
}

impl Replay {
    fn push(&mut self, step: usize, kind: FindingKind, detail: impl Into<String>) {
        self.findings.push(Finding::new(step, kind, detail));
    }

    /// The name of the chain's entity `k` as the passages write it.
    fn chain_name(&self, k: usize) -> String {
        self.task.chain.get(k).map_or_else(String::new, |&e| self.task.world.name(e).to_string())
    }

    /// Whether the chain's entity `k` is named in `padded_text`.
    fn names_hop(&self, padded_text: &str, k: usize) -> bool {
        self.task.chain.get(k).and_then(|&e| self.task.names.get(e)).is_some_and(|n| mentions(padded_text, n))
    }

    /// The first entity named in `padded_text` that was never observed.
    fn unobserved_name(&self, padded_text: &str) -> Option<String> {
        let t = &self.task;
        (0..t.names.len())
            .find(|&e| mentions(padded_text, &t.names[e]) && !self.observed.has(&t.names[e]))
            .map(|e| t.world.name(e).to_string())
    }

    fn search(&mut self, i: usize, query: &str, docs: &[usize]) {
        let tokens: Vec<String> = tokenize(query).collect();
        let repeated = self.queries.contains(&tokens);
        self.queries.push(tokens);
        let next = self.visited.iter().position(|v| !v);
        let next_known = next
            .and_then(|h| self.task.chain.get(h))
            .and_then(|&e| self.task.names.get(e))
            .is_some_and(|n| self.observed.has(n));
        let finds_new = docs.iter().any(|d| self.hops.iter().zip(&self.visited).any(|(h, v)| h == d && !v));
        for d in docs {
            for (h, v) in self.hops.iter().zip(self.visited.iter_mut()) {
                *v |= h == d;
            }
        }
        if repeated {
            return self.push(i, FindingKind::RedundantCall, format!("search({query:?}) repeats an earlier search"));
        }
        let q = padded(query);
        let jumped = (1..self.hops.len())
            .filter(|&j| self.names_hop(&q, j))
            .find_map(|j| (0..j).find(|&h| !self.visited[h] && !self.reported[h]).map(|h| (j, h)));
        if let Some((j, h)) = jumped {
            self.reported[h] = true;
            let (to, from) = (self.chain_name(j), self.chain_name(h));
            let detail = format!("searched for {to:?} before finding the passage on {from:?} that leads to it");
            return self.push(i, FindingKind::SkippedStep, detail);
        }
        if let Some(n) = self.unobserved_name(&q) {
            let detail = format!("the query names {n:?}, which appears in no result nor in the question");
            return self.push(i, FindingKind::Fabrication, detail);
        }
        if let (Some(h), true, false) = (next, next_known, finds_new) {
            let detail = format!(
                "search({query:?}) finds nothing new on the way to the answer; the next lead is {:?}",
                self.chain_name(h)
            );
            self.push(i, FindingKind::WrongArguments, detail);
        }
    }

    fn answer(&mut self, i: usize, text: &str) {
        let truth = self.task.answer.clone();
        if exact_match(text, &truth) < 1.0 {
            self.push(i, FindingKind::WrongAnswer, format!("the answer {text:?} is not {truth:?}"));
        }
        if !self.observed.has(&normalize(text)) {
            match self.unobserved_name(&padded(text)) {
                Some(n) => {
                    let detail = format!("the answer names {n:?}, which appears in no result nor in the question");
                    self.push(i, FindingKind::Fabrication, detail);
                }
                None => {
                    self.push(i, FindingKind::UnsupportedAnswer, format!("the answer {text:?} appears in no result"))
                }
            }
        }
        for h in 0..self.hops.len() {
            if !self.visited[h] && !self.reported[h] {
                self.reported[h] = true;
                let detail = format!("the passage on {:?} (hop {}) was never found", self.chain_name(h), h + 1);
                self.push(i, FindingKind::SkippedStep, detail);
            }
        }
    }
}
