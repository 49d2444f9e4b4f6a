//! `actor.refine = "failed"`: only failed initial attempts get a refined attempt, so a task's
//! refined group holds k < G members (none when every initial attempt solved it). The learner
//! must train such groups as soon as they are complete, not after `max_wait` — here a minute,
//! against deadlines of a few seconds — in separate and pooled groups alike.

use std::path::Path;
use std::time::{Duration, Instant};

use episode::RefineWhich;
use learner::rng::SampleRng;
use learner::service::record::UpdateRecord;
use protocol::redis_server::{RedisServer, RedisServerOptions};
use protocol::wire::{Attempt, FeedbackMode, ScoredTrajectory};

use crate::service::common::*;
use crate::service::flow::launch;

/// `max_wait`: what a learner that waited for refined attempts that never come would take.
const MAX_WAIT: Duration = Duration::from_secs(60);
/// Far below it: each group must be trained within this of its last member being sent.
const PROMPT: Duration = Duration::from_secs(15);

/// A group's initial attempts with these outcome rewards.
fn initial(rng: &mut SampleRng, group: u128, rewards: &[f32]) -> Vec<ScoredTrajectory> {
    rewards
        .iter()
        .map(|r| {
            let mut t = trajectory(rng, group, 0);
            t.trajectory.outcome_reward = *r;
            t
        })
        .collect()
}

/// Refined attempts of the failed ones among `firsts`, with these outcome rewards in turn.
fn refined(rng: &mut SampleRng, firsts: &[ScoredTrajectory], rewards: &[f32]) -> Vec<ScoredTrajectory> {
    let failed = firsts.iter().filter(|f| f.trajectory.outcome_reward < 1.0);
    failed
        .zip(rewards)
        .map(|(first, r)| {
            let mut t = trajectory(rng, first.trajectory.group_id.0, 0);
            t.trajectory.attempt = Attempt::Refined { of: first.trajectory.id };
            t.trajectory.outcome_reward = *r;
            t
        })
        .collect()
}

fn records(dir: &Path) -> Vec<UpdateRecord> {
    let text = std::fs::read_to_string(dir.join("metrics.jsonl")).unwrap();
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn failed_spec(run: &str, dir: &Path, separate: bool) -> learner::service::ServiceSpec {
    let mut spec = spec(run, dir, |l, s| {
        l.feedback = FeedbackMode::Critique;
        l.separate_attempt_groups = separate;
        s.max_wait_ms = MAX_WAIT.as_millis() as u64;
    });
    spec.refine = RefineWhich::Failed;
    spec.records = Some(dir.join("metrics.jsonl"));
    spec
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn separate_refined_groups_of_the_failed_attempts_are_trained_without_waiting() {
    let (srv, dir) = (RedisServer::start(RedisServerOptions::default()).unwrap(), tempfile::tempdir().unwrap());
    let mut run = launch(failed_spec("failed-separate", dir.path(), true), &srv.url()).await;
    let (link, mut rng) = (link(&srv.url()), SampleRng::new(7));
    let mut applied = 0u64;
    // k = 2 (a refined group of two with unequal rewards), then k = 1 (a flat group of one).
    for (group, rewards, refined_rewards) in
        [(1, [1.0, 0.0, 1.0, 0.0], vec![1.0, 0.0]), (2, [1.0, 1.0, 0.0, 1.0], vec![1.0])]
    {
        let firsts = initial(&mut rng, group, &rewards);
        for batch in [firsts.clone(), refined(&mut rng, &firsts, &refined_rewards)] {
            let sent = Instant::now();
            send(&link, "failed-separate", &batch).await;
            applied += batch.len() as u64;
            let what = format!("group {group}: {} more trajectories trained", batch.len());
            wait_status(&mut run.status, &what, PROMPT, |s| s.applied == applied).await;
            assert!(sent.elapsed() < PROMPT, "trained after {:?}", sent.elapsed());
        }
    }
    run.stop().await;
    let sizes: Vec<(usize, usize)> = records(dir.path()).iter().map(|r| (r.trajectories, r.flat_groups)).collect();
    assert_eq!(sizes, [(4, 0), (2, 0), (4, 0), (1, 1)], "a refined group of one is flat, trained on nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pooled_groups_are_complete_at_g_plus_the_failed_attempts() {
    let (srv, dir) = (RedisServer::start(RedisServerOptions::default()).unwrap(), tempfile::tempdir().unwrap());
    let mut run = launch(failed_spec("failed-pooled", dir.path(), false), &srv.url()).await;
    let (link, mut rng) = (link(&srv.url()), SampleRng::new(8));
    // Every initial attempt solved: no refined attempt comes, the group of G is trained at once.
    let sent = Instant::now();
    send(&link, "failed-pooled", &initial(&mut rng, 1, &[1.0; 4])).await;
    wait_status(&mut run.status, "the solved group trained", PROMPT, |s| s.applied == 4).await;
    assert!(sent.elapsed() < PROMPT, "trained after {:?}", sent.elapsed());
    // One failed: the group waits for that one refined attempt and is trained with it, G + 1.
    let firsts = initial(&mut rng, 2, &[1.0, 0.0, 1.0, 1.0]);
    send(&link, "failed-pooled", &firsts).await;
    let sent = Instant::now();
    send(&link, "failed-pooled", &refined(&mut rng, &firsts, &[1.0])).await;
    wait_status(&mut run.status, "the pooled group of G + 1 trained", PROMPT, |s| s.applied == 9).await;
    assert!(sent.elapsed() < PROMPT, "trained after {:?}", sent.elapsed());
    run.stop().await;
    let sizes: Vec<usize> = records(dir.path()).iter().map(|r| r.trajectories).collect();
    assert_eq!(sizes, [4, 5], "the initial attempts waited for their refined one: one group, one update");
}
