//! Published trajectories validate, come in complete groups with one group id, carry the policy
//! version that produced them — the new one once it is published — and can be played on an
//! env-worker as well as in-process.

use std::sync::Arc;

use env_workers::service::{serve, ServeOptions, SessionTable, TableConfig};
use episode::HELD_OUT_SEED_BASE;
use protocol::wire::{Attempt, Episode, PolicyVersion, Role, TaskFamily};
use tokio_util::sync::CancellationToken;

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_are_published_valid_and_a_new_weight_version_reaches_later_trajectories() {
    let h = Harness::new();
    let process = Process::start(h.config("outcome", "id = \"actor-a\"\nfamily = \"math\"\ndifficulty = [1, 2]"));
    wait_until("two groups published", || async { h.rollouts().await.len() >= 6 }).await;
    let early = h.rollouts().await;
    assert!(early.iter().all(|t| t.policy_version == PolicyVersion(0)), "the configured model serves v0");

    publish_weights(&h.store(), PolicyVersion(1)).await;
    wait_until("a trajectory generated with v1", || async {
        h.rollouts().await.iter().any(|t| t.policy_version == PolicyVersion(1))
    })
    .await;
    let (report, _) = process.leave().await;

    let all = h.rollouts().await;
    assert_eq!(count(&report, "initial") as usize, all.len(), "the report counts what the stream holds");
    assert!(count(&report, "weight_swaps") >= 1 && count(&report, "newest_version") == 1, "{report:?}");
    // After the first v1 trajectory, only groups already in flight at the swap (one per slot,
    // G attempts each) may still carry v0: a trajectory records the oldest version it used.
    let first_v1 = all.iter().position(|t| t.policy_version == PolicyVersion(1)).unwrap();
    let late_v0 = all[first_v1..].iter().filter(|t| t.policy_version == PolicyVersion(0)).count();
    assert!(late_v0 <= 2 * 3, "{late_v0} v0 trajectories after the first v1 one");
    assert!(all.iter().all(|t| t.policy_version <= PolicyVersion(1)));
    let groups = groups(&all);
    assert_eq!(groups.len() as u64, count(&report, "groups"));
    let mut seeds = std::collections::HashSet::new();
    for members in groups.values() {
        assert_eq!(members.len(), 3, "every group is complete: G attempts at one task");
        let task = members[0].task;
        assert!(members.iter().all(|t| t.task == task && t.attempt == Attempt::Initial));
        assert!(
            task.seed < HELD_OUT_SEED_BASE && task.family == TaskFamily::Math && (1..=2).contains(&task.difficulty)
        );
        assert!(seeds.insert(task.seed), "each group has a task of its own");
    }
    for t in &all {
        assert_eq!((t.run_id.as_str(), t.actor_id.0.as_str()), ("t", "actor-a"));
        let Episode::Text(turns) = &t.episode else { panic!("a text episode") };
        assert_eq!(turns[0].role, Role::User, "system_prompt = omit");
        assert!(t.trained_tokens() > 0, "at least one generated agent message");
        let agent: Vec<_> = turns.iter().filter(|x| x.role == Role::Agent).collect();
        assert!(!agent.is_empty() && agent.len() <= 2, "max_turns = 2");
        assert!(agent.iter().all(|x| x.logprobs.iter().zip(&x.loss_mask).all(|(lp, m)| !m || *lp < 0.0 || *lp == 0.0)));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn episodes_run_on_an_env_worker_when_one_is_configured() {
    let h = Harness::new();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let limits = env_workers::Limits { max_turns: 2, ..env_workers::Limits::default() };
    let table = Arc::new(SessionTable::new(TableConfig { limits, ..TableConfig::default() }));
    let stop = CancellationToken::new();
    let server = tokio::spawn(serve(listener, table.clone(), ServeOptions::default(), stop.clone()));
    let process = Process::start(h.config("outcome", &format!("slots = 1\nenv_workers = [\"{addr}\"]")));
    wait_until("a group played on the env-worker", || async { h.rollouts().await.len() >= 3 }).await;
    let (report, _) = process.leave().await;
    assert!(count(&report, "groups") >= 1);
    assert!(table.is_empty(), "every session was closed");
    stop.cancel();
    server.await.unwrap().unwrap();
}
