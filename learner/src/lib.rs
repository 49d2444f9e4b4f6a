//! The Reagent learner: PPO/GRPO on scored trajectories, advantages, staleness correction, the
//! optimizer, exact checkpoints and weight publishing. Filled by the policy/learner issue
//! (DESIGN.md section 3).

/// The scored trajectory the learner consumes, re-exported for its users.
pub use protocol::wire::ScoredTrajectory;
