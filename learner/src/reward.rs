//! The scalar reward a trajectory is trained with, per feedback mode (docs/architecture.md section 3):
//!
//! | mode       | reward                                   |
//! |------------|------------------------------------------|
//! | `outcome`  | environment outcome                      |
//! | `critique` | environment outcome (the critique is context, not reward) |
//! | `score`    | outcome + λ·RRM score                    |
//! | `unified`  | outcome + λ·RRM score, on both attempts  |
//!
//! The paper's released code implements `score` as `reward = outcome + λ·rm_score` with
//! λ = 0.3; the C and U trainers were never published and this table is our reading. When a
//! mode asks for the score but the verdict has none (`Failed`, or `NotRequested`), the reward
//! is the outcome alone and the trajectory is counted in `reagent_learner_score_missing_total`:
//! a failed judge is never read as a score of 0.

use protocol::wire::{ScoredTrajectory, Verdict};

use protocol::metrics::LEARNER_SCORE_MISSING;

/// λ, the weight of the RRM score in `score` and `unified` modes, as in the paper's code.
pub const DEFAULT_SCORE_WEIGHT: f64 = 0.3;

pub use protocol::wire::FeedbackMode;

/// Why a score term the mode asked for is absent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MissingScore {
    /// The judge never gave a usable answer.
    Failed,
    /// The trajectory was not sent for judging.
    NotRequested,
}

impl MissingScore {
    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Self::Failed => "failed",
            Self::NotRequested => "not_requested",
        }
    }
}

/// A trajectory's reward and where it came from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reward {
    /// What advantages are computed from.
    pub total: f32,
    /// The environment's outcome reward.
    pub outcome: f32,
    /// `λ·score`, when the mode uses it and the verdict has a score.
    pub score_term: Option<f32>,
    /// Set when the mode asked for a score and there was none.
    pub missing: Option<MissingScore>,
}

/// The reward of one trajectory under `mode` with score weight `lambda`; a missing score is
/// counted in the metric.
pub fn reward(st: &ScoredTrajectory, mode: FeedbackMode, lambda: f64) -> Reward {
    let outcome = st.trajectory.outcome_reward;
    let plain = Reward { total: outcome, outcome, score_term: None, missing: None };
    if !mode.uses_score() {
        return plain;
    }
    let missing = match &st.verdict {
        Verdict::Judged(j) => {
            let term = (lambda * j.score as f64) as f32;
            return Reward { total: outcome + term, score_term: Some(term), ..plain };
        }
        Verdict::Failed { .. } => MissingScore::Failed,
        Verdict::NotRequested => MissingScore::NotRequested,
    };
    LEARNER_SCORE_MISSING.with_label_values(&[missing.label()]).inc();
    Reward { missing: Some(missing), ..plain }
}

/// The rewards of a batch, in order.
pub fn rewards(batch: &[ScoredTrajectory], mode: FeedbackMode, lambda: f64) -> Vec<Reward> {
    batch.iter().map(|st| reward(st, mode, lambda)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::scored;
    use protocol::wire::Judgement;

    fn judged(score: f32) -> Verdict {
        Verdict::Judged(Judgement {
            trace: "t".into(),
            critique: "c".into(),
            score,
            judge_id: "ref".into(),
            latency_ms: 1,
        })
    }

    #[test]
    fn each_mode_follows_the_table() {
        let st = scored(1, 0, 0, 1.0, judged(0.5));
        for mode in [FeedbackMode::Outcome, FeedbackMode::Critique] {
            assert_eq!(reward(&st, mode, 0.3), Reward { total: 1.0, outcome: 1.0, score_term: None, missing: None });
        }
        for mode in [FeedbackMode::Score, FeedbackMode::Unified] {
            let r = reward(&st, mode, 0.3);
            // 1.0 + 0.3 × 0.5 = 1.15
            assert!((r.total - 1.15).abs() < 1e-6 && r.score_term == Some(0.15), "{r:?}");
        }
        assert_eq!(FeedbackMode::Unified.attempts_per_task(), 2);
        assert_eq!(FeedbackMode::Score.attempts_per_task(), 1);
    }

    #[test]
    fn a_missing_score_is_no_term_and_is_counted() {
        let failed = Verdict::Failed { judge_id: "j".into(), reason: "bad format".into(), attempts: 3 };
        let before = LEARNER_SCORE_MISSING.with_label_values(&["failed"]).get();
        let r = reward(&scored(1, 0, 0, 0.0, failed), FeedbackMode::Score, 0.3);
        assert_eq!((r.total, r.score_term, r.missing), (0.0, None, Some(MissingScore::Failed)));
        assert!(LEARNER_SCORE_MISSING.with_label_values(&["failed"]).get() > before);
        let r = reward(&scored(2, 0, 0, 1.0, Verdict::NotRequested), FeedbackMode::Unified, 0.3);
        assert_eq!((r.total, r.missing), (1.0, Some(MissingScore::NotRequested)));
        // Outcome mode never asks, so nothing is missing.
        let r = reward(&scored(3, 0, 0, 1.0, Verdict::NotRequested), FeedbackMode::Outcome, 0.3);
        assert_eq!(r.missing, None);
    }
}
