//! Wire types: what crosses process boundaries between the roles.
//!
//! ```text
//!  actor ──Trajectory──► {run}:rollouts ──► rrm-worker ──ScoredTrajectory──► {run}:scored ──► learner
//!  learner ──WeightManifest + chunks──► weight store ──► actors
//! ```
//!
//! Every type here is encoded with [`crate::codec`]; a change to any of them that alters the
//! encoding must bump [`crate::codec::FORMAT_VERSION`].

pub mod env;
mod feedback;
mod ids;
mod judgement;
mod packed;
mod trajectory;
mod weights;

pub use env::{ControlObservation, Finding, FindingKind, Observation, Outcome, Prompt, Source};
pub use feedback::FeedbackMode;
pub use ids::{ActorId, GroupId, PolicyVersion, RunId, TrajectoryId};
pub use judgement::{Judgement, ScoredTrajectory, Verdict};
pub use trajectory::{Attempt, ControlStep, Episode, Role, TaskFamily, TaskSpec, Timing, Trajectory, Turn};
pub use weights::{ChunkSpec, DType, TensorSpec, WeightManifest, MANIFEST_SCHEME};

/// A value the queues carry: it names itself by an application id (a trajectory id, say), which
/// is what exactly-once application and tracing key on.
pub trait QueueItem: serde::Serialize + serde::de::DeserializeOwned + Validate + Send + Sync + 'static {
    /// The application-level id written beside the payload in each stream entry.
    fn item_id(&self) -> String;
}

/// A wire value that is checked after decoding: lengths agree, numbers are in range.
pub trait Validate {
    /// Returns what is wrong with the value, naming the field, or `Ok(())`.
    fn validate(&self) -> Result<(), crate::error::InvalidValue>;
}
