//! [`FeedbackMode`]: how a run uses the RRM's judgement (docs/architecture.md section 3). Every role reads
//! it from `run.feedback`: actors (whether a refined attempt follows the critique), RRM workers
//! (whether to send the critique back to the actor) and the learner (the reward).

use serde::{Deserialize, Serialize};

/// How the RRM's judgement is used (config `run.feedback`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum FeedbackMode {
    /// Baseline: outcome reward only, one attempt per task.
    #[default]
    Outcome,
    /// Reagent-C: a refined second attempt conditioned on the critique; outcome reward.
    Critique,
    /// Reagent-R: outcome + λ·score, one attempt.
    Score,
    /// Reagent-U: both attempts, each rewarded with outcome + λ·score.
    Unified,
}

impl FeedbackMode {
    /// Whether the reward mixes in the RRM score.
    pub fn uses_score(self) -> bool {
        matches!(self, Self::Score | Self::Unified)
    }

    /// Whether a refined attempt, conditioned on the first attempt's critique, follows it.
    pub fn refines(self) -> bool {
        matches!(self, Self::Critique | Self::Unified)
    }

    /// Attempts per task: 2 when a refined attempt follows the critique, else 1.
    pub fn attempts_per_task(self) -> u32 {
        if self.refines() {
            2
        } else {
            1
        }
    }

    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Outcome => "outcome",
            Self::Critique => "critique",
            Self::Score => "score",
            Self::Unified => "unified",
        }
    }
}

impl std::fmt::Display for FeedbackMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
