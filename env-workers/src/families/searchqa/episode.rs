//! One searchqa episode: the step function over a shared task. Each step returns the
//! observation and an [`Event`] saying what happened, which the verifier replays.
//!
//! ```text
//!  search(query) ──► BM25 top 3 ──► "[1] passage\n[2] passage\n[3] passage"  (or "no passage matches …")
//!  <answer>…</answer> ──► end: reward = exact match, F1 in the summary
//! ```

use std::sync::Arc;

use super::generate::{Task, TOP_K};
use crate::action::{self, Action};
use crate::env::Observation;
use crate::families::qa::{answer_outcome, text_argument, NO_USER, OVER};

const TOOLS: &str = "the only tool here is search(query), e.g. <tool>search(\"Halvard Systems founded\")</tool>";

/// What one agent message did, for the verifier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The message is not a well-formed action.
    Malformed,
    /// A message after the answer.
    AfterEnd,
    /// Free text, with no user to hear it.
    Free,
    /// A tool that does not exist here.
    UnknownTool(String),
    /// `search` without a query.
    NoQuery,
    /// A search and the passages it returned, best first.
    Searched {
        /// The query as typed.
        query: String,
        /// Passage numbers returned.
        docs: Vec<usize>,
    },
    /// The final answer.
    Answered(String),
}

/// One episode over a shared task.
#[derive(Debug, Clone)]
pub struct Searcher {
    task: Arc<Task>,
    over: bool,
}

impl Searcher {
    /// A fresh episode.
    pub fn new(task: Arc<Task>) -> Self {
        Self { task, over: false }
    }

    /// The task.
    pub fn task(&self) -> &Task {
        &self.task
    }

    /// The shared task, for a fresh episode.
    pub fn shared(&self) -> Arc<Task> {
        Arc::clone(&self.task)
    }

    /// Takes one agent message.
    pub fn step(&mut self, message: &str) -> (Observation, Event) {
        if self.over {
            return (Observation::flawed(OVER), Event::AfterEnd);
        }
        match action::parse(message) {
            Err(e) => (Observation::flawed(format!("format error: {e}")), Event::Malformed),
            Ok(Action::Say(_)) => (Observation::flawed(NO_USER), Event::Free),
            Ok(Action::Answer(text)) => {
                self.over = true;
                (Observation::end(answer_outcome(&text, &self.task.answer)), Event::Answered(text))
            }
            Ok(Action::Tool(call)) if call.name == "search" => match text_argument(&call.raw_args) {
                Some(query) => self.search(query),
                None => (
                    Observation::flawed("search takes a query, e.g. search(\"Halvard Systems founded\")"),
                    Event::NoQuery,
                ),
            },
            Ok(Action::Tool(call)) => {
                let shown: String = call.name.chars().take(40).collect();
                (Observation::flawed(format!("unknown tool `{shown}`; {TOOLS}")), Event::UnknownTool(shown))
            }
        }
    }

    fn search(&self, query: String) -> (Observation, Event) {
        let top = self.task.index.top_k(&query, TOP_K);
        let text = if top.is_empty() {
            format!("no passage matches {query:?}")
        } else {
            let mut out = String::new();
            for (rank, (doc, _)) in top.iter().enumerate() {
                let passage = self.task.passages.get(*doc).map_or("", String::as_str);
                out.push_str(&format!("[{}] {passage}\n", rank + 1));
            }
            out
        };
        let docs = top.into_iter().map(|(d, _)| d).collect();
        (Observation::tool(text), Event::Searched { query, docs })
    }
}
