//! Restarts are not failures: a healthy learner that crashes ten times while it holds applied,
//! not yet checkpointed entries dead-letters none of them (its recovery takes them back each
//! time, which Redis counts as a delivery), and afterwards trains each exactly once.

use std::time::Duration;

use learner::rng::SampleRng;
use learner::service::LearnerService;
use protocol::keys::Keys;
use protocol::queue::read_dead_letters;
use protocol::redis_server::{RedisServer, RedisServerOptions};
use protocol::wire::{RunId, ScoredTrajectory};
use tokio_util::sync::CancellationToken;

use crate::service::common::*;

const RUN: &str = "restarts";
const LIMIT: Duration = Duration::from_secs(60);
const RESTARTS: u64 = 10;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_crashes_holding_applied_entries_dead_letter_nothing() {
    let (srv, dir) = (RedisServer::start(RedisServerOptions::default()).unwrap(), tempfile::tempdir().unwrap());
    let link = link(&srv.url());
    let mut rng = SampleRng::new(13);
    let groups: Vec<Vec<ScoredTrajectory>> = (0..2).map(|g| group(&mut rng, g, GROUP, 0)).collect();
    send(&link, RUN, &groups.concat()).await;
    let n = (2 * GROUP) as u64;
    let never_checkpoints =
        |l: &mut learner::LearnerConfig, _: &mut _| (l.checkpoint_every, l.publish_every) = (1000, 1000);

    for restart in 0..RESTARTS {
        let svc =
            LearnerService::start(spec(RUN, dir.path(), never_checkpoints), initial_model(), &link).await.unwrap();
        let mut rx = svc.status();
        let task = tokio::spawn(svc.run(CancellationToken::new()));
        let what = format!("both updates applied and held after restart {restart}");
        wait_status(&mut rx, &what, LIMIT, |s| s.step == 2 && s.unacknowledged == n as usize).await;
        // A crash: nothing acknowledged, nothing checkpointed; the entries stay pending.
        task.abort();
        let _ = task.await;
    }
    let dead = Keys::dead_letter(&Keys::new(&RunId::new(RUN).unwrap()).scored());
    let letters = read_dead_letters(&link, &dead, 100).await.unwrap();
    println!(
        "after {RESTARTS} crashes: {} dead-lettered, delivery counts {:?}",
        letters.len(),
        delivery_counts(&link, RUN).await
    );
    assert!(letters.is_empty(), "healthy entries were dead-lettered: {letters:?}");
    assert_eq!(pending(&link, RUN).await, n, "every entry still awaits the learner");
    assert!(
        delivery_counts(&link, RUN).await.iter().all(|&d| d == RESTARTS),
        "each crash's recovery took every entry back (Redis counted a delivery each time)"
    );

    // A learner that checkpoints trains each of them exactly once and acknowledges them.
    let svc = LearnerService::start(spec(RUN, dir.path(), |l, _| l.checkpoint_every = 2), initial_model(), &link)
        .await
        .unwrap();
    let (mut rx, token) = (svc.status(), CancellationToken::new());
    let task = tokio::spawn(svc.run(token.clone()));
    wait_status(&mut rx, "a checkpoint of both updates", LIMIT, |s| s.checkpoint_step == Some(2)).await;
    token.cancel();
    tokio::time::timeout(LIMIT, task).await.unwrap().unwrap().unwrap();
    let counts = trained_counts(&final_checkpoint(dir.path()));
    assert_eq!(counts.len(), n as usize, "every trajectory trained");
    assert!(counts.values().all(|&c| c == 1), "a trajectory trained twice: {counts:?}");
    assert_eq!(pending(&link, RUN).await, 0, "entries left pending");
}
