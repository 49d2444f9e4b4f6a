//! The reference judge for the built-in text families: deterministic, built on each
//! environment's step verifier (DESIGN.md section 3, "The judge").
//!
//! ```text
//!  trajectory ─► agent messages ─► registry::make(task) ─► verify(messages) ─► findings
//!                                          └─► replay (step each message) ─► outcome (solved?)
//!  findings + outcome ─► trace   (every message, the findings with their details, the arithmetic)
//!                    ─► critique (which message, what kind of mistake; no detail, no digit)
//!                    ─► score    (0.5 + 0.5·quality if solved, else 0.5·quality)
//! ```
//!
//! The work is CPU-only and runs on the blocking pool, never on the async runtime's threads.

mod critique;
mod score;
mod trace;

use std::time::Instant;

use env_workers::{registry, Environment, Limits};
use protocol::wire::{Episode, Judgement, Role, TaskSpec, Trajectory};

pub use critique::{critique, ordinal};
pub use score::{quality, score, weight};
pub use trace::trace;

use crate::error::JudgeError;
use crate::judge::{Judge, JudgeFuture};

/// No limits while replaying: the step verifiers apply none, and the replay must agree with them.
const REPLAY_LIMITS: Limits = Limits { max_turns: usize::MAX, max_message_chars: usize::MAX };

/// The deterministic judge for `math`, `retail`, `webnav` and `searchqa` trajectories.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReferenceJudge;

impl ReferenceJudge {
    /// The id recorded in its judgements.
    pub const ID: &'static str = "reference";

    /// The reference judge.
    pub fn new() -> Self {
        Self
    }

    /// Judges `messages` (the agent's, in order) as an episode of `spec`. Blocking; CPU only.
    pub fn judge_messages(spec: TaskSpec, messages: &[String]) -> Result<Judgement, JudgeError> {
        let started = Instant::now();
        let make = || {
            registry::make(spec, REPLAY_LIMITS).map_err(|e| JudgeError::Environment {
                family: spec.family,
                seed: spec.seed,
                difficulty: spec.difficulty,
                detail: e.to_string(),
            })
        };
        let findings = make()?.verify(messages);
        let mut replay = make()?;
        let end = messages.iter().find_map(|m| replay.step(m).end);
        let solved = end.as_ref().is_some_and(|o| o.success);
        Ok(Judgement {
            trace: trace(spec, messages, &findings, end.as_ref()),
            critique: critique(spec.family, solved, &findings, messages.len()),
            score: score(solved, &findings),
            judge_id: Self::ID.to_string(),
            latency_ms: u32::try_from(started.elapsed().as_millis()).unwrap_or(u32::MAX),
        })
    }
}

/// The agent's messages of a text trajectory, in order; `None` for a control episode.
pub fn agent_messages(trajectory: &Trajectory) -> Option<Vec<String>> {
    match &trajectory.episode {
        Episode::Text(turns) => Some(turns.iter().filter(|t| t.role == Role::Agent).map(|t| t.text.clone()).collect()),
        Episode::Control(_) => None,
    }
}

impl Judge for ReferenceJudge {
    fn id(&self) -> &str {
        Self::ID
    }

    fn judge<'a>(&'a self, trajectory: &'a Trajectory) -> JudgeFuture<'a> {
        let spec = trajectory.task;
        let messages = agent_messages(trajectory);
        Box::pin(async move {
            let Some(messages) = messages else {
                return Err(JudgeError::Unsupported(format!(
                    "{} is a control task: the reference judge needs a text episode and a step verifier",
                    spec.family
                )));
            };
            tokio::task::spawn_blocking(move || Self::judge_messages(spec, &messages))
                .await
                .map_err(|e| JudgeError::Internal(e.to_string()))?
        })
    }
}

#[cfg(test)]
mod tests {
    use protocol::wire::TaskFamily;

    use super::*;

    #[test]
    fn the_reference_solution_is_flawless_and_a_truncation_is_not() {
        for family in [TaskFamily::Math, TaskFamily::Retail, TaskFamily::Webnav, TaskFamily::Searchqa] {
            let spec = TaskSpec { family, seed: 11, difficulty: 2 };
            let reference = registry::make(spec, Limits::default()).unwrap().reference();
            let j = ReferenceJudge::judge_messages(spec, &reference).unwrap();
            assert_eq!(j.score, 1.0, "{family}: {}", j.trace);
            assert!(j.critique.starts_with("No flaw found"), "{family}: {}", j.critique);
            let cut = ReferenceJudge::judge_messages(spec, &reference[..reference.len() - 1]).unwrap();
            assert!(cut.score <= 0.5, "{family}: {}", cut.trace);
            assert!(cut.critique.starts_with("The attempt did not solve the task."), "{family}: {}", cut.critique);
        }
    }

    #[test]
    fn control_tasks_and_bad_specs_are_errors_not_scores() {
        let spec = TaskSpec { family: TaskFamily::Math, seed: 1, difficulty: 9 };
        let err = ReferenceJudge::judge_messages(spec, &[]).unwrap_err();
        assert_eq!(err.kind(), "environment", "{err}");
    }
}
