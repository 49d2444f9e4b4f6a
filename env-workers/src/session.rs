//! Limits every episode obeys, enforced around any [`Environment`]: a maximum number of agent
//! turns and a maximum message length, in play ([`Guarded::step`]) and in verification
//! ([`Guarded::verify`]) alike.

use protocol::wire::TaskSpec;

use crate::env::{Environment, Observation, Outcome, Prompt};
use crate::verify::{Finding, FindingKind};

/// Episode limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Agent messages after which the episode ends unsolved.
    pub max_turns: usize,
    /// Longest agent message accepted, in characters.
    pub max_message_chars: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self { max_turns: 16, max_message_chars: 4096 }
    }
}

impl Limits {
    /// The answer to a message over the length limit, given instead of the environment's.
    pub fn refuse(&self, message: &str) -> Option<Observation> {
        let chars = message.chars().count();
        (chars > self.max_message_chars).then(|| {
            Observation::flawed(format!(
                "message of {chars} characters is over the limit of {}; nothing was done",
                self.max_message_chars
            ))
        })
    }

    /// The observation of the `turns`-th message, ended unsolved when the episode would go on
    /// past the turn limit.
    pub fn after_turn(&self, turns: usize, obs: Observation) -> Observation {
        if obs.end.is_some() || turns < self.max_turns {
            return obs;
        }
        let outcome = Outcome {
            reward: 0.0,
            success: false,
            summary: format!("turn limit of {} reached without an answer", self.max_turns),
        };
        Observation { end: Some(outcome), ..obs }
    }

    /// What of an episode could have been played: messages past the turn limit are left out
    /// (the episode had ended), and the first message over the length limit ends it, with the
    /// format finding it earns (in play it would have done nothing).
    pub fn playable<'m>(&self, agent_messages: &'m [String]) -> (&'m [String], Option<Finding>) {
        let max = self.max_message_chars;
        let played = &agent_messages[..agent_messages.len().min(self.max_turns)];
        match played.iter().position(|m| m.chars().take(max.saturating_add(1)).count() > max) {
            Some(i) => {
                let detail = format!("message over the limit of {max} characters; nothing was done");
                (&played[..i], Some(Finding::new(i, FindingKind::FormatError, detail)))
            }
            None => (played, None),
        }
    }
}

/// An environment with [`Limits`] enforced.
pub struct Guarded {
    inner: Box<dyn Environment>,
    limits: Limits,
    turns: usize,
    over: bool,
}

impl Guarded {
    /// Wraps `inner`.
    pub fn new(inner: Box<dyn Environment>, limits: Limits) -> Self {
        Self { inner, limits, turns: 0, over: false }
    }

    /// Agent messages taken so far.
    pub fn turns(&self) -> usize {
        self.turns
    }

    /// Whether the episode has ended.
    pub fn is_over(&self) -> bool {
        self.over
    }
}

impl Environment for Guarded {
    fn spec(&self) -> TaskSpec {
        self.inner.spec()
    }

    fn prompt(&self) -> &Prompt {
        self.inner.prompt()
    }

    fn step(&mut self, message: &str) -> Observation {
        if self.over {
            return Observation::flawed("the episode is over; no further actions are accepted");
        }
        self.turns += 1;
        let obs = self.limits.refuse(message).unwrap_or_else(|| self.inner.step(message));
        let obs = self.limits.after_turn(self.turns, obs);
        self.over = obs.end.is_some();
        obs
    }

    fn reference(&self) -> Vec<String> {
        self.inner.reference()
    }

    /// Verifies what could have been played: messages past the turn limit are ignored (the
    /// episode had ended), and the first message over the length limit ends the replay with a
    /// format finding (in play it would have done nothing).
    fn verify(&self, agent_messages: &[String]) -> Vec<Finding> {
        let (played, over) = self.limits.playable(agent_messages);
        let mut findings = self.inner.verify(played);
        findings.extend(over);
        findings
    }
}
