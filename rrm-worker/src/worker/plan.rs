//! What the worker does with each trajectory, by feedback mode (docs/architecture.md section 3) and by
//! which initial attempts the actors refine (`actor.refine`, [`RefineWhich`]):
//!
//! | `run.feedback` | initial attempt | refined attempt | critique reply |
//! |---|---|---|---|
//! | `outcome`  | not requested | not requested | no |
//! | `critique` | judged if refined | not requested | initial attempts refined |
//! | `score`    | judged        | judged        | no |
//! | `unified`  | judged        | judged        | initial attempts refined |
//!
//! In `critique` mode the reward is the outcome and a critique serves only the refined attempt
//! it conditions, so the worker judges an initial attempt only when the actor will refine it
//! (with `refine = "failed"`, not a solved one: the same [`RefineWhich::refines`] the actor
//! decides with) and judges no refined attempt. An initial attempt it does not judge gets no
//! reply either: its actor waits only for the critiques of the attempts it refines. In `score`
//! and `unified` modes the score is in the reward, so every attempt is judged. Control episodes
//! (CartPole) are never judged: no judge reads them.

use episode::RefineWhich;
use protocol::wire::{Attempt, Episode, FeedbackMode, Trajectory};

/// What the judge is asked about and what goes back to the actors: the run's `run.feedback`
/// and `actor.refine`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// The run's feedback mode (`run.feedback`).
    pub mode: FeedbackMode,
    /// Which initial attempts the actors refine (`actor.refine`).
    pub refine: RefineWhich,
}

impl Plan {
    /// Whether the judge is asked about `t`.
    pub fn judges(self, t: &Trajectory) -> bool {
        if matches!(t.episode, Episode::Control(_)) || self.unrefined_in_critique(t) {
            return false;
        }
        match self.mode {
            FeedbackMode::Outcome => false,
            FeedbackMode::Critique => t.attempt == Attempt::Initial,
            FeedbackMode::Score | FeedbackMode::Unified => true,
        }
    }

    /// Whether `t`'s verdict goes back to the actor that refines it: initial attempts in the
    /// modes that refine (whatever the verdict, so no actor waits out its deadline), except
    /// those `actor.refine` leaves unrefined: no actor waits for them (in `unified` they are
    /// still judged, for the score, but the reply would only expire unread).
    pub fn replies(self, t: &Trajectory) -> bool {
        self.mode.refines()
            && t.attempt == Attempt::Initial
            && (matches!(t.episode, Episode::Control(_)) || self.refine.refines(t))
    }

    /// Whether `t` is an initial attempt in `critique` mode that the actor will not refine:
    /// its critique would be thrown away.
    pub fn unrefined_in_critique(self, t: &Trajectory) -> bool {
        self.mode == FeedbackMode::Critique && t.attempt == Attempt::Initial && !self.refine.refines(t)
    }
}

#[cfg(test)]
mod tests {
    use protocol::wire::{ActorId, GroupId, PolicyVersion, RunId, TaskFamily, TaskSpec, Timing, TrajectoryId};

    use super::*;

    fn t(attempt: Attempt, episode: Episode, outcome_reward: f32) -> Trajectory {
        Trajectory {
            run_id: RunId::new("r").unwrap(),
            id: TrajectoryId(1),
            actor_id: ActorId("a".into()),
            task: TaskSpec { family: TaskFamily::Math, seed: 1, difficulty: 1 },
            group_id: GroupId(1),
            attempt,
            policy_version: PolicyVersion(0),
            episode,
            outcome_reward,
            timing: Timing::default(),
        }
    }

    /// (judged, replied) for every mode × `actor.refine` × solved/failed × attempt kind.
    #[test]
    fn the_table_holds_for_every_mode_refine_outcome_and_attempt() {
        use FeedbackMode::*;
        use RefineWhich::{All, Failed};
        let refined = Attempt::Refined { of: TrajectoryId(0) };
        // (mode, refine, solved, attempt) → (judged, replied)
        let cases = [
            (Outcome, All, true, Attempt::Initial, (false, false)),
            (Outcome, All, false, Attempt::Initial, (false, false)),
            (Outcome, Failed, true, Attempt::Initial, (false, false)),
            (Outcome, Failed, false, Attempt::Initial, (false, false)),
            (Critique, All, true, Attempt::Initial, (true, true)),
            (Critique, All, false, Attempt::Initial, (true, true)),
            (Critique, Failed, true, Attempt::Initial, (false, false)),
            (Critique, Failed, false, Attempt::Initial, (true, true)),
            (Score, All, true, Attempt::Initial, (true, false)),
            (Score, All, false, Attempt::Initial, (true, false)),
            (Score, Failed, true, Attempt::Initial, (true, false)),
            (Score, Failed, false, Attempt::Initial, (true, false)),
            (Unified, All, true, Attempt::Initial, (true, true)),
            (Unified, All, false, Attempt::Initial, (true, true)),
            (Unified, Failed, true, Attempt::Initial, (true, false)),
            (Unified, Failed, false, Attempt::Initial, (true, true)),
            (Outcome, All, true, refined, (false, false)),
            (Outcome, All, false, refined, (false, false)),
            (Outcome, Failed, true, refined, (false, false)),
            (Outcome, Failed, false, refined, (false, false)),
            (Critique, All, true, refined, (false, false)),
            (Critique, All, false, refined, (false, false)),
            (Critique, Failed, true, refined, (false, false)),
            (Critique, Failed, false, refined, (false, false)),
            (Score, All, true, refined, (true, false)),
            (Score, All, false, refined, (true, false)),
            (Score, Failed, true, refined, (true, false)),
            (Score, Failed, false, refined, (true, false)),
            (Unified, All, true, refined, (true, false)),
            (Unified, All, false, refined, (true, false)),
            (Unified, Failed, true, refined, (true, false)),
            (Unified, Failed, false, refined, (true, false)),
        ];
        for (mode, refine, solved, attempt, want) in cases {
            let traj = t(attempt, Episode::Text(vec![]), if solved { 1.0 } else { 0.5 });
            assert_eq!(episode::solved(&traj), solved, "the case's outcome is what the actor reads");
            let plan = Plan { mode, refine };
            assert_eq!(
                (plan.judges(&traj), plan.replies(&traj)),
                want,
                "{mode} refine={refine} solved={solved} {attempt:?}"
            );
            let skipped = mode == Critique && refine == Failed && solved && attempt == Attempt::Initial;
            assert_eq!(
                plan.unrefined_in_critique(&traj),
                skipped,
                "{mode} refine={refine} solved={solved} {attempt:?}"
            );
        }
    }

    #[test]
    fn control_episodes_are_never_judged() {
        for mode in [FeedbackMode::Outcome, FeedbackMode::Critique, FeedbackMode::Score, FeedbackMode::Unified] {
            for refine in [RefineWhich::All, RefineWhich::Failed] {
                let control = t(Attempt::Initial, Episode::Control(vec![]), 0.0);
                let plan = Plan { mode, refine };
                assert!(!plan.judges(&control), "{mode} {refine}");
                assert_eq!(plan.replies(&control), mode.refines(), "{mode} {refine}");
            }
        }
    }
}
