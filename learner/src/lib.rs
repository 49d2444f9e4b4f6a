//! The Reagent learner: PPO/GRPO on scored trajectories, advantages, staleness correction, the
//! optimizer, exact checkpoints and weight publishing (docs/architecture.md section 3).
//!
//! ```text
//!  ScoredTrajectory ─► staleness::drop_stale ─► reward::rewards ─► advantage::{grpo_advantages, gae}
//!        ─► loss::ppo_loss (clipped, truncated IS weights, KL, entropy, value) ─► optim::AdamW
//!        ─► checkpoint::CheckpointStore::save  (resume: checkpoint::resolve_resume)
//! ```
//!
//! The pieces are pure functions over tensors and slices, so the queue-consuming learner loop,
//! the in-process trainer and CartPole PPO compose them without this crate knowing the model.

pub mod advantage;
pub mod cartpole;
pub mod checkpoint;
pub mod config;
pub mod error;
pub mod experiment;
pub mod inproc;
pub mod loss;
pub mod optim;
pub mod precision;
pub mod reward;
pub mod rng;
pub mod role;
pub mod service;
pub mod sft;
pub mod staleness;
pub mod tensorboard;
pub mod tensors;
pub mod update;

#[cfg(test)]
mod fixtures;

pub use config::LearnerConfig;
pub use error::{LearnerError, Result};

/// The scored trajectory the learner consumes, re-exported for its users.
pub use protocol::wire::ScoredTrajectory;
