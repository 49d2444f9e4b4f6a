//! RRM scoring workers for Reagent: the `Judge` trait, the reference judge built on the step
//! verifiers, the OpenAI-compatible judge and the worker loop that forwards scored trajectories.
//! Filled by the actors/RRM issue (DESIGN.md section 3, "The judge").

/// The judgement a judge returns, re-exported for its users.
pub use protocol::wire::Judgement;
