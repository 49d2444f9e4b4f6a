//! Waiting for a condition with a deadline: tests poll, they never sleep a fixed time and hope.

use std::future::Future;
use std::time::{Duration, Instant};

/// How often [`wait_until`] re-checks its condition.
pub const POLL: Duration = Duration::from_millis(10);

/// Polls `cond` every [`POLL`] until it holds; panics naming `what` once `limit` has passed.
///
/// The condition is checked once more at the deadline, so a condition that became true during
/// the last sleep passes.
pub async fn wait_until<F, Fut>(what: &str, limit: Duration, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    loop {
        let late = Instant::now() >= deadline;
        if cond().await {
            return;
        }
        assert!(!late, "timed out after {limit:?} waiting for {what}");
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test]
    async fn returns_once_the_condition_holds() {
        let calls = AtomicUsize::new(0);
        wait_until("the third check", Duration::from_secs(5), || async {
            calls.fetch_add(1, Ordering::SeqCst) >= 2
        })
        .await;
        assert_eq!(calls.load(Ordering::SeqCst), 3, "checked until it held, then no more");
    }

    #[tokio::test]
    #[should_panic(expected = "timed out after 50ms waiting for a condition that never holds")]
    async fn fails_naming_what_was_awaited() {
        wait_until("a condition that never holds", Duration::from_millis(50), || async { false }).await;
    }
}
