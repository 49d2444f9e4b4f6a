//! The graceful leave: on cancellation no new task is drawn, in-flight groups finish within the
//! grace period (or are dropped whole), everything published validates, nothing comes after.

use std::time::Duration;

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_finishes_in_flight_groups_and_publishes_only_whole_valid_groups() {
    let h = Harness::new();
    let process = Process::start(h.config("outcome", "group_size = 4\ngrace_s = 60"));
    wait_until("a first group", || async { !h.rollouts().await.is_empty() }).await;
    let (report, took) = process.leave().await;
    assert!(took < Duration::from_secs(60), "the leave took {took:?}");
    let all = h.rollouts().await;
    assert_eq!(report.initial as usize, all.len(), "{report:?}");
    assert_eq!(report.dropped_at_leave, 0, "in-flight groups finished within the grace period");
    assert!(groups(&all).values().all(|g| g.len() == 4), "whole groups only");
    let after = h.rollouts().await;
    assert_eq!(after.len(), all.len(), "nothing is published after the process left");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zero_grace_leave_drops_unfinished_groups_whole_and_counts_them() {
    let h = Harness::new();
    let process = Process::start(h.config("outcome", "group_size = 4\ngrace_s = 0\nmax_turns = 4"));
    wait_until("a first group", || async { !h.rollouts().await.is_empty() }).await;
    let (report, _) = process.leave().await;
    let all = h.rollouts().await;
    assert_eq!(report.initial as usize, all.len());
    assert!(groups(&all).values().all(|g| g.len() == 4), "a dropped group left nothing behind");
    assert_eq!(report.dropped_at_leave % 4, 0, "groups are dropped whole: {report:?}");
}
