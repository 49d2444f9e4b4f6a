//! Test fixtures: small scored trajectories.

use protocol::wire::{
    ActorId, Attempt, Episode, GroupId, PolicyVersion, RunId, ScoredTrajectory, TaskFamily, TaskSpec, Timing,
    Trajectory, TrajectoryId, Verdict,
};

/// A text trajectory with no turns: id, group, policy version, outcome reward and verdict.
pub fn scored(id: u128, group: u128, version: u64, outcome: f32, verdict: Verdict) -> ScoredTrajectory {
    ScoredTrajectory {
        trajectory: Trajectory {
            run_id: RunId::new("test".to_string()).expect("a valid run id"),
            id: TrajectoryId(id),
            actor_id: ActorId("a".into()),
            task: TaskSpec { family: TaskFamily::Math, seed: 0, difficulty: 1 },
            group_id: GroupId(group),
            attempt: Attempt::Initial,
            policy_version: PolicyVersion(version),
            episode: Episode::Text(Vec::new()),
            outcome_reward: outcome,
            timing: Timing::default(),
        },
        verdict,
    }
}
