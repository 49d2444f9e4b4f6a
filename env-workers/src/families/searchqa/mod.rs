//! The `searchqa` family (HotpotQA/MuSiQue-like): multi-hop questions over a generated knowledge
//! base, answered by searching a corpus of short passages ranked by BM25.
//!
//! ```text
//!  user: "In which country does the birthplace of the founder of Acme Corp lie?"
//!  agent: <tool>search("Acme Corp founded")</tool>   ──► top 3: "Acme Corp is a … company founded by Ada Brandt …"
//!  agent: <tool>search("Ada Brandt born")</tool>     ──► top 3: "Ada Brandt is a chemist born in Brightwater …"
//!  agent: <tool>search("Brightwater city")</tool>    ──► top 3: "Brightwater is a city in Aldoria …"
//!  agent: <answer>Aldoria</answer>                   ──► end: reward = exact match; F1 in the summary
//! ```
//!
//! - Tasks come from [`generate`]: difficulty 1, 2, 3 asks 2, 3, 4 hops. The corpus has one
//!   passage per entity and distractors: namesakes (people, companies, titles sharing words) and
//!   passages mentioning the chain's entities beside other places.
//! - The one tool, `search(query)`, returns the top 3 passages by [`bm25`] (k1 = 1.2, b = 0.75)
//!   over an inverted index built once per task.
//! - The answer ends the episode: reward 1.0 on exact match after SQuAD normalisation, else 0.0;
//!   the summary shows the F1 too (never the truth).
//! - Free text, unknown tools and malformed messages get a flawed observation; the episode goes on.
//! - The verifier's rules are in [`verify`](self::verify).

pub mod bm25;
pub mod corpus;
pub mod episode;
pub mod generate;
pub mod verify;
pub mod world;

use std::sync::Arc;

use protocol::wire::TaskSpec;

use crate::env::{Environment, Observation, Prompt};
use crate::verify::Finding;
pub use episode::{Event, Searcher};
pub use generate::{generate, Task};

/// The system prompt: role, tool and protocol.
pub const SYSTEM_PROMPT: &str = "You answer questions by searching a collection of short passages.

Tool:
  search(query)  returns the 3 passages that best match the query's words (BM25 ranking)

Protocol, one action per message:
  <tool>search(\"Halvard Systems founded\")</tool>   call the tool; its result is the next message
  <answer>…</answer>                                your final answer, a name as the passages write it; ends the episode

Questions take several searches: search for the entity the question names, read its passage,
then search for the entity that passage leads to, and so on. Use only names you have read.
There is no user to talk to.";

/// One searchqa task: the generated corpus and index (shared, read-only) and the episode.
#[derive(Debug, Clone)]
pub struct SearchqaEnv {
    spec: TaskSpec,
    prompt: Prompt,
    searcher: Searcher,
}

impl SearchqaEnv {
    /// The task for `spec` (its difficulty is clamped to 1..=3; the registry rejects others).
    pub fn new(spec: TaskSpec) -> Self {
        let task = Arc::new(generate(spec.seed, spec.difficulty));
        let prompt = Prompt { system: SYSTEM_PROMPT.to_string(), user: task.question.clone() };
        Self { spec, prompt, searcher: Searcher::new(task) }
    }

    /// The generated task: world, corpus, index, chain, question and answer.
    pub fn task(&self) -> &Task {
        self.searcher.task()
    }

    /// A fresh episode of the same task (the corpus and index are shared, not copied).
    pub fn fresh(&self) -> Self {
        Self { spec: self.spec, prompt: self.prompt.clone(), searcher: Searcher::new(self.searcher.shared()) }
    }
}

impl Environment for SearchqaEnv {
    fn spec(&self) -> TaskSpec {
        self.spec
    }

    fn prompt(&self) -> &Prompt {
        &self.prompt
    }

    fn step(&mut self, message: &str) -> Observation {
        self.searcher.step(message).0
    }

    fn reference(&self) -> Vec<String> {
        let task = self.task();
        let name = |k: usize| task.chain.get(k).map_or("", |&e| task.world.name(e));
        let mut out: Vec<String> = task
            .queries
            .iter()
            .enumerate()
            .map(|(k, q)| {
                let note = match k {
                    0 => format!("The question starts from {}; I look up its passage.", name(0)),
                    _ => format!("That passage leads to {}; I look it up next.", name(k)),
                };
                format!("{note}\n<tool>search(\"{q}\")</tool>")
            })
            .collect();
        let last = name(task.hops().saturating_sub(1));
        out.push(format!("The passage on {last} gives the answer.\n<answer>{}</answer>", task.answer));
        out
    }

    fn verify(&self, agent_messages: &[String]) -> Vec<Finding> {
        verify::verify(&mut Searcher::new(self.searcher.shared()), agent_messages)
    }
}
