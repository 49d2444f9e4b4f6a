//! The integration tests of `rrm-worker`, one test binary with a module per suite: each test binary links
//! the workspace and libtorch, so one per crate keeps the test build small. One suite alone:
//! `cargo nextest run -p rrm-worker --test suite -E 'test(/^<module>::/)'`.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

mod agent_rrm;
mod common;
mod injection;
mod openai_judge;
mod reference_no_leak;
mod refine_failed;
mod role;
mod worker;
