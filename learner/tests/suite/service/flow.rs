//! The learner service in this process against a real redis-server: group batching,
//! exactly-once application by id, weight publishing, duplicates and stale trajectories.

use std::collections::HashSet;
use std::time::Duration;

use learner::rng::SampleRng;
use learner::service::{LearnerService, LearnerStatus};
use protocol::keys::{Keys, LEARNER_GROUP};
use protocol::metrics::{LEARNER_DUPLICATES_SKIPPED, LEARNER_STALE_DROPPED};
use protocol::queue::{stream_depth, Producer};
use protocol::redis_server::{RedisServer, RedisServerOptions};
use protocol::weights::WeightStore;
use protocol::wire::{Attempt, PolicyVersion, RunId, ScoredTrajectory, TrajectoryId};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::service::common::*;

const LIMIT: Duration = Duration::from_secs(60);

pub(crate) struct Running {
    token: CancellationToken,
    task: JoinHandle<learner::Result<LearnerStatus>>,
    pub(crate) status: tokio::sync::watch::Receiver<LearnerStatus>,
}

pub(crate) async fn launch(spec: learner::service::ServiceSpec, url: &str) -> Running {
    let svc = LearnerService::start(spec, initial_model(), &link(url)).await.unwrap();
    let (token, status) = (CancellationToken::new(), svc.status());
    Running { task: tokio::spawn(svc.run(token.clone())), token, status }
}

impl Running {
    pub(crate) async fn stop(self) -> LearnerStatus {
        self.token.cancel();
        tokio::time::timeout(LIMIT, self.task).await.expect("the learner stops").unwrap().unwrap()
    }
}

fn ids(items: &[ScoredTrajectory]) -> HashSet<TrajectoryId> {
    items.iter().map(|s| s.trajectory.id).collect()
}

async fn assert_all_acknowledged(url: &str, run: &str) {
    let link = link(url);
    assert_eq!(pending(&link, run).await, 0, "entries left pending");
    let stream = Keys::new(&RunId::new(run).unwrap()).scored();
    assert_eq!(stream_depth(&link, &stream).await.unwrap(), 0, "entries left unconsumed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn applies_each_trajectory_once_in_groups_and_publishes_fetchable_versions() {
    let (srv, dir) = (RedisServer::start(RedisServerOptions::default()).unwrap(), tempfile::tempdir().unwrap());
    let mut spec = spec("flow", dir.path(), |l, s| {
        (l.publish_every, l.checkpoint_every) = (1, 2);
        (s.groups_per_update, s.max_wait_ms) = (2, 400);
    });
    spec.records = Some(dir.path().join("metrics.jsonl"));
    spec.tensorboard = Some(dir.path().join("tb"));
    let mut rng = SampleRng::new(1);
    let groups: Vec<Vec<ScoredTrajectory>> = (0..6).map(|g| group(&mut rng, g, GROUP, 0)).collect();
    // Members arrive interleaved across groups, plus a group of two that never fills up.
    let mut items: Vec<ScoredTrajectory> = (0..GROUP).flat_map(|m| groups.iter().map(move |g| g[m].clone())).collect();
    items.extend(group(&mut rng, 99, 2, 0));
    let all = ids(&items);

    let mut run = launch(spec, &srv.url()).await;
    send(&link(&srv.url()), "flow", &items).await;
    wait_status(&mut run.status, "every trajectory applied", LIMIT, |s| s.applied == all.len() as u64).await;
    let last = run.stop().await;

    let data = final_checkpoint(dir.path());
    assert_eq!((data.step, data.policy_version), (last.step, last.version));
    assert_eq!(last.version, PolicyVersion(last.step), "one version per update (publish_every = 1)");
    let counts = trained_counts(&data);
    assert_eq!(counts.keys().copied().collect::<HashSet<_>>(), all);
    assert!(counts.values().all(|&n| n == 1), "an id trained twice: {counts:?}");
    let steps: Vec<u64> = data.consumption.history.iter().map(|r| r.step).collect();
    assert_eq!(steps, (1..=data.step).collect::<Vec<_>>(), "one history record per update");
    // Batching is by group: every group, the unfilled one included, is trained in one update.
    for g in groups.iter().chain([&items[items.len() - 2..].to_vec()]) {
        let record = data.consumption.history.iter().find(|r| r.trained.contains(&g[0].trajectory.id)).unwrap();
        assert!(ids(g).iter().all(|id| record.trained.contains(id)), "group split across updates: {record:?}");
    }
    assert_all_acknowledged(&srv.url(), "flow").await;
    assert_tensorboard_matches_the_records(dir.path(), data.step);

    // Every version is fetchable; the newest loads into a fresh model as the checkpoint's weights.
    let store = WeightStore::new(&link(&srv.url()), &RunId::new("flow").unwrap(), spec_weights());
    for v in 0..=last.version.0 {
        assert_eq!(store.fetch(PolicyVersion(v)).await.unwrap().version(), PolicyVersion(v));
    }
    let latest = store.fetch_latest().await.unwrap();
    assert_eq!(latest.version(), last.version);
    let mut actor = initial_model();
    policy::weights::import_weight_set(&mut actor.vs, &latest).unwrap();
    assert_same_weights(&actor, &data, "fetched latest weights");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_records_carry_the_median_age_of_initial_and_refined_attempts() {
    let (srv, dir) = (RedisServer::start(RedisServerOptions::default()).unwrap(), tempfile::tempdir().unwrap());
    let mut spec = spec("ages", dir.path(), |_, s| s.groups_per_update = 2);
    spec.records = Some(dir.path().join("metrics.jsonl"));
    let mut rng = SampleRng::new(3);
    // One group's initial attempts ended 4 s ago, its refined attempts 1 s ago (as when a
    // refining group's critiques came back): one update trains both.
    let now = protocol::clock::unix_ms();
    let mut items = group(&mut rng, 1, GROUP, 0);
    for s in &mut items {
        s.trajectory.timing.finished_at_ms = now - 4_000;
    }
    let refined: Vec<ScoredTrajectory> = items
        .iter()
        .map(|first| {
            let mut r = trajectory(&mut rng, 1, 0);
            r.trajectory.attempt = Attempt::Refined { of: first.trajectory.id };
            r.trajectory.timing.finished_at_ms = now - 1_000;
            r
        })
        .collect();
    items.extend(refined);
    let mut run = launch(spec, &srv.url()).await;
    send(&link(&srv.url()), "ages", &items).await;
    wait_status(&mut run.status, "both attempts trained", LIMIT, |s| s.applied == items.len() as u64).await;
    let waited = protocol::clock::unix_ms() - now;
    run.stop().await;

    let text = std::fs::read_to_string(dir.path().join("metrics.jsonl")).unwrap();
    let line: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    let age = |field: &str| line[field].as_f64().unwrap_or_else(|| panic!("{field} in {line}"));
    let (initial, refined) = (age("initial_age_ms_median"), age("refined_age_ms_median"));
    assert!((4_000.0..=4_000.0 + waited as f64).contains(&initial), "initial {initial} ms, {waited} ms waited");
    assert!((1_000.0..=1_000.0 + waited as f64).contains(&refined), "refined {refined} ms, {waited} ms waited");
    assert_eq!(initial - refined, 3_000.0, "trained in one update: 3 s apart, as they ended");
}

fn spec_weights() -> protocol::weights::WeightSettings {
    spec("x", std::path::Path::new("."), |_, _| {}).weights
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_entries_of_a_trajectory_are_applied_once() {
    let (srv, dir) = (RedisServer::start(RedisServerOptions::default()).unwrap(), tempfile::tempdir().unwrap());
    let spec = spec("dups", dir.path(), |l, _| l.checkpoint_every = 1);
    let mut rng = SampleRng::new(2);
    let (a, b) = (group(&mut rng, 1, GROUP, 0), group(&mut rng, 2, GROUP, 0));
    let before = LEARNER_DUPLICATES_SKIPPED.get();
    let mut run = launch(spec, &srv.url()).await;
    let link = link(&srv.url());

    // Two members of `a` are written twice before anything is applied (a producer's retry)…
    let mut first = a.clone();
    first.extend_from_slice(&a[..2]);
    send(&link, "dups", &first).await;
    wait_status(&mut run.status, "group a applied and checkpointed", LIMIT, |s| {
        s.applied == 4 && s.checkpoint_step == Some(1)
    })
    .await;
    // …and all of `a` again after its update is durable and acknowledged.
    let mut second = a.clone();
    second.extend_from_slice(&b);
    send(&link, "dups", &second).await;
    wait_status(&mut run.status, "group b applied", LIMIT, |s| s.applied == 8).await;
    let last = run.stop().await;

    assert_eq!(last.duplicates, 6);
    assert!(LEARNER_DUPLICATES_SKIPPED.get() >= before + 6);
    let counts = trained_counts(&final_checkpoint(dir.path()));
    let mut want = ids(&a);
    want.extend(ids(&b));
    assert_eq!(counts.keys().copied().collect::<HashSet<_>>(), want);
    assert!(counts.values().all(|&n| n == 1), "{counts:?}");
    assert_all_acknowledged(&srv.url(), "dups").await;
}

/// The learner acknowledges what it trained only with its next checkpoint, so it holds up to
/// `checkpoint_every` updates' worth of entries; backpressure counts only entries not yet
/// delivered, so a high-water mark far below that does not stall the producer feeding it (it
/// did when held entries counted: the producer waited for acknowledgements that needed the
/// very entries it could not write).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_learner_holding_more_than_the_mark_until_its_checkpoint_does_not_stall_its_producer() {
    let (srv, dir) = (RedisServer::start(RedisServerOptions::default()).unwrap(), tempfile::tempdir().unwrap());
    // Holds up to 5 updates × 4 = 20 entries until a checkpoint; the mark is 6.
    let spec = spec("mark", dir.path(), |l, _| l.checkpoint_every = 5);
    let mut rng = SampleRng::new(4);
    let groups: Vec<Vec<ScoredTrajectory>> = (0..12).map(|g| group(&mut rng, g, GROUP, 0)).collect();
    let all: HashSet<TrajectoryId> = groups.iter().flat_map(|g| ids(g)).collect();
    let mut run = launch(spec, &srv.url()).await;
    let stream = Keys::new(&RunId::new("mark").unwrap()).scored();
    let settings = protocol::queue::QueueSettings {
        high_water_mark: 6,
        backpressure_timeout: Duration::from_secs(30),
        ..queue_settings()
    };
    let producer = Producer::<ScoredTrajectory>::new(link(&srv.url()), stream, LEARNER_GROUP, settings).await.unwrap();
    for g in &groups {
        producer.send_batch(g).await.expect("the producer is admitted while the learner holds entries");
    }
    wait_status(&mut run.status, "every trajectory applied", LIMIT, |s| s.applied == all.len() as u64).await;
    let last = run.stop().await;
    assert_eq!(last.step, 12, "one update per group");
    assert_eq!(trained_counts(&final_checkpoint(dir.path())).len(), all.len());
    assert_all_acknowledged(&srv.url(), "mark").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_trajectory_is_dropped_counted_and_acknowledged() {
    let (srv, dir) = (RedisServer::start(RedisServerOptions::default()).unwrap(), tempfile::tempdir().unwrap());
    let spec = spec("stale", dir.path(), |l, s| {
        (l.max_staleness, l.checkpoint_every) = (1, 100);
        s.group_size = 2;
    });
    let mut rng = SampleRng::new(3);
    let before = LEARNER_STALE_DROPPED.get();
    let mut run = launch(spec, &srv.url()).await;
    let link = link(&srv.url());
    let fresh = [group(&mut rng, 1, 2, 0), group(&mut rng, 2, 2, 0)].concat();
    send(&link, "stale", &fresh).await;
    wait_status(&mut run.status, "version 2", LIMIT, |s| s.version == PolicyVersion(2)).await;

    // At version 2 with max_staleness 1, version 0 is stale; version 2 is not.
    let stale = group(&mut rng, 3, 2, 0);
    let current = group(&mut rng, 4, 2, 2);
    send(&link, "stale", &[stale.clone(), current.clone()].concat()).await;
    wait_status(&mut run.status, "the stale group dropped and the current one applied", LIMIT, |s| {
        s.stale_dropped == 2 && s.applied == 6
    })
    .await;
    let last = run.stop().await;

    assert_eq!(last.stale_dropped, 2);
    assert!(LEARNER_STALE_DROPPED.get() >= before + 2);
    let data = final_checkpoint(dir.path());
    let dropped: HashSet<TrajectoryId> = data.consumption.history.iter().flat_map(|r| r.dropped.clone()).collect();
    assert_eq!(dropped, ids(&stale), "the stale ids are recorded as consumed without training");
    let trained = trained_counts(&data);
    assert!(stale.iter().all(|s| !trained.contains_key(&s.trajectory.id)));
    assert_eq!(trained.len(), 6);
    assert_all_acknowledged(&srv.url(), "stale").await;
}

/// Members waiting for their group that go stale as the policy moves on are dropped and
/// acknowledged at once, not held for max_wait (120 s here; the test allows 20), and the rest
/// of their group, arriving stale, is dropped on arrival: nothing pins the scored stream. On the
/// code before this, the half group waited the full 120 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_group_gone_stale_is_dropped_at_once_not_after_max_wait() {
    let (srv, dir) = (RedisServer::start(RedisServerOptions::default()).unwrap(), tempfile::tempdir().unwrap());
    let spec = spec("stuck", dir.path(), |l, s| {
        (l.max_staleness, l.checkpoint_every) = (1, 100);
        s.max_wait_ms = 120_000;
    });
    let mut rng = SampleRng::new(11);
    let mut run = launch(spec, &srv.url()).await;
    let link = link(&srv.url());
    let half = group(&mut rng, 1, GROUP / 2, 0);
    send(&link, "stuck", &half).await;
    let fresh = [group(&mut rng, 2, GROUP, 0), group(&mut rng, 3, GROUP, 0)].concat();
    send(&link, "stuck", &fresh).await;
    let quick = Duration::from_secs(20);
    wait_status(&mut run.status, "the waiting half group dropped once stale", quick, |s| {
        s.version == PolicyVersion(2) && s.stale_dropped == (GROUP / 2) as u64
    })
    .await;
    let rest = group(&mut rng, 1, GROUP / 2, 0);
    send(&link, "stuck", &rest).await;
    wait_status(&mut run.status, "the rest of the group dropped on arrival", quick, |s| {
        s.stale_dropped == GROUP as u64
    })
    .await;
    let last = run.stop().await;
    assert_eq!((last.applied, last.stale_dropped), (2 * GROUP as u64, GROUP as u64));
    let data = final_checkpoint(dir.path());
    let dropped: HashSet<TrajectoryId> = data.consumption.history.iter().flat_map(|r| r.dropped.clone()).collect();
    assert_eq!(dropped, ids(&[half, rest].concat()), "the whole group is recorded as consumed without training");
    assert_all_acknowledged(&srv.url(), "stuck").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_entries_outlive_the_idle_timeout_without_redelivery() {
    let (srv, dir) = (RedisServer::start(RedisServerOptions::default()).unwrap(), tempfile::tempdir().unwrap());
    let mut spec = spec("held", dir.path(), |l, s| {
        l.checkpoint_every = 100;
        s.max_wait_ms = 4000;
    });
    // The lease is renewed every claim_idle / 4 = 250 ms: only a stall of the test process
    // longer than 750 ms could let the learner reclaim its own entries (it once was 200 ms,
    // which a loaded two-core machine can stall for).
    spec.queue.claim_idle = Duration::from_secs(1);
    spec.queue.max_deliveries = 2;
    let mut rng = SampleRng::new(5);
    let mut run = launch(spec, &srv.url()).await;
    let link = link(&srv.url());
    // Half a group: it waits max_wait (4 idle timeouts) in the batch, then its update waits
    // for a checkpoint that only shutdown writes.
    let half = group(&mut rng, 1, GROUP / 2, 0);
    send(&link, "held", &half).await;
    wait_status(&mut run.status, "the half group applied after max_wait", LIMIT, |s| s.applied == 2).await;
    assert_eq!(delivery_counts(&link, "held").await, [1, 1], "held entries were redelivered");
    let last = run.stop().await;
    assert_eq!((last.duplicates, last.dead_lettered), (0, 0));
    let dead = Keys::dead_letter(&Keys::new(&RunId::new("held").unwrap()).scored());
    assert!(protocol::queue::read_dead_letters(&link, &dead, 10).await.unwrap().is_empty());
    assert_eq!(trained_counts(&final_checkpoint(dir.path())).len(), 2);
    assert_all_acknowledged(&srv.url(), "held").await;
}

/// One TensorBoard event per update after the file's version event, each holding exactly the
/// figures of that update's metrics.jsonl line at its step and time.
fn assert_tensorboard_matches_the_records(dir: &std::path::Path, updates: u64) {
    use learner::service::record::UpdateRecord;
    use learner::tensorboard::{event, record};
    let text = std::fs::read_to_string(dir.join("metrics.jsonl")).unwrap();
    let records: Vec<UpdateRecord> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(records.len() as u64, updates, "one metrics.jsonl line per update");
    let files: Vec<_> = std::fs::read_dir(dir.join("tb")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(files.len(), 1, "one event file per learner process: {files:?}");
    let bytes = std::fs::read(&files[0]).unwrap();
    let events = record::unframe(&bytes).unwrap();
    assert_eq!(events.len() as u64, 1 + updates, "the version event, then one per update");
    for (got, r) in events[1..].iter().zip(&records) {
        let scalars: Vec<(String, f32)> = r.scalars().into_iter().map(|(t, v)| (t, v as f32)).collect();
        assert!(scalars.iter().any(|(t, _)| t == "loss") && scalars.len() > 15, "{scalars:?}");
        assert_eq!(*got, event::scalars(r.at_ms as f64 / 1000.0, r.step as i64, &scalars), "step {}", r.step);
    }
}
