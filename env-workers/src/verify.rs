//! Step-verifier findings: what went wrong, at which agent message. The types are wire types
//! (they reach the judge through the queues and the env-worker service), so they live in
//! `protocol`; they are re-exported here where the verifiers are written.

pub use protocol::wire::{Finding, FindingKind};
