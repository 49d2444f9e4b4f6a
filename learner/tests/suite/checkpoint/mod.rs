//! Checkpoints: atomic saves, pruning, checksums with fallback to the previous checkpoint,
//! `--resume` semantics, and exact resume after a SIGKILL.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

mod exact_resume;
mod store;
mod trainer;
