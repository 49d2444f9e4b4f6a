//! Where a group's wall time goes: its phases, each timed into the process's [`Stats`] (summed
//! microseconds, in the role report) and the `reagent_actor_group_phase_seconds` histogram.
//!
//! ```text
//!  Initial (G attempts) ─► Publish ─┬─ outcome / score: done
//!                                   └─ CritiqueWait ─► Refined (judged ones) ─► Publish
//! ```

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use protocol::metrics::ACTOR_GROUP_PHASE_SECONDS;

use crate::stats::Stats;

/// One phase of a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Its G initial attempts, played concurrently.
    Initial,
    /// Handing its trajectories to the publisher (until they are on the rollouts stream).
    Publish,
    /// Waiting for the critiques of its initial attempts.
    CritiqueWait,
    /// Its refined attempts, played concurrently.
    Refined,
}

impl Phase {
    /// The histogram's `phase` label.
    pub fn label(self) -> &'static str {
        match self {
            Self::Initial => "initial",
            Self::Publish => "publish",
            Self::CritiqueWait => "critique_wait",
            Self::Refined => "refined",
        }
    }

    fn counter(self, stats: &Stats) -> &AtomicU64 {
        match self {
            Self::Initial => &stats.initial_us,
            Self::Publish => &stats.publish_us,
            Self::CritiqueWait => &stats.critique_wait_us,
            Self::Refined => &stats.refined_us,
        }
    }
}

/// Runs `work` as `phase` of a group and counts its wall time, whether it succeeded or not
/// (a phase cut short by a leave counts nothing: its future is dropped before it ends).
pub async fn timed<T>(stats: &Stats, phase: Phase, work: impl Future<Output = T>) -> T {
    let started = Instant::now();
    let out = work.await;
    let elapsed = started.elapsed();
    phase.counter(stats).fetch_add(u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX), Ordering::SeqCst);
    ACTOR_GROUP_PHASE_SECONDS.with_label_values(&[phase.label()]).observe(elapsed.as_secs_f64());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_phase_adds_its_time_to_its_own_counter_and_histogram() {
        let stats = Stats::default();
        let before = ACTOR_GROUP_PHASE_SECONDS.with_label_values(&["critique_wait"]).get_sample_count();
        let started = Instant::now();
        let v = timed(&stats, Phase::CritiqueWait, async {
            tokio::task::yield_now().await;
            7
        })
        .await;
        let bound = started.elapsed().as_micros() as u64;
        assert_eq!(v, 7);
        let waited = stats.critique_wait_us.load(Ordering::SeqCst);
        assert!(waited <= bound, "{waited} µs counted, {bound} µs passed");
        let others = [&stats.initial_us, &stats.publish_us, &stats.refined_us].map(|c| c.load(Ordering::SeqCst));
        assert_eq!(others, [0, 0, 0], "only the phase timed counts");
        let after = ACTOR_GROUP_PHASE_SECONDS.with_label_values(&["critique_wait"]).get_sample_count();
        assert!(after > before, "one observation in the phase's histogram");
    }
}
