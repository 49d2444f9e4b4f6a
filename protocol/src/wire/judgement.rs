//! What the RRM says about a trajectory, and the scored trajectory the learner consumes.

use serde::{Deserialize, Serialize};

use super::{QueueItem, Trajectory, Validate};
use crate::error::InvalidValue;

/// An Agent-RRM judgement: the three blocks of its output plus who judged and how long it took.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Judgement {
    /// The `<think>` block: the judge's reasoning trace.
    pub trace: String,
    /// The `<critique>` block: shown to the agent for refinement; never reveals the answer.
    pub critique: String,
    /// The `<score>` block, in [0, 1].
    pub score: f32,
    /// Which judge produced it (backend and model).
    pub judge_id: String,
    /// How long judging took, in milliseconds.
    pub latency_ms: u32,
}

impl Validate for Judgement {
    fn validate(&self) -> Result<(), InvalidValue> {
        if !(0.0..=1.0).contains(&self.score) {
            return Err(InvalidValue::new("judgement.score", "a number in [0, 1]", self.score.to_string()));
        }
        Ok(())
    }
}

/// What came of judging: a judgement, a logged failure (never a silent 0), or no judging asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Verdict {
    /// The judge answered well.
    Judged(Judgement),
    /// The judge never gave a usable answer.
    Failed {
        /// Which judge.
        judge_id: String,
        /// Why, in a sentence.
        reason: String,
        /// How many tries were made.
        attempts: u32,
    },
    /// The feedback mode does not use the RRM (`outcome`).
    NotRequested,
}

/// A trajectory with the RRM's verdict: what the learner trains on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoredTrajectory {
    /// The trajectory as the actor produced it.
    pub trajectory: Trajectory,
    /// What the RRM said.
    pub verdict: Verdict,
}

impl ScoredTrajectory {
    /// The RRM score when there is one.
    pub fn score(&self) -> Option<f32> {
        match &self.verdict {
            Verdict::Judged(j) => Some(j.score),
            _ => None,
        }
    }
}

impl QueueItem for ScoredTrajectory {
    fn item_id(&self) -> String {
        self.trajectory.id.to_string()
    }
}

impl Validate for ScoredTrajectory {
    fn validate(&self) -> Result<(), InvalidValue> {
        self.trajectory.validate()?;
        match &self.verdict {
            Verdict::Judged(j) => j.validate(),
            _ => Ok(()),
        }
    }
}
