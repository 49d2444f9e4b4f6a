//! Counters of one actor process, beside the Prometheus metrics (which are process-global):
//! what [`crate::role::run_role`] reports when the process leaves, and what tests assert on.

use std::sync::atomic::{AtomicU64, Ordering};

use protocol::role::{Ended, RoleReport};

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
    /// Microseconds of groups' initial attempts (G played concurrently: the group's wall time).
    pub initial_us: AtomicU64,
    /// Microseconds of handing groups' trajectories to the publisher (both publishes).
    pub publish_us: AtomicU64,
    /// Microseconds of waiting for critiques (critique and unified modes).
    pub critique_wait_us: AtomicU64,
    /// Microseconds of groups' refined attempts (critique and unified modes).
    pub refined_us: AtomicU64,
}

impl Stats {
    /// The counters now, with the supervisor's restarts: the actor role's report. The
    /// counter names are the fields' names (`groups`, `initial`, … `newest_version`), then
    /// `restarts`, then the groups' phase times (`initial_us` … `refined_us`,
    /// [`crate::rollout::Phase`]).
    pub fn report(&self, restarts: u64, ended: Ended) -> RoleReport {
        let get = |c: &AtomicU64| c.load(Ordering::SeqCst);
        RoleReport::new("actor", ended)
            .with("groups", get(&self.groups))
            .with("initial", get(&self.initial))
            .with("refined", get(&self.refined))
            .with("dropped_at_leave", get(&self.dropped_at_leave))
            .with("dropped_on_error", get(&self.dropped_on_error))
            .with("critiques_judged", get(&self.critiques_judged))
            .with("critiques_failed", get(&self.critiques_failed))
            .with("critiques_timed_out", get(&self.critiques_timed_out))
            .with("weight_swaps", get(&self.weight_swaps))
            .with("newest_version", get(&self.newest_version))
            .with("restarts", restarts)
            .with("initial_us", get(&self.initial_us))
            .with("publish_us", get(&self.publish_us))
            .with("critique_wait_us", get(&self.critique_wait_us))
            .with("refined_us", get(&self.refined_us))
    }
}
