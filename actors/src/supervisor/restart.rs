//! The restart policy: a failed child is restarted after a backoff that doubles with each
//! recent failure; a child that fails more than `max_restarts` times within `window` is not
//! restarted again, and the supervisor escalates (the process stops with an error).
//!
//! ```text
//!  failure at t ─► forget failures before t − window ─► n = failures in the window
//!      n ≤ max_restarts ─► Restart after min(backoff_min · 2^(n−1), backoff_max)
//!      n > max_restarts ─► Escalate(n)
//! ```

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// How the supervisor answers a child's failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartPolicy {
    /// Restarts allowed within `window`; one more failure escalates (0: the first failure).
    pub max_restarts: usize,
    /// The window failures are counted in.
    pub window: Duration,
    /// Delay before the first restart.
    pub backoff_min: Duration,
    /// Largest delay before a restart.
    pub backoff_max: Duration,
}

impl Default for RestartPolicy {
    fn default() -> Self {
        Self {
            max_restarts: 5,
            window: Duration::from_secs(60),
            backoff_min: Duration::from_millis(100),
            backoff_max: Duration::from_secs(10),
        }
    }
}

/// What to do about one failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Start the child again after this delay.
    Restart(Duration),
    /// Give up: this many failures fell within the window.
    Escalate(usize),
}

/// The recent failures of one child.
#[derive(Debug, Clone, Default)]
pub struct FailureWindow {
    times: VecDeque<Instant>,
}

impl FailureWindow {
    /// Failures in the window as of the last [`RestartPolicy::decide`].
    pub fn recent(&self) -> usize {
        self.times.len()
    }
}

impl RestartPolicy {
    /// The delay before restarting a child with `recent` failures in the window (≥ 1).
    pub fn backoff(&self, recent: usize) -> Duration {
        let doublings = recent.saturating_sub(1).min(32) as u32;
        self.backoff_min.saturating_mul(1u32 << doublings.min(31)).min(self.backoff_max)
    }

    /// Records a failure at `now` in `window` and decides.
    pub fn decide(&self, window: &mut FailureWindow, now: Instant) -> Decision {
        while window.times.front().is_some_and(|t| now.saturating_duration_since(*t) > self.window) {
            window.times.pop_front();
        }
        window.times.push_back(now);
        let n = window.times.len();
        if n > self.max_restarts {
            Decision::Escalate(n)
        } else {
            Decision::Restart(self.backoff(n))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> RestartPolicy {
        RestartPolicy {
            max_restarts: 3,
            window: Duration::from_secs(10),
            backoff_min: Duration::from_millis(100),
            backoff_max: Duration::from_millis(350),
        }
    }

    #[test]
    fn backoff_doubles_up_to_the_cap_and_the_next_failure_escalates() {
        let (p, mut w, t) = (policy(), FailureWindow::default(), Instant::now());
        assert_eq!(p.decide(&mut w, t), Decision::Restart(Duration::from_millis(100)));
        assert_eq!(p.decide(&mut w, t), Decision::Restart(Duration::from_millis(200)));
        assert_eq!(p.decide(&mut w, t), Decision::Restart(Duration::from_millis(350)));
        assert_eq!(p.decide(&mut w, t), Decision::Escalate(4));
        assert_eq!(p.backoff(1000), Duration::from_millis(350), "no overflow on long streaks");
    }

    #[test]
    fn failures_outside_the_window_are_forgotten() {
        let (p, mut w, t) = (policy(), FailureWindow::default(), Instant::now());
        for _ in 0..3 {
            assert!(matches!(p.decide(&mut w, t), Decision::Restart(_)));
        }
        let later = t + Duration::from_secs(11);
        assert_eq!(p.decide(&mut w, later), Decision::Restart(Duration::from_millis(100)));
        assert_eq!(w.recent(), 1);
    }

    #[test]
    fn zero_restarts_escalates_on_the_first_failure() {
        let p = RestartPolicy { max_restarts: 0, ..policy() };
        assert_eq!(p.decide(&mut FailureWindow::default(), Instant::now()), Decision::Escalate(1));
    }
}
