//! The learner as a service over the queue, against real redis-server processes: exactly-once
//! application by trajectory id, weight publishing, duplicates, staleness, kill and resume.

mod common;
mod flow;
mod kill;
