//! Counters of one actor process, beside the Prometheus metrics (which are process-global):
//! what [`crate::role::run_role`] reports when the process leaves, and what tests assert on.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

/// Live counters, shared by the actors of one process.
#[derive(Debug, Default)]
pub struct Stats {
    /// Groups whose initial attempts were published.
    pub groups: AtomicU64,
    /// Initial attempts published.
    pub initial: AtomicU64,
    /// Refined attempts published.
    pub refined: AtomicU64,
    /// Episodes dropped unpublished at the end of a graceful leave.
    pub dropped_at_leave: AtomicU64,
    /// Episodes dropped because their group failed.
    pub dropped_on_error: AtomicU64,
    /// Critiques that came back judged (followed by a refined attempt).
    pub critiques_judged: AtomicU64,
    /// Critiques that came back as a failed judgement.
    pub critiques_failed: AtomicU64,
    /// Critiques that did not come within `actor.critique_wait_ms`.
    pub critiques_timed_out: AtomicU64,
    /// Weight versions swapped in.
    pub weight_swaps: AtomicU64,
    /// The highest policy version of a published trajectory.
    pub newest_version: AtomicU64,
}

/// A snapshot of [`Stats`], plus what the supervisor saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct ActorReport {
    /// Groups whose initial attempts were published.
    pub groups: u64,
    /// Initial attempts published.
    pub initial: u64,
    /// Refined attempts published.
    pub refined: u64,
    /// Episodes dropped unpublished at the end of a graceful leave.
    pub dropped_at_leave: u64,
    /// Episodes dropped because their group failed.
    pub dropped_on_error: u64,
    /// Critiques that came back judged.
    pub critiques_judged: u64,
    /// Critiques that came back as a failed judgement.
    pub critiques_failed: u64,
    /// Critiques that did not come in time.
    pub critiques_timed_out: u64,
    /// Weight versions swapped in.
    pub weight_swaps: u64,
    /// The highest policy version of a published trajectory.
    pub newest_version: u64,
    /// Children the supervisor restarted.
    pub restarts: u64,
}

impl Stats {
    /// The counters now, with the supervisor's restarts.
    pub fn report(&self, restarts: u64) -> ActorReport {
        let get = |c: &AtomicU64| c.load(Ordering::SeqCst);
        ActorReport {
            groups: get(&self.groups),
            initial: get(&self.initial),
            refined: get(&self.refined),
            dropped_at_leave: get(&self.dropped_at_leave),
            dropped_on_error: get(&self.dropped_on_error),
            critiques_judged: get(&self.critiques_judged),
            critiques_failed: get(&self.critiques_failed),
            critiques_timed_out: get(&self.critiques_timed_out),
            weight_swaps: get(&self.weight_swaps),
            newest_version: get(&self.newest_version),
            restarts,
        }
    }
}
