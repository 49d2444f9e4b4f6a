//! An actor process (the role, in-test) against a real redis-server with the tiny model on the
//! CPU: what it publishes, how new weights reach it (and corrupt ones do not), critiques, and the
//! graceful leave.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

mod common;
mod critique;
mod leave;
mod phases;
mod publishing;
mod read_replica;
mod seeds;
mod weights;
