//! How old trajectories are when the learner trains them: the learner's clock at the start of
//! the update minus each trajectory's `timing.finished_at_ms`, by attempt (initial, refined).
//! On one host that is the time from the episode's end to its update (the RRM's judging, the
//! queue, the batcher's wait, a refining group's critique wait for its initial attempts); across
//! hosts it also includes the skew between the actor's clock and the learner's.
//!
//! ```text
//!  actor: episode ends (finished_at_ms) ─► rollouts ─► RRM ─► scored ─► learner: update starts
//!                                 └──────────────── age ────────────────┘
//! ```

use protocol::metrics::LEARNER_TRAJECTORY_AGE_SECONDS;
use protocol::wire::{Attempt, ScoredTrajectory};

/// The ages (ms) of one batch's trajectories, by attempt; trajectories without an end time
/// (`finished_at_ms` 0) are left out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TrainedAges {
    /// Initial attempts' ages.
    pub initial: Vec<u64>,
    /// Refined attempts' ages.
    pub refined: Vec<u64>,
}

impl TrainedAges {
    /// The ages of `items` at `now_ms` (a trajectory from a clock ahead of this one is age 0).
    pub fn of(items: &[ScoredTrajectory], now_ms: u64) -> Self {
        let mut out = Self::default();
        for t in items.iter().map(|s| &s.trajectory).filter(|t| t.timing.finished_at_ms > 0) {
            let age = now_ms.saturating_sub(t.timing.finished_at_ms);
            match t.attempt {
                Attempt::Initial => out.initial.push(age),
                Attempt::Refined { .. } => out.refined.push(age),
            }
        }
        out
    }

    /// Each age into `reagent_learner_trajectory_age_seconds`.
    pub fn observe(&self) {
        for (label, ages) in [("initial", &self.initial), ("refined", &self.refined)] {
            let h = LEARNER_TRAJECTORY_AGE_SECONDS.with_label_values(&[label]);
            for &a in ages {
                h.observe(a as f64 / 1000.0);
            }
        }
    }
}

/// The median of `values` (the mean of the middle two for an even count); `None` when empty.
pub fn median_ms(values: &[u64]) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_unstable();
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2] as f64),
        _ => Some((v[n / 2 - 1] + v[n / 2]) as f64 / 2.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::scored;
    use protocol::wire::{TrajectoryId, Verdict};

    fn ended(id: u128, at_ms: u64, attempt: Attempt) -> ScoredTrajectory {
        let mut s = scored(id, 0, 0, 1.0, Verdict::NotRequested);
        s.trajectory.timing.finished_at_ms = at_ms;
        s.trajectory.attempt = attempt;
        s
    }

    #[test]
    fn ages_are_split_by_attempt_and_unknown_or_future_ends_handled() {
        let refined = Attempt::Refined { of: TrajectoryId(1) };
        let items = [
            ended(1, 7_000, Attempt::Initial),
            ended(2, 9_000, Attempt::Initial),
            ended(3, 9_500, refined),
            ended(4, 0, Attempt::Initial),
            ended(5, 12_000, refined),
        ];
        let ages = TrainedAges::of(&items, 10_000);
        assert_eq!(ages.initial, [3_000, 1_000], "no end time: left out");
        assert_eq!(ages.refined, [500, 0], "an end after now (clock skew) is age 0");
        assert_eq!((median_ms(&ages.initial), median_ms(&ages.refined)), (Some(2_000.0), Some(250.0)));
        assert_eq!(median_ms(&[5, 1, 9]), Some(5.0));
        assert_eq!(median_ms(&[]), None);
        let before = LEARNER_TRAJECTORY_AGE_SECONDS.with_label_values(&["refined"]).get_sample_count();
        ages.observe();
        assert_eq!(LEARNER_TRAJECTORY_AGE_SECONDS.with_label_values(&["refined"]).get_sample_count(), before + 2);
    }
}
