//! The webnav step verifier: replays the messages on a fresh [`Browser`] and applies the rules
//! below, at most one finding per message before the answer (the first rule that applies).
//!
//! Terms: the **route** is the reference's pages, `/` first; a route page is **visited** once
//! opened; a URL is **seen** once a link to it was on a page the agent opened (`/` always is);
//! the **next hop** is the first route page not yet visited.
//!
//! | message | finding |
//! |---|---|
//! | not a well-formed action, or after the answer | `FormatError` |
//! | free text (no user), an unknown tool, `find`/`back` with no page to act on | `WrongTool` |
//! | `open`/`find` without an argument | `WrongArguments` |
//! | `open` of the page already open, `find` of a text already searched on that page | `RedundantCall` |
//! | `open` of a route page while an earlier route page is unvisited (a guessed shortcut) | `SkippedStep`, naming the earliest unvisited one |
//! | `open` of a URL never seen in a link (a page or a 404) | `Fabrication` |
//! | `open` of a page off the route (or a dead link) while the next hop was seen | `WrongArguments` |
//! | the answer, when not an exact match | `WrongAnswer` |
//! | the answer, when its text is in no observation | `UnsupportedAnswer` |
//! | the answer, per route page never visited and not yet reported | `SkippedStep` |
//! | no answer at all | `GaveUpEarly` at the last message (0 when none) |
//!
//! Off-route exploring before the next hop is visible, `back`, and off-route pages after the
//! whole route was visited are not flagged. `Contradiction` is not produced by this family.

use super::browse::{Browser, Event};
use crate::families::qa::Observed;
use crate::scoring::{exact_match, normalize};
use crate::verify::{Finding, FindingKind};

struct Replay<'a> {
    browser: &'a mut Browser,
    route: Vec<usize>,
    visited: Vec<bool>,
    reported: Vec<bool>,
    finds: Vec<(usize, String)>,
    observed: Observed,
    findings: Vec<Finding>,
}

/// Findings for `messages` replayed on `browser`, which must be a fresh episode.
pub fn verify(browser: &mut Browser, messages: &[String]) -> Vec<Finding> {
    let route = browser.task().chain.clone();
    let n = route.len();
    let mut r = Replay {
        browser,
        route,
        visited: vec![false; n],
        reported: vec![false; n],
        finds: Vec::new(),
        observed: Observed::default(),
        findings: Vec::new(),
    };
    let mut answered = false;
    for (i, message) in messages.iter().enumerate() {
        let next_seen = r.next_hop().is_some_and(|h| r.browser.is_seen(r.route[h]));
        let (obs, event) = r.browser.step(message);
        if obs.flaw.is_none() && obs.end.is_none() {
            r.observed.add(&obs.text);
        }
        r.event(i, event, next_seen);
        answered |= obs.end.is_some();
    }
    if !answered {
        let detail = "the episode ends without an answer";
        r.push(messages.len().saturating_sub(1), FindingKind::GaveUpEarly, detail);
    }
    r.findings
}

impl Replay<'_> {
    fn push(&mut self, step: usize, kind: FindingKind, detail: impl Into<String>) {
        self.findings.push(Finding::new(step, kind, detail));
    }

    fn next_hop(&self) -> Option<usize> {
        self.visited.iter().position(|v| !v)
    }

    fn url(&self, page: usize) -> String {
        self.browser.task().site.url(page).to_string()
    }

    fn event(&mut self, i: usize, event: Event, next_seen: bool) {
        use FindingKind::*;
        match event {
            Event::Malformed => self.push(i, FormatError, "the message is not a valid action"),
            Event::AfterEnd => self.push(i, FormatError, "a message after the episode ended"),
            Event::Free => self.push(i, WrongTool, "free text, but there is no user here to talk to"),
            Event::UnknownTool(name) => self.push(i, WrongTool, format!("`{name}` is not a tool here")),
            Event::NothingOpen(tool) => self.push(i, WrongTool, format!("{tool}() with no page to act on")),
            Event::NoArgument(tool) => self.push(i, WrongArguments, format!("{tool}() needs an argument")),
            Event::Opened { page, was_current: true, .. } => {
                self.push(i, RedundantCall, format!("{} is already the open page", self.url(page)))
            }
            Event::Opened { page, was_seen, .. } => self.open(i, page, was_seen, next_seen),
            Event::Missing { url, was_seen: false } => {
                self.push(i, Fabrication, format!("{url} appears in no link seen so far (and has no page)"))
            }
            Event::Missing { url, was_seen: true } => self.off_route(i, &url, next_seen),
            Event::Found { page, needle } => {
                if self.finds.iter().any(|(p, n)| *p == page && *n == needle) {
                    let detail = format!("find({needle:?}) on {} repeats an earlier search", self.url(page));
                    return self.push(i, RedundantCall, detail);
                }
                self.finds.push((page, needle));
            }
            Event::Back(_) => {}
            Event::Answered(text) => self.answer(i, &text),
        }
    }

    fn open(&mut self, i: usize, page: usize, was_seen: bool, next_seen: bool) {
        let Some(hop) = self.route.iter().position(|p| *p == page) else {
            if !was_seen {
                let detail = format!("{} appears in no link seen so far", self.url(page));
                return self.push(i, FindingKind::Fabrication, detail);
            }
            return self.off_route(i, &self.url(page), next_seen);
        };
        let skipped = (0..hop).find(|h| !self.visited[*h] && !self.reported[*h]);
        self.visited[hop] = true;
        if let Some(h) = skipped {
            self.reported[h] = true;
            let detail = format!(
                "opened {} without first visiting {}, the page that leads there",
                self.url(page),
                self.url(self.route[h])
            );
            self.push(i, FindingKind::SkippedStep, detail);
        } else if !was_seen {
            let detail = format!("{} appears in no link seen so far", self.url(page));
            self.push(i, FindingKind::Fabrication, detail);
        }
    }

    fn off_route(&mut self, i: usize, url: &str, next_seen: bool) {
        if let (Some(h), true) = (self.next_hop(), next_seen) {
            let detail = format!(
                "opened {url}, which does not lead to the answer, while {} was linked",
                self.url(self.route[h])
            );
            self.push(i, FindingKind::WrongArguments, detail);
        }
    }

    fn answer(&mut self, i: usize, text: &str) {
        let truth = self.browser.task().answer.clone();
        if exact_match(text, &truth) < 1.0 {
            self.push(i, FindingKind::WrongAnswer, format!("the answer {text:?} is not {truth:?}"));
        }
        if !self.observed.has(&normalize(text)) {
            self.push(i, FindingKind::UnsupportedAnswer, format!("the answer {text:?} appears on no page opened"));
        }
        for h in 0..self.route.len() {
            if !self.visited[h] && !self.reported[h] {
                self.reported[h] = true;
                let detail = format!("{} on the way to the answer was never opened", self.url(self.route[h]));
                self.push(i, FindingKind::SkippedStep, detail);
            }
        }
    }
}
