//! The reference judge behind the worker's [`Judge`] trait: the environments' own deterministic
//! judge ([`env_workers::judge`], built on each family's step verifier and reference solution),
//! run on the blocking pool, never on the async runtime's threads; `http` tasks are judged with
//! their environment servers ([`servers`]).

pub mod servers;

use env_workers::judge::{agent_messages, judge_messages, REFERENCE_JUDGE_ID};
use protocol::wire::{Judgement, TaskSpec, Trajectory};

use crate::error::JudgeError;
use crate::judge::{Judge, JudgeFuture};

/// The deterministic judge for `math`, `retail`, `webnav` and `searchqa` trajectories.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReferenceJudge {
    /// Whether the critique says if the task was solved (`rrm.reveal_outcome`; off by default,
    /// as the released Agent-RRM has no ground truth to reveal).
    pub reveal_outcome: bool,
}

impl ReferenceJudge {
    /// The id recorded in its judgements.
    pub const ID: &'static str = REFERENCE_JUDGE_ID;

    /// The reference judge, not revealing outcomes.
    pub fn new() -> Self {
        Self::default()
    }

    /// Judges `messages` (the agent's, in order) as an episode of `spec`, outcome not revealed.
    /// Blocking; CPU only.
    pub fn judge_messages(spec: TaskSpec, messages: &[String]) -> Result<Judgement, JudgeError> {
        Self::new().judge_blocking(spec, messages)
    }

    fn judge_blocking(self, spec: TaskSpec, messages: &[String]) -> Result<Judgement, JudgeError> {
        judge_messages(spec, messages, self.reveal_outcome).map_err(|e| JudgeError::Environment {
            family: spec.family,
            seed: spec.seed,
            difficulty: spec.difficulty,
            detail: e.to_string(),
        })
    }
}

impl Judge for ReferenceJudge {
    fn id(&self) -> &str {
        Self::ID
    }

    fn judge<'a>(&'a self, trajectory: &'a Trajectory) -> JudgeFuture<'a> {
        let spec = trajectory.task;
        let messages = agent_messages(trajectory);
        let this = *self;
        Box::pin(async move {
            let Some(messages) = messages else {
                return Err(JudgeError::Unsupported(format!(
                    "{} is a control task: the reference judge needs a text episode and a step verifier",
                    spec.family
                )));
            };
            tokio::task::spawn_blocking(move || this.judge_blocking(spec, &messages))
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
    fn bad_specs_are_errors_that_name_the_task() {
        let spec = TaskSpec { family: TaskFamily::Math, seed: 1, difficulty: 9 };
        let err = ReferenceJudge::judge_messages(spec, &[]).unwrap_err();
        assert_eq!(err.kind(), "environment", "{err}");
    }
}
