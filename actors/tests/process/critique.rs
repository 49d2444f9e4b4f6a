//! Critique and unified modes: a judged reply makes a refined attempt whose prompt holds the
//! critique and which replays the first attempt up to its first flaw; a failed reply or none at
//! all is counted and the slot moves on.

use std::time::{Duration, Instant};

use protocol::wire::{Attempt, Episode, Judgement, Role, TrajectoryId, Verdict};

use crate::common::*;

fn judged(critique: &str) -> Verdict {
    Verdict::Judged(Judgement {
        trace: "trace".into(),
        critique: critique.into(),
        score: 0.5,
        judge_id: "test".into(),
        latency_ms: 1,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_judged_reply_makes_a_refined_attempt_that_carries_the_critique() {
    let h = Harness::new();
    let process =
        Process::start(h.config("critique", "slots = 1\ngroup_size = 2\ngrace_s = 1\ncritique_wait_ms = 60000"));
    wait_until("a group of initial attempts", || async { h.rollouts().await.len() >= 2 }).await;
    let first: Vec<TrajectoryId> = h.rollouts().await.iter().take(2).map(|t| t.id).collect();
    for id in &first {
        h.rpush(&h.keys.critique_reply(*id), &judged(&format!("CRITIQUE-{id}: check the second step"))).await;
    }
    wait_until("both refined attempts", || async {
        h.rollouts().await.iter().filter(|t| matches!(t.attempt, Attempt::Refined { .. })).count() >= 2
    })
    .await;
    let (report, _) = process.leave().await;
    assert_eq!((count(&report, "critiques_judged"), count(&report, "refined")), (2, 2), "{report:?}");

    let all = h.rollouts().await;
    for id in &first {
        let initial = all.iter().find(|t| t.id == *id).unwrap();
        let refined = all.iter().find(|t| t.attempt == Attempt::Refined { of: *id }).expect("a refined attempt of it");
        assert_eq!((refined.group_id, refined.task), (initial.group_id, initial.task), "same task, same group");
        let Episode::Text(turns) = &refined.episode else { panic!("a text episode") };
        let user = turns.iter().find(|t| t.role == Role::User).unwrap();
        assert!(user.text.contains(&format!("CRITIQUE-{id}")), "the critique is in the prompt: {}", user.text);
        assert!(user.text.contains(episode::REFINE_FROM_FLAW_INSTRUCTION), "{}", user.text);
        assert!(refined.trained_tokens() > 0);
        // actor.refine_from = first_flaw and a critique that names no message: every message of
        // the first attempt but the last is replayed as it was, untrained, then the policy writes.
        let agent = |t: &protocol::wire::Trajectory| -> Vec<(String, bool)> {
            let Episode::Text(turns) = &t.episode else { panic!("a text episode") };
            turns
                .iter()
                .filter(|t| t.role == Role::Agent)
                .map(|t| (t.text.clone(), t.loss_mask.contains(&true)))
                .collect()
        };
        let (first, second) = (agent(initial), agent(refined));
        let kept = first.len() - 1;
        assert!(second.len() > kept, "the policy wrote after the kept messages");
        for (i, (text, trained)) in second.iter().enumerate() {
            assert_eq!(*trained, i >= kept, "message {i}: kept ones untrained, the rest trained");
            if i < kept {
                assert_eq!(text, &first[i].0, "a kept message is the first attempt's");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_or_missing_critique_is_counted_and_the_slot_moves_on() {
    let h = Harness::new();
    let wait = Duration::from_millis(3000);
    let process = Process::start(h.config(
        "unified",
        &format!("slots = 1\ngroup_size = 2\ngrace_s = 30\ncritique_wait_ms = {}", wait.as_millis()),
    ));
    wait_until("a group of initial attempts", || async { h.rollouts().await.len() >= 2 }).await;
    let published = Instant::now();
    let failed = h.rollouts().await[0].id;
    let verdict = Verdict::Failed { judge_id: "test".into(), reason: "no usable answer".into(), attempts: 3 };
    h.rpush(&h.keys.critique_reply(failed), &verdict).await;
    wait_until("the next group, after the critique wait", || async { h.rollouts().await.len() >= 4 }).await;
    assert!(published.elapsed() >= wait / 2, "the next group came after the critique wait, not before");
    let (report, _) = process.leave().await;
    assert!(count(&report, "critiques_failed") >= 1 && count(&report, "critiques_timed_out") >= 1, "{report:?}");
    assert_eq!(count(&report, "refined"), 0, "nothing to refine without a judged critique");
    assert!(h.rollouts().await.iter().all(|t| t.attempt == Attempt::Initial));
}
