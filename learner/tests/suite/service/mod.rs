//! The learner as a service over the queue, against real redis-server processes: exactly-once
//! application by trajectory id, weight publishing, duplicates, staleness, untrainable entries
//! (dead letters), kill and resume.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

mod common;
mod dead_letter;
mod flow;
mod kill;
mod refine;
mod replay;
mod restarts;
mod versions;
