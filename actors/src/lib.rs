//! Rollout actors for Reagent (ractor on tokio; docs/architecture.md sections 1, 3 and 5, CODE_STYLE.md): per process a
//! supervisor, a rollout actor per environment slot, one batching policy actor whose model runs
//! on a dedicated thread, weight sync, and a publisher with backpressure.
//!
//! ```text
//!                        ┌──────────────────── Supervisor (restart with backoff, escalate) ─────────────────┐
//!  env-worker / local ◄──┤ rollout-0 … rollout-n ──Generate──► policy actor ──batches──► policy thread (tch) │
//!     sessions           │      │   ▲ critique (BLPOP)            ▲ Swap                                     │
//!                        │      │   └──── Redis ◄── rrm-worker    weight sync ◄── WeightWatcher ◄── learner  │
//!                        │      └──Publish(group)──► publisher ──XADD (high-water mark)──► {run}:rollouts    │
//!                        └────────────────────────────────────────────────────────────────────────────────────┘
//! ```
//!
//! Every actor has one shape: a field-less struct, `Arguments` turned into `State` in
//! `pre_start`, a `Msg` enum whose requests carry an `RpcReplyPort`, and calls with a timeout
//! (through [`handle::Handle`], which survives restarts). [`run_role`] is the entry point.

pub mod config;
pub mod error;
pub mod handle;
pub mod inference;
pub mod publisher;
pub mod role;
pub mod rollout;
pub mod stats;
pub mod supervisor;
pub mod weight_sync;

pub use config::ActorConfig;
pub use error::{ActorError, InferenceError, Result};
pub use role::run_role;

/// The queue-facing types actors produce, re-exported for their users.
pub use protocol::wire::Trajectory;
