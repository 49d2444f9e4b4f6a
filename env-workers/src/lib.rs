//! Environments for Reagent: the `Environment` trait, the task families (math, retail, webnav,
//! searchqa, cartpole), their reference solutions and step verifiers, and the env-worker tarpc
//! service that actors call. Filled by the environments issue; for now it only names its place
//! in the workspace (DESIGN.md section 4).

/// The task families Reagent ships, re-exported so that users of this crate need not depend on
/// `protocol` to name one.
pub use protocol::wire::TaskFamily;
