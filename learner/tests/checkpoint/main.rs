//! Checkpoints: atomic saves, pruning, checksums with fallback to the previous checkpoint,
//! `--resume` semantics, and exact resume after a SIGKILL.

mod exact_resume;
mod store;
mod trainer;
