//! The learner as a service over the queue, against real redis-server processes: exactly-once
//! application by trajectory id, weight publishing, duplicates, staleness, untrainable entries
//! (dead letters), kill and resume.

mod common;
mod dead_letter;
mod flow;
mod kill;
mod replay;
mod restarts;
mod versions;
