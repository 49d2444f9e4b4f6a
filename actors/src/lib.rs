//! Rollout actors for Reagent (ractor on tokio): a supervisor per process, a rollout actor per
//! environment slot, a batching policy actor, weight sync and a publisher with backpressure.
//! Filled by the actors/RRM issue (DESIGN.md sections 1 and 8).

/// The queue-facing types actors produce, re-exported for their users.
pub use protocol::wire::Trajectory;
