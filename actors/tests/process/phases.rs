//! Where a group's time goes (`initial_us`, `publish_us`, `critique_wait_us`, `refined_us` in
//! the role report): a unified group waits for its critiques and plays refined attempts; an
//! outcome group does neither.

use std::time::Instant;

use protocol::wire::{Attempt, Judgement, TrajectoryId, Verdict};

use crate::common::*;

const PHASES: [&str; 4] = ["initial_us", "publish_us", "critique_wait_us", "refined_us"];

fn judged(id: TrajectoryId) -> Verdict {
    Verdict::Judged(Judgement {
        trace: "trace".into(),
        critique: format!("critique of {id}: check the second step"),
        score: 0.5,
        judge_id: "test".into(),
        latency_ms: 1,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unified_group_counts_its_critique_wait_and_refined_attempts_in_its_phases() {
    let h = Harness::new();
    let started = Instant::now();
    let process =
        Process::start(h.config("unified", "slots = 1\ngroup_size = 2\ngrace_s = 1\ncritique_wait_ms = 60000"));
    wait_until("a group of initial attempts", || async { h.rollouts().await.len() >= 2 }).await;
    // The critiques come only once the group is on the stream: the slot waited for them.
    let first: Vec<TrajectoryId> = h.rollouts().await.iter().take(2).map(|t| t.id).collect();
    for id in &first {
        h.rpush(&h.keys.critique_reply(*id), &judged(*id)).await;
    }
    wait_until("both refined attempts", || async {
        h.rollouts().await.iter().filter(|t| matches!(t.attempt, Attempt::Refined { .. })).count() >= 2
    })
    .await;
    let (report, _) = process.leave().await;
    let wall = started.elapsed().as_micros() as u64;
    let [initial, publish, wait, refined] = PHASES.map(|p| count(&report, p));
    assert!(initial > 0 && publish > 0, "{report}");
    assert!(wait > 0, "the slot waited for its critiques: {report}");
    assert!(refined > 0, "refined attempts were played: {report}");
    // One slot: its phases follow one another, so together they fit in the process's life.
    assert!(initial + publish + wait + refined <= wall, "{report} in {wall} µs");
    let text = protocol::metrics::render();
    for phase in ["initial", "publish", "critique_wait", "refined"] {
        let line = format!("reagent_actor_group_phase_seconds_count{{phase=\"{phase}\"}}");
        assert!(text.contains(&line), "{line} in /metrics");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outcome_group_has_no_critique_wait_and_no_refined_phase() {
    let h = Harness::new();
    let process = Process::start(h.config("outcome", "slots = 1\ngroup_size = 2\ngrace_s = 1"));
    wait_until("two groups", || async { h.rollouts().await.len() >= 4 }).await;
    let (report, _) = process.leave().await;
    let [initial, publish, wait, refined] = PHASES.map(|p| count(&report, p));
    assert!(count(&report, "groups") >= 2 && initial > 0 && publish > 0, "{report}");
    assert_eq!((wait, refined), (0, 0), "outcome mode neither waits nor refines: {report}");
}
