//! The `dataset` family: a user's own tasks, read from JSON-lines files (`[dataset]` in the
//! configuration), played as multi-turn episodes with the one action protocol.
//!
//! ```text
//!  system: "You answer questions. Tools: calc(…) …"     (the task's tools, or none)
//!  user:   the task's question
//!  agent:  <tool>calc(48 / 2)</tool>    ──► tool: 24         (only tools the task lists)
//!  agent:  <answer>24</answer>          ──► end: reward 1 if the file's match mode accepts it
//! ```
//!
//! - Files, fields and checks: [`task`]; match modes (`exact`, `numeric`, `regex`, per file):
//!   [`matching`]; the held-out split by id hash and which task a seed plays: [`split`]; loading
//!   and pooling: [`catalog`]; the process's dataset: [`installed`].
//! - Free text, a tool the task does not offer or a failing call gives a flawed observation
//!   that says what was wrong; the episode goes on. The truth is never revealed.
//! - The reference solution is the answer alone (`<answer>…</answer>`), or nothing for a regex
//!   file; the verifier's rules are in [`verify`](mod@verify), so the reference judge (and
//!   with it every feedback mode) works on dataset tasks.
//! - [`sample`] writes the small sample dataset docs/environments.md's "Bring your own dataset" uses.

pub mod catalog;
pub mod error;
pub mod installed;
pub mod matching;
pub mod sample;
pub mod split;
pub mod task;
pub mod tools;
pub mod verify;

use protocol::wire::TaskSpec;

use crate::action::{self, Action};
use crate::env::{Environment, Observation, Outcome, Prompt};
use crate::verify::Finding;
pub use catalog::{Catalog, DatasetConfig, FileConfig};
pub use error::DatasetError;
pub use installed::{install, installed, load_config};
pub use matching::{Answer, MatchMode};
pub use split::{Split, HELD_OUT_FROM};
pub use task::Task;
pub use tools::Tool;

const NO_USER: &str = "there is no user to talk to here; call a tool or answer with <answer>…</answer>";
const OVER: &str = "the episode is over; no further actions are accepted";

/// The system prompt for a task offering `tools`.
pub fn system_prompt(tools: &[Tool]) -> String {
    let mut s = String::from("You answer questions.\n\n");
    if tools.is_empty() {
        s.push_str("There are no tools.\n\nProtocol:\n");
    } else {
        s.push_str("Tools:\n");
        for t in tools {
            s.push_str(t.usage());
            s.push('\n');
        }
        s.push_str("\nProtocol, one action per message:\n");
        s.push_str(&format!("  {:<33}call a tool; its result is the next message\n", tools[0].example()));
    }
    s.push_str(
        "  <answer>…</answer>               your final answer; ends the episode\n\nThere is no user to talk to.",
    );
    s
}

/// One dataset task and the episode's state.
#[derive(Debug, Clone)]
pub struct DatasetEnv {
    spec: TaskSpec,
    task: Task,
    prompt: Prompt,
    over: bool,
}

impl DatasetEnv {
    /// The task `spec` names in the process's dataset ([`installed`]).
    pub fn new(spec: TaskSpec) -> Result<Self, DatasetError> {
        let catalog = installed()?;
        let task = catalog.task(spec.seed, spec.difficulty)?.clone();
        Ok(Self::for_task(spec, task))
    }

    /// An episode of `task` (recorded as `spec`).
    pub fn for_task(spec: TaskSpec, task: Task) -> Self {
        let prompt = Prompt { system: system_prompt(&task.tools), user: task.question.clone() };
        Self { spec, task, prompt, over: false }
    }

    /// The task.
    pub fn task(&self) -> &Task {
        &self.task
    }

    /// The tool called `name`, when this task offers it.
    pub fn offered(&self, name: &str) -> Option<Tool> {
        self.task.tools.iter().copied().find(|t| t.name() == name)
    }

    fn answer(&mut self, text: &str) -> Observation {
        self.over = true;
        let shown = verify::short(text);
        let outcome = if self.task.answer.accepts(text) {
            Outcome { reward: 1.0, success: true, summary: format!("the answer {shown:?} is correct") }
        } else {
            Outcome { reward: 0.0, success: false, summary: format!("the answer {shown:?} is wrong") }
        };
        Observation::end(outcome)
    }

    fn no_such_tool(&self, name: &str) -> Observation {
        let offered = match self.task.tools.as_slice() {
            [] => "this task offers no tools; answer with <answer>…</answer>".to_string(),
            tools => format!("the tools here: {}", tools.iter().map(|t| t.example()).collect::<Vec<_>>().join(", ")),
        };
        Observation::flawed(format!("unknown tool `{name}`; {offered}"))
    }
}

impl Environment for DatasetEnv {
    fn spec(&self) -> TaskSpec {
        self.spec
    }

    fn prompt(&self) -> &Prompt {
        &self.prompt
    }

    fn step(&mut self, message: &str) -> Observation {
        if self.over {
            return Observation::flawed(OVER);
        }
        match action::parse(message) {
            Err(e) => Observation::flawed(format!("format error: {e}")),
            Ok(Action::Say(_)) => Observation::flawed(NO_USER),
            Ok(Action::Answer(text)) => self.answer(&text),
            Ok(Action::Tool(call)) => match self.offered(&call.name) {
                None => self.no_such_tool(&call.name),
                Some(tool) => match tool.call(&call.raw_args) {
                    Ok(result) => Observation::tool(result),
                    Err(why) => Observation::flawed(why),
                },
            },
        }
    }

    fn reference(&self) -> Vec<String> {
        self.task.answer.reference().map(|a| format!("<answer>{a}</answer>")).into_iter().collect()
    }

    fn verify(&self, agent_messages: &[String]) -> Vec<Finding> {
        verify::verify(self, agent_messages)
    }
}

#[cfg(test)]
mod tests;
