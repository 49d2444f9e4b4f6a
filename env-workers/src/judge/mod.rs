//! The reference judge for the built-in text families: deterministic, built on each
//! environment's step verifier and reference solution (docs/architecture.md section 3, "The judge"). It
//! lives beside the environments because it is theirs: the RRM worker serves it behind its
//! `Judge` trait, and the learner uses it synchronously (refinement examples for the cold start,
//! the in-process trainer's critiques).
//!
//! ```text
//!  agent messages ─► registry::make(task) ─► verify(messages) ─► findings
//!                             └─► replay (step each message) ─► outcome (solved?)
//!  findings + outcome ─► trace   (every message, the findings with their details, the arithmetic)
//!                    ─► critique (which message, what kind of mistake; no detail, no digit;
//!                                 whether it was solved only with `reveal_outcome`)
//!                    ─► score    (0.5 + 0.5·quality if solved, else 0.5·quality)
//! ```
//!
//! `reveal_outcome`: the released Agent-RRM has no ground truth and is told never to reveal the
//! answer, so by default the critique does not say whether the task was solved (a critique that
//! says "your answer is wrong" would hand a refined attempt outcome feedback, and a Reagent-C
//! gain would then measure that, not the critique). The trace and the score still use the
//! outcome: the score is the reward signal, and the trace is never shown to the agent.

mod critique;
mod score;
mod trace;

use std::time::Instant;

use protocol::wire::{Episode, Finding, Judgement, Outcome, Role, TaskSpec, Trajectory};

pub use critique::{critique, ordinal};
pub use score::{quality, score, weight};
pub use trace::trace;

use crate::error::EnvError;
use crate::{registry, Environment, Limits};

/// The id recorded in the reference judge's judgements.
pub const REFERENCE_JUDGE_ID: &str = "reference";

/// No limits while replaying: the step verifiers apply none, and the replay must agree with them.
const REPLAY_LIMITS: Limits = Limits { max_turns: usize::MAX, max_message_chars: usize::MAX };

/// Judges `messages` (the agent's, in order) as an episode of `spec`. Blocking; CPU only. An
/// unknown difficulty or a control family is an error, never a score.
pub fn judge_messages(spec: TaskSpec, messages: &[String], reveal_outcome: bool) -> Result<Judgement, EnvError> {
    let started = Instant::now();
    let findings = registry::make(spec, REPLAY_LIMITS)?.verify(messages);
    let mut replay = registry::make(spec, REPLAY_LIMITS)?;
    let end = messages.iter().find_map(|m| replay.step(m).end);
    Ok(judgement(spec, messages, &findings, end.as_ref(), reveal_outcome, started))
}

/// The reference judgement of an episode of `spec` from its verifier's findings and replayed
/// end (`None`: the replay never ended), timed from `started`: for environments judged
/// elsewhere than in this process (an environment server's `verify`).
pub fn judgement(
    spec: TaskSpec,
    messages: &[String],
    findings: &[Finding],
    end: Option<&Outcome>,
    reveal_outcome: bool,
    started: Instant,
) -> Judgement {
    let solved = end.is_some_and(|o| o.success);
    Judgement {
        trace: trace(spec, messages, findings, end),
        critique: critique(spec.family, reveal_outcome.then_some(solved), findings, messages.len()),
        score: score(solved, findings),
        judge_id: REFERENCE_JUDGE_ID.to_string(),
        latency_ms: u32::try_from(started.elapsed().as_millis()).unwrap_or(u32::MAX),
    }
}

/// The agent's messages of a text trajectory, in order; `None` for a control episode.
pub fn agent_messages(trajectory: &Trajectory) -> Option<Vec<String>> {
    match &trajectory.episode {
        Episode::Text(turns) => Some(turns.iter().filter(|t| t.role == Role::Agent).map(|t| t.text.clone()).collect()),
        Episode::Control(_) => None,
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
            let j = judge_messages(spec, &reference, false).unwrap();
            assert_eq!(j.score, 1.0, "{family}: {}", j.trace);
            assert!(j.critique.starts_with("No flaw found"), "{family}: {}", j.critique);
            let cut = judge_messages(spec, &reference[..reference.len() - 1], true).unwrap();
            assert!(cut.score <= 0.5, "{family}: {}", cut.trace);
            assert!(cut.critique.starts_with("The attempt did not solve the task."), "{family}: {}", cut.critique);
            let hidden = judge_messages(spec, &reference[..reference.len() - 1], false).unwrap();
            assert!(!hidden.critique.contains("solve"), "{family}: the outcome stays hidden: {}", hidden.critique);
            assert_eq!(hidden.score, cut.score, "{family}: the score does not depend on what the critique says");
        }
    }

    #[test]
    fn control_tasks_and_bad_specs_are_errors_not_scores() {
        let spec = TaskSpec { family: TaskFamily::Math, seed: 1, difficulty: 9 };
        assert!(matches!(judge_messages(spec, &[], false), Err(EnvError::Difficulty { .. })));
        let spec = TaskSpec { family: TaskFamily::Cartpole, seed: 1, difficulty: 1 };
        assert!(judge_messages(spec, &[], false).is_err());
    }
}
