//! The integration tests of `env-workers`, one test binary with a module per suite: each test binary links
//! the workspace and libtorch, so one per crate keeps the test build small. One suite alone:
//! `cargo nextest run -p env-workers --test suite -E 'test(/^<module>::/)'`.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

mod dataset;
mod dataset_unloaded;
mod http_env;
mod limits;
mod math;
mod retail;
mod retail_llm_user;
mod searchqa;
mod service;
mod webnav;
