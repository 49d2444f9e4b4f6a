//! The integration tests of `learner`, one test binary with a module per suite: each test binary links
//! the workspace and libtorch, so one per crate keeps the test build small. One suite alone:
//! `cargo nextest run -p learner --test suite -E 'test(/^<module>::/)'`.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

mod cartpole;
mod checkpoint;
mod eval;
mod golden;
mod inproc;
mod inproc_modes;
mod precision;
mod service;
mod sft;
mod sft_dataset;
mod single_turn;
mod tensorboard;
mod trust_region;
