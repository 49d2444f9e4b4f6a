//! The step verifier: replays the agent messages on a fresh episode and reports, at the index
//! of the message concerned (at most one finding per message; end-of-episode findings at the
//! closing message, or at `messages.len()` when the episode never closed):
//!
//! | finding | rule |
//! |---|---|
//! | FormatError | the message breaks the action protocol, or a call's arguments do not parse |
//! | WrongTool | an unknown tool; a write tool for a kind of request the user never made (e.g. `refund` when they want a cancellation); any order/user tool before `find_user` |
//! | Fabrication | a call uses an email, zip, name, user id or order id that appears in no successful tool result, no user reply and not in the task; or a message states a value for an asked fact before any tool showed it, and wrongly |
//! | RedundantCall | a call identical (after normalisation) to an earlier one while neither the store nor the identified customer changed in between; or a write for a request already done |
//! | WrongArguments | a write on the right kind of request with a different order, user, reason, amount or address than the user's; any other failed call (no such record, not the customer's, refused by policy, missing argument) |
//! | Contradiction | a message states a total or status of the asked order that differs from what a tool showed |
//! | UnsupportedAnswer | a message tells the asked fact before any tool showed it |
//! | SkippedStep | at the end: a requested write never done (its record untouched), an asked fact never told, or a solved episode never closed |
//! | WrongAnswer | at the end: a requested record ends in a different state than asked, or a record the user never mentioned was changed |
//! | GaveUpEarly | the episode was closed (`<answer>` or `transfer_to_human`) before it was solved |

use super::call::{parse_call, Call, ErrKind};
use super::db::{parse_money, Store};
use super::episode::Episode;
use super::goal::{Goal, Task};
use super::user::{claim, Claim};
use crate::action::{parse, Action, ToolCall};
use crate::verify::{Finding, FindingKind as K};

type Flaw = Option<(K, String)>;

struct Replay<'a> {
    task: &'a Task,
    ep: Episode,
    /// Lowercased text the agent may draw facts from: the task, user replies, tool results.
    known: String,
    /// Per order: (status shown, total shown).
    seen: Vec<(bool, bool)>,
    calls: Vec<(Call, u64)>,
    version: u64,
    findings: Vec<Finding>,
}

/// Findings for `messages` as an episode of `task`.
pub fn verify(task: &Task, messages: &[String]) -> Vec<Finding> {
    let mut r = Replay {
        task,
        ep: Episode::new(task),
        known: task.opening.to_lowercase(),
        seen: vec![(false, false); task.store.orders.len()],
        calls: Vec::new(),
        version: 0,
        findings: Vec::new(),
    };
    let mut end = None;
    for (i, message) in messages.iter().enumerate() {
        let flaw = match parse(message) {
            Err(e) => Some((K::FormatError, e.to_string())),
            Ok(Action::Say(text)) => r.say(&text),
            Ok(Action::Answer(_)) => {
                r.ep.finish(task, "closed");
                None
            }
            Ok(Action::Tool(tc)) => r.tool(&tc),
        };
        if let Some((kind, detail)) = flaw {
            r.findings.push(Finding::new(i, kind, detail));
        }
        if r.ep.over {
            end = Some(i);
            break;
        }
    }
    r.finish(end, messages.len());
    r.findings
}

fn order_id(store: &Store, order: Option<usize>) -> &str {
    order.and_then(|o| store.orders.get(o)).map_or("", |o| o.id.as_str())
}

impl Replay<'_> {
    fn say(&mut self, text: &str) -> Flaw {
        let lower = text.to_lowercase();
        let mut flaw = None;
        for (g, goal) in self.task.goals.iter().enumerate().filter(|(_, g)| g.is_info()) {
            let shown = goal.order().and_then(|o| self.seen.get(o)).is_some_and(|&(status, total)| {
                if matches!(goal, Goal::AskTotal { .. }) {
                    total
                } else {
                    status
                }
            });
            let id = order_id(&self.ep.store, goal.order());
            flaw = flaw.or(match claim(&self.ep.store, goal, &lower) {
                Claim::Right if !shown && !self.ep.told[g] => Some((
                    K::UnsupportedAnswer,
                    format!("told the asked fact of order #{id} before any tool showed it"),
                )),
                Claim::Wrong if shown => {
                    Some((K::Contradiction, format!("what was told about order #{id} differs from the tool result")))
                }
                Claim::Wrong => Some((K::Fabrication, format!("stated a value for order #{id} that no tool showed"))),
                _ => None,
            });
        }
        let obs = self.ep.say(self.task, text);
        self.learn(&obs.text);
        flaw
    }

    fn learn(&mut self, text: &str) {
        self.known.push('\n');
        self.known.push_str(&text.to_lowercase());
    }

    fn tool(&mut self, tc: &ToolCall) -> Flaw {
        let call = match parse_call(tc) {
            Ok(call) => call,
            Err(e) => {
                let kind = match e.kind {
                    ErrKind::Unknown => K::WrongTool,
                    ErrKind::Malformed => K::FormatError,
                    _ => K::WrongArguments,
                };
                return Some((kind, e.text));
            }
        };
        if let Call::Transfer(_) = call {
            self.ep.finish(self.task, "transferred");
            return None;
        }
        let flaw = self.fabricated(&call).or_else(|| self.redundant(&call)).or_else(|| self.off_goal(&call));
        let (obs, result) = self.ep.call(&call);
        let flaw = flaw.or_else(|| match result.error? {
            ErrKind::NotIdentified => Some((K::WrongTool, "called before the customer was identified".into())),
            _ => Some((K::WrongArguments, obs.text.clone())),
        });
        if result.error.is_none() {
            self.learn(&obs.text);
            for (o, total) in result.viewed {
                if let Some(s) = self.seen.get_mut(o) {
                    *s = (true, s.1 || total);
                }
            }
        }
        self.version += u64::from(result.changed);
        self.calls.push((call, self.version));
        flaw
    }

    fn fabricated(&self, call: &Call) -> Flaw {
        let mut facts: Vec<(&str, String)> = Vec::new();
        match call {
            Call::FindUser { email, name, zip } => {
                facts.extend(email.iter().map(|e| ("email", e.clone())));
                facts.extend(name.iter().flat_map(|n| n.split(' ').map(|w| ("name", w.to_string()))));
                facts.extend(zip.iter().map(|z| ("zip", z.to_lowercase())));
            }
            Call::GetUser(u) | Call::ListOrders(u) => facts.push(("user id", u.clone())),
            Call::GetOrder(o) | Call::Cancel { order: o, .. } | Call::Refund { order: o, .. } => {
                facts.push(("order id", o.to_lowercase()))
            }
            Call::Readdress { order, user, .. } => {
                facts.extend(order.iter().map(|o| ("order id", o.to_lowercase())));
                facts.extend(user.iter().map(|u| ("user id", u.clone())));
            }
            Call::Transfer(_) => {}
        }
        let (what, value) = facts.into_iter().find(|(_, v)| !self.known.contains(v.as_str()))?;
        Some((K::Fabrication, format!("the {what} {value} appears in no tool result, user reply or the task")))
    }

    fn redundant(&self, call: &Call) -> Flaw {
        self.calls
            .iter()
            .any(|(c, v)| c == call && *v == self.version)
            .then(|| (K::RedundantCall, "repeats an earlier call while nothing changed".to_string()))
    }

    /// A write checked against the user's requests.
    fn off_goal(&self, call: &Call) -> Flaw {
        let t = self.task;
        let id = |o: &usize| order_id(&t.store, Some(*o)).to_string();
        let wrong = |what: &str| Some((K::WrongArguments, what.to_string()));
        let found = match call {
            Call::Cancel { .. } => t.goals.iter().find(|g| matches!(g, Goal::Cancel { .. })),
            Call::Refund { .. } => t.goals.iter().find(|g| matches!(g, Goal::Refund { .. })),
            Call::Readdress { .. } => {
                t.goals.iter().find(|g| matches!(g, Goal::MoveHome { .. } | Goal::Reroute { .. }))
            }
            _ => return None,
        };
        let Some(goal) = found else {
            return Some((K::WrongTool, "the user made no request this tool serves".into()));
        };
        let flaw = match (call, goal) {
            (Call::Cancel { order, reason }, Goal::Cancel { order: o, reason: r }) => {
                if *order != id(o) {
                    wrong(&format!("cancels #{order}, not the order the user named (#{})", id(o)))
                } else if reason != r {
                    wrong(&format!("reason `{reason}` is not the user's (`{r}`)"))
                } else {
                    None
                }
            }
            (Call::Refund { order, amount }, Goal::Refund { order: o, amount: a, .. }) => {
                if *order != id(o) {
                    wrong(&format!("refunds #{order}, not the order the user named (#{})", id(o)))
                } else if parse_money(amount) != Some(*a) {
                    wrong(&format!("refunds {amount}, not the price of the item the user named"))
                } else {
                    None
                }
            }
            (Call::Readdress { order, user, address }, Goal::MoveHome { address: want }) => {
                let me = t.store.users.get(t.customer).map_or("", |u| u.id.as_str());
                if order.is_some() || user.as_deref() != Some(me) {
                    wrong("the user asked to change their default address, for their own user id")
                } else if address != want {
                    wrong(&format!("address `{address}` is not the one the user gave"))
                } else {
                    None
                }
            }
            (Call::Readdress { order, address, .. }, Goal::Reroute { order: o, address: want }) => {
                if order.as_deref() != Some(id(o).as_str()) {
                    wrong(&format!("the user asked to re-address order #{}", id(o)))
                } else if address != want {
                    wrong(&format!("address `{address}` is not the one the user gave"))
                } else {
                    None
                }
            }
            _ => None,
        };
        let done = goal.written(&self.ep.store, &t.target, t.customer);
        flaw.or_else(|| done.then(|| (K::RedundantCall, "the request this write serves is already done".into())))
    }

    fn finish(&mut self, end: Option<usize>, n: usize) {
        let (t, step) = (self.task, end.unwrap_or(n));
        let mut asked_orders = Vec::new();
        for (g, goal) in t.goals.iter().enumerate() {
            let id = order_id(&t.store, goal.order());
            if goal.is_info() {
                if !self.ep.told[g] {
                    self.push(step, K::SkippedStep, format!("never told the user what they asked about order #{id}"));
                }
                continue;
            }
            asked_orders.extend(goal.order());
            if goal.written(&self.ep.store, &t.target, t.customer) {
                continue;
            }
            let untouched = match goal.order() {
                Some(o) => self.ep.store.orders.get(o) == t.store.orders.get(o),
                None => self.ep.store.users.get(t.customer) == t.store.users.get(t.customer),
            };
            let what = if id.is_empty() { "the default address".to_string() } else { format!("order #{id}") };
            if untouched {
                self.push(step, K::SkippedStep, format!("the requested change to {what} was never made"));
            } else {
                self.push(step, K::WrongAnswer, format!("{what} ends in a different state than the user asked"));
            }
        }
        let moved_home = t.goals.iter().any(|g| matches!(g, Goal::MoveHome { .. }));
        let store = &self.ep.store;
        let orders = store
            .orders
            .iter()
            .enumerate()
            .filter(|&(o, order)| !asked_orders.contains(&o) && t.store.orders.get(o) != Some(order));
        let mut stray: Vec<String> =
            orders.map(|(_, order)| format!("order #{} was changed though the user never asked", order.id)).collect();
        let users = store
            .users
            .iter()
            .enumerate()
            .filter(|&(u, user)| !(moved_home && u == t.customer) && t.store.users.get(u) != Some(user));
        stray.extend(users.map(|(_, user)| format!("user {} was changed though nobody asked", user.id)));
        for detail in stray {
            self.push(step, K::WrongAnswer, detail);
        }
        let success = self.ep.success(t);
        match end {
            Some(i) if !success => self.push(i, K::GaveUpEarly, "closed the conversation before the request was done"),
            None if success => self.push(n, K::SkippedStep, "the conversation was never closed with an answer"),
            _ => {}
        }
    }

    fn push(&mut self, step: usize, kind: K, detail: impl Into<String>) {
        self.findings.push(Finding::new(step, kind, detail));
    }
}
