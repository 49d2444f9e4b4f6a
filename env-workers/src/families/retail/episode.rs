//! One episode's mutable state — its own copy of the store, the identified customer, which
//! information needs were met — and the step function shared by the environment and the
//! verifier's replay.
//!
//! ```text
//!  message ──parse──► Say ──► simulated user's reply (+ "told" bookkeeping)
//!                     Tool ──parse_call──► run on this episode's store ──► tool result / error
//!                     Answer, transfer_to_human ──► end: reward 1 iff store == target ∧ all told
//! ```

use super::call::{parse_call, Call, ErrKind, ToolError};
use super::db::Store;
use super::goal::Task;
use super::tools::run;
use super::user::{claim, reply, Claim};
use crate::action::{parse, Action};
use crate::env::{Observation, Outcome, Source};

/// What a tool call did, for the verifier.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallResult {
    /// Why it failed, if it did.
    pub error: Option<ErrKind>,
    /// Whether the store or the identified customer changed.
    pub changed: bool,
    /// Orders whose details the result showed, with whether their total was shown.
    pub viewed: Vec<(usize, bool)>,
}

/// The state of one episode.
#[derive(Debug, Clone)]
pub struct Episode {
    /// This episode's store (a copy of the task's).
    pub store: Store,
    /// The identified customer, once `find_user` succeeded.
    pub auth: Option<usize>,
    /// Per goal: whether its information need was told (always false for write goals).
    pub told: Vec<bool>,
    /// Whether the episode has ended.
    pub over: bool,
}

/// An observation for a failed call: malformed or unknown calls come from the environment, the
/// rest are the tool's own refusals.
pub fn tool_error(e: &ToolError) -> Observation {
    let text = format!("error: {}", e.text);
    let from = if matches!(e.kind, ErrKind::Unknown | ErrKind::Malformed) { Source::Env } else { Source::Tool };
    Observation { flaw: Some(text.clone()), text, from, end: None }
}

impl Episode {
    /// A fresh episode of `task`.
    pub fn new(task: &Task) -> Self {
        Self { store: task.store.clone(), auth: None, told: vec![false; task.goals.len()], over: false }
    }

    /// Takes one agent message.
    pub fn step(&mut self, task: &Task, message: &str) -> Observation {
        if self.over {
            return Observation::flawed("the episode is over; no further actions are accepted");
        }
        match parse(message) {
            Err(e) => Observation::flawed(format!("format error: {e}")),
            Ok(Action::Say(text)) => self.say(task, &text),
            Ok(Action::Answer(_)) => self.finish(task, "the agent closed the conversation"),
            Ok(Action::Tool(tc)) => match parse_call(&tc) {
                Err(e) => tool_error(&e),
                Ok(Call::Transfer(_)) => self.finish(task, "transferred to a human"),
                Ok(call) => self.call(&call).0,
            },
        }
    }

    /// Free text to the user: records any information need it meets, returns the user's reply.
    pub fn say(&mut self, task: &Task, text: &str) -> Observation {
        let lower = text.to_lowercase();
        let mut told_now = false;
        for (g, goal) in task.goals.iter().enumerate() {
            if goal.is_info() && !self.told[g] && claim(&self.store, goal, &lower) == Claim::Right {
                self.told[g] = true;
                told_now = true;
            }
        }
        Observation::user(reply(task, &lower, told_now, self.all_met(task)))
    }

    /// Runs a parsed call other than a transfer.
    pub fn call(&mut self, call: &Call) -> (Observation, CallResult) {
        match run(&mut self.store, &mut self.auth, call) {
            Ok(done) => {
                let result = CallResult { error: None, changed: done.changed, viewed: done.viewed };
                (Observation::tool(done.text), result)
            }
            Err(e) => (tool_error(&e), CallResult { error: Some(e.kind), ..CallResult::default() }),
        }
    }

    /// Whether goal `g` is met: told, for an information need; its record equals the target's,
    /// for a write.
    pub fn goal_met(&self, task: &Task, g: usize) -> bool {
        task.goals.get(g).is_some_and(|goal| {
            if goal.is_info() {
                self.told[g]
            } else {
                goal.written(&self.store, &task.target, task.customer)
            }
        })
    }

    /// Whether every goal is met.
    pub fn all_met(&self, task: &Task) -> bool {
        (0..task.goals.len()).all(|g| self.goal_met(task, g))
    }

    /// Whether the episode, as it stands, earns the reward (MUA-RL): the store equals the target
    /// and every information need was told.
    pub fn success(&self, task: &Task) -> bool {
        self.store == task.target && self.all_met(task)
    }

    /// Ends the episode with its outcome; `how` says how it ended.
    pub fn finish(&mut self, task: &Task, how: &str) -> Observation {
        self.over = true;
        let success = self.success(task);
        let unmet = (0..task.goals.len()).filter(|&g| !self.goal_met(task, g)).count();
        let summary = if success {
            format!("{how}: solved; the store matches the target and the user was told what they asked")
        } else if unmet > 0 {
            format!("{how}: not solved; {unmet} of {} requests not met", task.goals.len())
        } else {
            format!("{how}: not solved; the store has changes the user did not ask for")
        };
        Observation::end(Outcome { reward: f32::from(u8::from(success)), success, summary })
    }
}
