//! The integration tests of the `reagent` binary, run as processes: one test binary with a module per suite; each test binary links
//! the workspace and libtorch, so one per crate keeps the test build small. One suite alone:
//! `cargo nextest run -p reagent --test suite -E 'test(/^<module>::/)'`.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

mod bench_trl;
mod cli;
mod common;
mod dataset;
mod dlq;
mod e2e_modes;
mod e2e_redis_restart;
mod e2e_soak;
mod e2e_train;
mod env_worker;
mod env_worker_attacks;
mod experiment_cli;
mod export;
mod http_env;
mod multihost;
mod roles;
mod run_launcher;
mod secrets;
mod serve;
mod serve_follow;
