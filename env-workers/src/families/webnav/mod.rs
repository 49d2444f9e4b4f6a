//! The `webnav` family (WebWalkerQA-like): answer a question whose answer sits several clicks
//! deep in a generated university web site.
//!
//! ```text
//!  user: "What is the research area of Ada Brandt from the Department of Physics?"
//!  agent: <tool>open("/")</tool>                           ──► home page: links to departments, news
//!  agent: <tool>open("/departments/physics")</tool>        ──► department page: link to the staff directory
//!  agent: <tool>open("/departments/physics/staff")</tool>  ──► staff table; links to profiles
//!  agent: <tool>open("/people/ada-brandt")</tool>          ──► profile: email, office, research area …
//!  agent: <answer>Soft Matter</answer>                     ──► end: reward = exact match; F1 in the summary
//! ```
//!
//! - Sites come from [`generate`]: difficulty 1, 2, 3 puts the answer 2, 3, 4 clicks below the
//!   home page (staff directory, profile, lab page) and adds departments, staff, labs and news
//!   pages as distractors (namesakes, outdated offices, the same project code name in other labs,
//!   a dead link).
//! - Tools ([`browse`]): `open(url)` shows a page (title, text, table rows, links as
//!   `[text](url)`), `find(text)` lists the open page's lines containing the text, `back()`
//!   returns to the previous page. A URL without a page gives `404: no page at …`, flawed when no
//!   seen link pointed there.
//! - The answer ends the episode: reward 1.0 on exact match after SQuAD normalisation, else 0.0;
//!   the summary shows the F1 too (never the truth).
//! - Free text, unknown tools and malformed messages get a flawed observation; the episode goes on.
//! - The verifier's rules are in [`verify`](self::verify).

pub mod browse;
pub mod generate;
pub mod pages;
pub mod site;
pub mod verify;
pub mod world;

use std::sync::Arc;

use protocol::wire::TaskSpec;

use crate::env::{Environment, Observation, Prompt};
use crate::verify::Finding;
pub use browse::{Browser, Event};
pub use generate::{generate, Task};

/// The system prompt: role, tools and protocol (the university's name is filled in).
pub fn system_prompt(univ: &str) -> String {
    format!(
        "You answer questions by browsing the web site of {univ}. Start at its home page, /.

Tools:
  open(url)   opens a page: its title, text, table rows, and links written [text](url)
  find(text)  lists the lines of the open page that contain the text (case-insensitive)
  back()      returns to the previous page

Protocol, one action per message:
  <tool>open(\"/\")</tool>      call a tool; its result is the next message
  <answer>…</answer>          your final answer, written exactly as the site shows it; ends the episode

Follow links you have seen; do not guess URLs. There is no user to talk to."
    )
}

/// One webnav task: the generated site (shared, read-only) and the episode's browser.
#[derive(Debug, Clone)]
pub struct WebnavEnv {
    spec: TaskSpec,
    prompt: Prompt,
    browser: Browser,
}

impl WebnavEnv {
    /// The task for `spec` (its difficulty is clamped to 1..=3; the registry rejects others).
    pub fn new(spec: TaskSpec) -> Self {
        let task = Arc::new(generate(spec.seed, spec.difficulty));
        let prompt = Prompt { system: system_prompt(&task.univ), user: task.question.clone() };
        Self { spec, prompt, browser: Browser::new(task) }
    }

    /// The generated task: site, question, answer and reference route.
    pub fn task(&self) -> &Task {
        self.browser.task()
    }

    /// A fresh episode of the same task (the site is shared, not copied).
    pub fn fresh(&self) -> Self {
        Self { spec: self.spec, prompt: self.prompt.clone(), browser: Browser::new(self.browser.shared()) }
    }
}

impl Environment for WebnavEnv {
    fn spec(&self) -> TaskSpec {
        self.spec
    }

    fn prompt(&self) -> &Prompt {
        &self.prompt
    }

    fn step(&mut self, message: &str) -> Observation {
        self.browser.step(message).0
    }

    fn reference(&self) -> Vec<String> {
        let task = self.task();
        let mut out: Vec<String> = task
            .chain
            .iter()
            .zip(&task.notes)
            .map(|(&page, note)| format!("{note}\n<tool>open(\"{}\")</tool>", task.site.url(page)))
            .collect();
        let last = task.notes.last().map_or("", String::as_str);
        out.push(format!("{last}\n<answer>{}</answer>", task.answer));
        out
    }

    fn verify(&self, agent_messages: &[String]) -> Vec<Finding> {
        verify::verify(&mut Browser::new(self.browser.shared()), agent_messages)
    }
}
