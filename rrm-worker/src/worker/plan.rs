//! What the worker does with each trajectory, by feedback mode (DESIGN.md section 3):
//!
//! | `run.feedback` | initial attempt | refined attempt | critique reply |
//! |---|---|---|---|
//! | `outcome`  | not requested | not requested | no |
//! | `critique` | judged        | not requested | initial attempts |
//! | `score`    | judged        | judged        | no |
//! | `unified`  | judged        | judged        | initial attempts |
//!
//! In `critique` mode only the initial attempt's critique is used (the reward is the outcome),
//! so refined attempts are not judged. Control episodes (CartPole) are never judged: no judge
//! reads them.

use protocol::wire::{Attempt, Episode, FeedbackMode, Trajectory};

/// Whether the judge is asked about `t` in `mode`.
pub fn wants_judgement(mode: FeedbackMode, t: &Trajectory) -> bool {
    if matches!(t.episode, Episode::Control(_)) {
        return false;
    }
    match mode {
        FeedbackMode::Outcome => false,
        FeedbackMode::Critique => t.attempt == Attempt::Initial,
        FeedbackMode::Score | FeedbackMode::Unified => true,
    }
}

/// Whether `t`'s verdict goes back to the actor that refines it: initial attempts in the
/// modes that refine (whatever the verdict, so no actor waits out its deadline).
pub fn wants_reply(mode: FeedbackMode, t: &Trajectory) -> bool {
    mode.refines() && t.attempt == Attempt::Initial
}

#[cfg(test)]
mod tests {
    use protocol::wire::{ActorId, GroupId, PolicyVersion, RunId, TaskFamily, TaskSpec, Timing, TrajectoryId};

    use super::*;

    fn t(attempt: Attempt, episode: Episode) -> Trajectory {
        Trajectory {
            run_id: RunId::new("r").unwrap(),
            id: TrajectoryId(1),
            actor_id: ActorId("a".into()),
            task: TaskSpec { family: TaskFamily::Math, seed: 1, difficulty: 1 },
            group_id: GroupId(1),
            attempt,
            policy_version: PolicyVersion(0),
            episode,
            outcome_reward: 0.0,
            timing: Timing::default(),
        }
    }

    #[test]
    fn the_table_holds() {
        use FeedbackMode::*;
        let initial = t(Attempt::Initial, Episode::Text(vec![]));
        let refined = t(Attempt::Refined { of: TrajectoryId(0) }, Episode::Text(vec![]));
        let control = t(Attempt::Initial, Episode::Control(vec![]));
        let judged = |m| (wants_judgement(m, &initial), wants_judgement(m, &refined), wants_reply(m, &initial));
        assert_eq!(judged(Outcome), (false, false, false));
        assert_eq!(judged(Critique), (true, false, true));
        assert_eq!(judged(Score), (true, true, false));
        assert_eq!(judged(Unified), (true, true, true));
        assert!(!wants_reply(Unified, &refined));
        assert!(!wants_judgement(Unified, &control) && wants_reply(Unified, &control));
    }
}
