//! The graceful leave: on cancellation no new task is drawn, in-flight groups finish within the
//! grace period (or are dropped whole), everything published validates, and nothing can come
//! after: the role has closed every connection to Redis by the time it returned.

use std::time::Duration;

use crate::common::*;

/// Waits until only the harness's own connections are left: the role has none open, so the
/// stream read after this is final.
async fn wait_for_the_role_to_disconnect(h: &Harness, harness_clients: usize) {
    wait_until("the role's Redis connections to close", || async { h.clients().await <= harness_clients }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_finishes_in_flight_groups_and_publishes_only_whole_valid_groups() {
    let h = Harness::new();
    let harness_clients = h.clients().await;
    let process = Process::start(h.config("outcome", "group_size = 4\ngrace_s = 60"));
    wait_until("a first group", || async { !h.rollouts().await.is_empty() }).await;
    assert!(h.clients().await > harness_clients, "the role is connected while it runs");
    let (report, took) = process.leave().await;
    assert!(took < Duration::from_secs(60), "the leave took {took:?}");
    wait_for_the_role_to_disconnect(&h, harness_clients).await;
    let all = h.rollouts().await;
    assert_eq!(
        count(&report, "initial") as usize,
        all.len(),
        "everything published is counted, nothing after: {report:?}"
    );
    assert_eq!(count(&report, "dropped_at_leave"), 0, "in-flight groups finished within the grace period");
    let groups = groups(&all);
    assert_eq!(groups.len() as u64, count(&report, "groups"), "{report:?}");
    assert!(groups.values().all(|g| g.len() == 4), "whole groups only");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zero_grace_leave_drops_unfinished_groups_whole_and_counts_them() {
    let h = Harness::new();
    let harness_clients = h.clients().await;
    // Four slots: each draws its next group as soon as it published one, and they finish at
    // different times, so some group is in flight whenever the leave comes (with two slots, both
    // could sit between a publish and their next draw at that instant: seen under load).
    let process = Process::start(h.config("outcome", "group_size = 4\ngrace_s = 0\nmax_turns = 4\nslots = 4"));
    wait_until("a first group", || async { !h.rollouts().await.is_empty() }).await;
    let (report, _) = process.leave().await;
    wait_for_the_role_to_disconnect(&h, harness_clients).await;
    let all = h.rollouts().await;
    assert_eq!(count(&report, "initial") as usize, all.len(), "{report:?}");
    assert!(groups(&all).values().all(|g| g.len() == 4), "a dropped group left nothing behind");
    // slots = 4: one to four groups of 4 were in flight, and each was dropped whole.
    assert!(
        [4, 8, 12, 16].contains(&count(&report, "dropped_at_leave")),
        "in-flight groups are dropped whole, and some were in flight: {report:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shut_down_while_waiting_for_first_weights_it_reports_so_and_publishes_nothing() {
    let h = Harness::new();
    // Ten minutes of waiting for a first version that never comes: only the shutdown ends it.
    let process = Process::start(h.config("outcome", "wait_for_weights_ms = 600000"));
    let (report, took) = process.leave().await;
    assert_eq!((report.role, report.ended), ("actor", protocol::role::Ended::ShutdownBeforeStart), "{report}");
    assert!(report.counters.iter().all(|(_, n)| *n == 0), "nothing done before starting: {report}");
    assert!(took < Duration::from_secs(60), "the shutdown ended the wait ({took:?})");
    assert!(h.rollouts().await.is_empty());
}
