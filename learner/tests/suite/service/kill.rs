//! Kill and resume with a real process: the learner runs as a child process (this test binary,
//! `CHILD_ENV` set), is killed with SIGKILL after a checkpoint while an update it applied is
//! not yet in one, and is restarted here.
//!
//! ```text
//!  groups 0-3 ─► child: updates 1 2 3, checkpoint 3 (XACK groups 0-2), update 4 ─► SIGKILL
//!  two entries of group 0 re-sent and left pending for "learner-0" (as if the crash fell
//!  between a checkpoint and its XACK);  groups 4-7 sent
//!  restart: resume step 3 / v3, v4 already published ─► the checkpoint's weights published as
//!           v5 (a version number never names two contents); group 3 redelivered and re-applied
//!           (update 4, v6), the two group-0 entries skipped as applied, groups 4-7 → updates
//!           5-8 (v7-v10)
//! ```
//!
//! "Applied exactly once" is checked in the durable history: the final checkpoint's
//! `history` has one record per update 1..=8, and every trajectory id is trained in exactly
//! one of them. The final weights are also checked bitwise against an uninterrupted replay of
//! that history from the initial model.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use learner::advantage::group_key;
use learner::optim::AdamW;
use learner::rng::SampleRng;
use learner::service::{LearnerService, ServiceSpec};
use learner::update::{grpo_update, Models, UpdateConfig};
use policy::LoadedModel;
use protocol::keys::{Keys, LEARNER_GROUP};
use protocol::queue::Consumer;
use protocol::redis_server::{RedisServer, RedisServerOptions};
use protocol::weights::WeightStore;
use protocol::wire::{PolicyVersion, RunId, ScoredTrajectory, TrajectoryId};
use tokio_util::sync::CancellationToken;

use crate::service::common::*;

const CHILD_ENV: &str = "LEARNER_SERVICE_CHILD";
pub(crate) const RUN: &str = "killed";
const LIMIT: Duration = Duration::from_secs(60);

pub(crate) fn kill_spec(dir: &std::path::Path) -> ServiceSpec {
    spec(RUN, dir, |l, _| (l.checkpoint_every, l.publish_every) = (3, 1))
}

/// The child's body; a no-op unless the parent set `CHILD_ENV` to `url<TAB>checkpoint dir`.
#[test]
fn child_learner_runs_until_killed() {
    let Ok(arg) = std::env::var(CHILD_ENV) else { return };
    let (url, dir) = arg.split_once('\t').expect("url and dir");
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let svc = LearnerService::start(kill_spec(dir.as_ref()), initial_model(), &link(url)).await.unwrap();
        let (mut rx, token) = (svc.status(), CancellationToken::new());
        let task = tokio::spawn(svc.run(token.clone()));
        // Report every change until killed; give up after a minute so no orphan lingers.
        let deadline = tokio::time::Instant::now() + LIMIT;
        loop {
            let s = rx.borrow_and_update().clone();
            let checkpoint = s.checkpoint_step.map_or(-1, |c| c as i64);
            println!("status step={} checkpoint={checkpoint} version={}", s.step, s.version.0);
            if tokio::time::timeout_at(deadline, rx.changed()).await.is_err() {
                break;
            }
        }
        token.cancel();
        let _ = task.await;
    });
    std::process::exit(3);
}

/// Spawns the child and waits until it reports `step` applied with `checkpoint` durable.
pub(crate) fn run_child_until(
    url: &str,
    dir: &std::path::Path,
    step: u64,
    checkpoint: u64,
) -> std::process::ExitStatus {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "service::kill::child_learner_runs_until_killed", "--nocapture", "--test-threads", "1"])
        .env(CHILD_ENV, format!("{url}\t{}", dir.display()))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let want = format!("status step={step} checkpoint={checkpoint} ");
    let deadline = Instant::now() + LIMIT;
    let mut seen = Vec::new();
    while !seen.last().is_some_and(|l: &String| l.starts_with(&want)) {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => seen.push(line),
            Err(e) => {
                let _ = child.kill();
                panic!("the child never reported {want:?} ({e}); it said {seen:?}");
            }
        }
    }
    child.kill().unwrap();
    child.wait().unwrap()
}

/// The initial model trained on the history's batches in order, in this process.
fn replay(
    history: &[learner::checkpoint::AppliedRecord],
    all: &HashMap<TrajectoryId, ScoredTrajectory>,
) -> LoadedModel {
    let spec = kill_spec(std::path::Path::new("."));
    let (model, reference) = (initial_model(), initial_model());
    let cfg =
        UpdateConfig::new(&spec.learner, spec.service.temperature, spec.pad_id, spec.service.micro_batch).unwrap();
    let mut opt = AdamW::from_named(model.vs.variables(), spec.learner.adamw_config());
    for r in history {
        let mut batch: Vec<ScoredTrajectory> = r.trained.iter().map(|id| all[id].clone()).collect();
        batch.sort_by_key(|s| (group_key(&s.trajectory, true), s.trajectory.id));
        grpo_update(Models { policy: &model.model, reference: Some(&reference.model) }, &mut opt, &batch, &cfg)
            .unwrap();
    }
    model
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_learner_resumes_and_applies_every_trajectory_exactly_once() {
    let (srv, dir) = (RedisServer::start(RedisServerOptions::default()).unwrap(), tempfile::tempdir().unwrap());
    let (url, link) = (srv.url(), link(&srv.url()));
    let mut rng = SampleRng::new(4);
    let groups: Vec<Vec<ScoredTrajectory>> = (0..8).map(|g| group(&mut rng, g, GROUP, 0)).collect();
    send(&link, RUN, &groups[..4].concat()).await;

    let (u, d) = (url.clone(), dir.path().to_path_buf());
    let status = tokio::task::spawn_blocking(move || run_child_until(&u, &d, 4, 3)).await.unwrap();
    assert_eq!(status.signal(), Some(9), "the child should have died by SIGKILL: {status:?}");
    assert_eq!(final_checkpoint(dir.path()).step, 3, "update 4 was applied but never checkpointed");
    assert_eq!(pending(&link, RUN).await, GROUP as u64, "group 3's entries await redelivery");

    // Entries whose trajectories checkpoint 3 holds, pending for the learner's name.
    let stream = Keys::new(&RunId::new(RUN).unwrap()).scored();
    send(&link, RUN, &groups[0][..2]).await;
    let mut imposter =
        Consumer::<ScoredTrajectory>::new(&link, &stream, LEARNER_GROUP, "learner-0", queue_settings()).await.unwrap();
    let resent: HashSet<String> = groups[0][..2].iter().map(|s| s.trajectory.id.to_string()).collect();
    let (mut taken, started) = (0, Instant::now());
    while taken < 2 {
        assert!(started.elapsed() < LIMIT, "the re-sent entries were never read");
        taken += imposter.next_batch().await.unwrap().iter().filter(|d| resent.contains(&d.item_id)).count();
    }
    drop(imposter);
    send(&link, RUN, &groups[4..].concat()).await;

    let svc = LearnerService::start(kill_spec(dir.path()), initial_model(), &link).await.unwrap();
    let mut rx = svc.status();
    let resumed = rx.borrow().clone();
    assert_eq!((resumed.step, resumed.version, resumed.checkpoint_step), (3, PolicyVersion(5), Some(3)));
    assert!(resumed.resumed_from.is_some());
    let token = CancellationToken::new();
    let task = tokio::spawn(svc.run(token.clone()));
    wait_status(&mut rx, "update 8", LIMIT, |s| s.step == 8).await;
    token.cancel();
    let last = tokio::time::timeout(LIMIT, task).await.unwrap().unwrap().unwrap();
    assert_eq!(last.duplicates, 2, "the two applied, pending entries are recognised");
    assert_eq!(last.applied, 5 * GROUP as u64, "group 3 again, then groups 4-7");

    let data = final_checkpoint(dir.path());
    assert_eq!((data.step, data.policy_version), (8, PolicyVersion(10)));
    let steps: Vec<u64> = data.consumption.history.iter().map(|r| r.step).collect();
    assert_eq!(steps, (1..=8).collect::<Vec<_>>(), "one durable record per update");
    let counts = trained_counts(&data);
    let all: HashMap<TrajectoryId, ScoredTrajectory> =
        groups.iter().flatten().map(|s| (s.trajectory.id, s.clone())).collect();
    assert_eq!(counts.keys().copied().collect::<HashSet<_>>(), all.keys().copied().collect());
    assert!(counts.values().all(|&n| n == 1), "a trajectory trained twice: {counts:?}");
    assert_eq!(pending(&link, RUN).await, 0, "entries left pending");

    let store = WeightStore::new(&link, &RunId::new(RUN).unwrap(), kill_spec(dir.path()).weights);
    let latest = store.fetch_latest().await.unwrap();
    assert_eq!(latest.version(), PolicyVersion(10));
    let mut actor = initial_model();
    policy::weights::import_weight_set(&mut actor.vs, &latest).unwrap();
    assert_same_weights(&actor, &data, "the published v10");
    let history = data.consumption.history.clone();
    let replayed = tokio::task::spawn_blocking(move || replay(&history, &all)).await.unwrap();
    assert_same_weights(&replayed, &data, "an uninterrupted replay of the durable history");
}
