//! The integration tests of `protocol`, one test binary with a module per suite: each test binary links
//! the workspace and libtorch, so one per crate keeps the test build small. One suite alone:
//! `cargo nextest run -p protocol --test suite -E 'test(/^<module>::/)'`.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

mod acl;
mod codec_budget;
mod codec_packed;
mod codec_roundtrip;
mod common;
mod critique;
mod link_buffered;
mod queue_ack_next;
mod queue_backpressure;
mod queue_dead;
mod queue_delivery;
mod queue_failures;
mod queue_forward_next;
mod queue_hold;
mod queue_poison;
mod queue_range;
mod queue_restart;
mod tls;
mod weights;
mod weights_replica;
