//! The browser: one episode's state (the open page, the history for `back`, which URLs the agent
//! has seen in links) and the step function. Each step returns the observation and an [`Event`]
//! saying what happened, which the verifier replays.
//!
//! ```text
//!  open(url) ──► known page ──► the rendered page; it becomes current, its links become seen
//!            └─► unknown    ──► "404: no page at …" (flawed when no seen link pointed there)
//!  find(text) ─► the lines of the current page containing text (case-insensitive)
//!  back() ────► the previous page
//! ```

use std::sync::Arc;

use super::generate::Task;
use super::site::normalize_url;
use crate::action::{self, Action};
use crate::env::Observation;
use crate::families::qa::{answer_outcome, text_argument, NO_USER, OVER};

/// The most pages `back()` remembers.
pub const HISTORY: usize = 64;

/// The most lines `find` returns.
pub const FIND_LINES: usize = 12;

const TOOLS: &str = "the tools here are open(url), find(text) and back()";

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
    /// `open` or `find` without an argument.
    NoArgument(&'static str),
    /// `find` or `back` with no page to act on.
    NothingOpen(&'static str),
    /// A page was opened.
    Opened {
        /// Its number.
        page: usize,
        /// Whether a link to it had been seen (or it is the home page).
        was_seen: bool,
        /// Whether it was already the open page.
        was_current: bool,
    },
    /// `open` of a URL with no page (a dead link or a made-up URL).
    Missing {
        /// The normalised URL.
        url: String,
        /// Whether a link to it had been seen.
        was_seen: bool,
    },
    /// `find` on a page.
    Found {
        /// The page searched.
        page: usize,
        /// The lowercased text.
        needle: String,
    },
    /// `back` to a page.
    Back(usize),
    /// The final answer.
    Answered(String),
}

/// One episode's browsing state over a shared task.
#[derive(Debug, Clone)]
pub struct Browser {
    task: Arc<Task>,
    current: Option<usize>,
    history: Vec<usize>,
    seen: Vec<bool>,
    over: bool,
}

impl Browser {
    /// A fresh episode: nothing open; only the home page is known.
    pub fn new(task: Arc<Task>) -> Self {
        let mut seen = vec![false; task.site.url_count()];
        if let Some(home) = seen.first_mut() {
            *home = true;
        }
        Self { task, current: None, history: Vec::new(), seen, over: false }
    }

    /// The task.
    pub fn task(&self) -> &Task {
        &self.task
    }

    /// The shared task, for a fresh episode.
    pub fn shared(&self) -> Arc<Task> {
        Arc::clone(&self.task)
    }

    /// Whether a link to URL number `id` has been seen (the home page always is).
    pub fn is_seen(&self, id: usize) -> bool {
        self.seen.get(id).copied().unwrap_or(false)
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
            Ok(Action::Tool(call)) => match call.name.as_str() {
                "open" => match text_argument(&call.raw_args) {
                    Some(url) => self.open(&normalize_url(&url)),
                    None => (Observation::flawed("open takes a URL, e.g. open(\"/\")"), Event::NoArgument("open")),
                },
                "find" => match text_argument(&call.raw_args) {
                    Some(text) => self.find(&text),
                    None => {
                        (Observation::flawed("find takes a text, e.g. find(\"office\")"), Event::NoArgument("find"))
                    }
                },
                "back" => self.back(),
                other => {
                    let shown: String = other.chars().take(40).collect();
                    (Observation::flawed(format!("unknown tool `{shown}`; {TOOLS}")), Event::UnknownTool(shown))
                }
            },
        }
    }

    fn open(&mut self, url: &str) -> (Observation, Event) {
        let id = self.task.site.id(url);
        let was_seen = id.is_some_and(|i| self.is_seen(i));
        let page = match id {
            Some(i) if self.task.site.is_page(i) => i,
            _ => {
                let text = format!("404: no page at {url}");
                let obs = if was_seen {
                    Observation::tool(text)
                } else {
                    Observation::flawed(format!(
                        "{text} (no link you have seen points there; follow links, do not guess URLs)"
                    ))
                };
                return (obs, Event::Missing { url: url.to_string(), was_seen });
            }
        };
        let was_current = self.current == Some(page);
        if let Some(cur) = self.current.filter(|c| *c != page) {
            if self.history.len() >= HISTORY {
                self.history.remove(0);
            }
            self.history.push(cur);
        }
        self.show(page);
        (Observation::tool(self.task.site.rendered(page)), Event::Opened { page, was_seen, was_current })
    }

    fn show(&mut self, page: usize) {
        self.current = Some(page);
        for &l in self.task.site.links(page) {
            if let Some(s) = self.seen.get_mut(l) {
                *s = true;
            }
        }
    }

    fn find(&mut self, text: &str) -> (Observation, Event) {
        let Some(page) = self.current else {
            return (
                Observation::flawed("no page is open; open one first, e.g. open(\"/\")"),
                Event::NothingOpen("find"),
            );
        };
        let needle = text.to_lowercase();
        let site = &self.task.site;
        let url = site.url(page);
        let mut out = String::new();
        let mut n = 0;
        for line in site.find(page, &needle).take(FIND_LINES) {
            out.push_str(line);
            out.push('\n');
            n += 1;
        }
        let obs = match n {
            0 => format!("no line of {url} contains {text:?}"),
            _ => format!("{n} line(s) of {url} contain {text:?}:\n{out}"),
        };
        (Observation::tool(obs), Event::Found { page, needle })
    }

    fn back(&mut self) -> (Observation, Event) {
        match self.history.pop() {
            Some(page) => {
                self.show(page);
                (Observation::tool(self.task.site.rendered(page)), Event::Back(page))
            }
            None => (Observation::flawed("there is no previous page to go back to"), Event::NothingOpen("back")),
        }
    }
}
