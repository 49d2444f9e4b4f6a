//! Dynamic batching: requests wait until `max_batch` of them are there or the oldest has waited
//! `max_wait`, whichever comes first, and only while the model is idle — requests that arrive
//! during a batch make up the next one.
//!
//! ```text
//!  push ─► pending ─┬─ idle and (len ≥ max_batch or oldest waited ≥ max_wait) ─► take ≤ max_batch
//!                   └─ idle, not ready ─► arm a timer for oldest + max_wait (once per deadline)
//!  done (batch finished) ─► idle again ─► the same test
//! ```

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Pending requests of type `R` and whether a batch is running.
#[derive(Debug)]
pub struct Batcher<R> {
    pending: VecDeque<(Instant, R)>,
    busy: bool,
    armed_for: Option<Instant>,
    max_batch: usize,
    max_wait: Duration,
}

impl<R> Batcher<R> {
    /// Batches of at most `max_batch` (at least 1), waiting at most `max_wait`.
    pub fn new(max_batch: usize, max_wait: Duration) -> Self {
        Self { pending: VecDeque::new(), busy: false, armed_for: None, max_batch: max_batch.max(1), max_wait }
    }

    /// Requests waiting.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// Whether no request waits.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Adds a request that arrived at `now`.
    pub fn push(&mut self, request: R, now: Instant) {
        self.pending.push_back((now, request));
    }

    /// The next batch, if the model is idle and one is due at `now`; the model is busy until
    /// [`Batcher::done`].
    pub fn take_ready(&mut self, now: Instant) -> Option<Vec<R>> {
        let oldest = self.pending.front()?.0;
        let due = self.pending.len() >= self.max_batch || now.saturating_duration_since(oldest) >= self.max_wait;
        if self.busy || !due {
            return None;
        }
        self.busy = true;
        self.armed_for = None;
        let n = self.pending.len().min(self.max_batch);
        Some(self.pending.drain(..n).map(|(_, r)| r).collect())
    }

    /// The running batch finished.
    pub fn done(&mut self) {
        self.busy = false;
    }

    /// A timer fired: it no longer stands for a pending deadline.
    pub fn timer_fired(&mut self) {
        self.armed_for = None;
    }

    /// When the model is idle and requests wait for their deadline, how long until it, once
    /// per deadline (`None`: no timer needed, or one is already armed for it).
    pub fn arm(&mut self, now: Instant) -> Option<Duration> {
        let deadline = self.pending.front()?.0 + self.max_wait;
        if self.busy || self.armed_for == Some(deadline) {
            return None;
        }
        self.armed_for = Some(deadline);
        Some(deadline.saturating_duration_since(now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WAIT: Duration = Duration::from_millis(20);

    #[test]
    fn a_full_batch_goes_at_once_and_the_rest_waits_for_the_model() {
        let (mut b, t) = (Batcher::new(3, WAIT), Instant::now());
        for i in 0..5 {
            b.push(i, t);
        }
        assert_eq!(b.take_ready(t), Some(vec![0, 1, 2]));
        assert_eq!(b.take_ready(t + WAIT * 10), None, "one batch at a time");
        assert_eq!(b.arm(t), None, "no timer while busy");
        b.done();
        assert_eq!(b.take_ready(t), None, "two requests, not yet waited long enough");
        assert_eq!(b.arm(t), Some(WAIT));
        assert_eq!(b.arm(t), None, "armed once per deadline");
        b.timer_fired();
        assert_eq!(b.take_ready(t + WAIT), Some(vec![3, 4]));
        assert!(b.is_empty());
    }

    #[test]
    fn a_lone_request_goes_when_its_wait_is_over() {
        let (mut b, t) = (Batcher::new(8, WAIT), Instant::now());
        b.push("a", t);
        assert_eq!(b.take_ready(t + WAIT / 2), None);
        assert_eq!(b.arm(t + WAIT / 2), Some(WAIT / 2));
        assert_eq!(b.take_ready(t + WAIT), Some(vec!["a"]));
        assert_eq!(b.arm(t + WAIT), None, "nothing left to wait for");
    }

    #[test]
    fn zero_wait_dispatches_whatever_is_there() {
        let (mut b, t) = (Batcher::new(8, Duration::ZERO), Instant::now());
        b.push(1, t);
        assert_eq!(b.take_ready(t), Some(vec![1]));
    }
}
