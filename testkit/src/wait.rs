//! Waiting for a condition with a deadline: tests poll, they never sleep a fixed time and hope.

use std::future::Future;
use std::time::{Duration, Instant};

/// How often [`wait_until`] re-checks its condition.
pub const POLL: Duration = Duration::from_millis(10);

/// A condition that did not hold by its deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimedOut(pub Duration);

/// Polls `cond` every `every` until it holds (`Ok`) or `limit` has passed (`Err`). The condition
/// is checked once more at the deadline, so one that became true during the last sleep passes.
///
/// For harnesses that add their own failure report (the cluster tests' process logs); a test
/// that only needs to fail calls [`wait_until`].
pub async fn poll_until<F, Fut>(limit: Duration, every: Duration, mut cond: F) -> Result<(), TimedOut>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    loop {
        let late = Instant::now() >= deadline;
        if cond().await {
            return Ok(());
        }
        if late {
            return Err(TimedOut(limit));
        }
        tokio::time::sleep(every).await;
    }
}

/// Polls `cond` every [`POLL`] until it holds; panics naming `what` once `limit` has passed.
pub async fn wait_until<F, Fut>(what: &str, limit: Duration, cond: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    if let Err(TimedOut(limit)) = poll_until(limit, POLL, cond).await {
        panic!("timed out after {limit:?} waiting for {what}");
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test]
    async fn returns_once_the_condition_holds() {
        let calls = AtomicUsize::new(0);
        wait_until("the third check", Duration::from_secs(5), || async { calls.fetch_add(1, Ordering::SeqCst) >= 2 })
            .await;
        assert_eq!(calls.load(Ordering::SeqCst), 3, "checked until it held, then no more");
    }

    #[tokio::test]
    async fn poll_until_reports_a_timeout_after_a_last_check() {
        let calls = AtomicUsize::new(0);
        let waited = poll_until(Duration::from_millis(30), Duration::from_millis(10), || async {
            calls.fetch_add(1, Ordering::SeqCst);
            false
        })
        .await;
        assert_eq!(waited, Err(TimedOut(Duration::from_millis(30))));
        assert!(calls.load(Ordering::SeqCst) >= 2, "checked more than once");
    }

    #[tokio::test]
    #[should_panic(expected = "timed out after 50ms waiting for a condition that never holds")]
    async fn fails_naming_what_was_awaited() {
        wait_until("a condition that never holds", Duration::from_millis(50), || async { false }).await;
    }
}
