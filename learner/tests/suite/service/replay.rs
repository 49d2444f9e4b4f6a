//! A dead letter replayed once its cause is fixed is trained exactly once. A learner that dies
//! on a group every time (here: a consumer under the learner's name that takes the group and
//! dies while processing it) sends it to the dead-letter stream after `max_deliveries`; the
//! fixed learner running, the letters are replayed (what `reagent dlq replay` does) and each
//! member is trained once; the same trajectories sent again are skipped as duplicates.

use std::time::{Duration, Instant};

use learner::rng::SampleRng;
use learner::service::LearnerService;
use protocol::keys::{Keys, LEARNER_GROUP};
use protocol::queue::{read_dead_letters, replay_dead_letters, Consumer, QueueSettings};
use protocol::redis_server::{RedisServer, RedisServerOptions};
use protocol::wire::{RunId, ScoredTrajectory};
use tokio_util::sync::CancellationToken;

use crate::service::common::*;

const RUN: &str = "replay";
const LIMIT: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_dead_letter_is_trained_exactly_once() {
    let (srv, dir) = (RedisServer::start(RedisServerOptions::default()).unwrap(), tempfile::tempdir().unwrap());
    let link = link(&srv.url());
    let settings = QueueSettings { max_deliveries: 2, ..queue_settings() };
    let stream = Keys::new(&RunId::new(RUN).unwrap()).scored();
    let dead = Keys::dead_letter(&stream);
    let mut rng = SampleRng::new(21);
    let (poison, healthy) = (group(&mut rng, 0, GROUP, 0), group(&mut rng, 1, GROUP, 0));
    send(&link, RUN, &poison).await;

    // The broken learner: each life takes the group and dies while processing it.
    let started = Instant::now();
    while read_dead_letters(&link, &dead, 100).await.unwrap().len() < GROUP {
        assert!(started.elapsed() < LIMIT, "the group was never dead-lettered");
        let mut broken =
            Consumer::<ScoredTrajectory>::new(&link, &stream, LEARNER_GROUP, "learner-0", settings).await.unwrap();
        let _ = broken.next_batch().await.unwrap();
    }
    let letters = read_dead_letters(&link, &dead, 100).await.unwrap();
    assert!(letters.iter().all(|l| l.failures == 2), "{letters:?}");

    // The fixed learner; the letters replayed while it runs.
    send(&link, RUN, &healthy).await;
    let mut spec = spec(RUN, dir.path(), |l, _| l.checkpoint_every = 1);
    spec.queue = settings;
    let svc = LearnerService::start(spec, initial_model(), &link).await.unwrap();
    let (mut rx, token) = (svc.status(), CancellationToken::new());
    let task = tokio::spawn(svc.run(token.clone()));
    let ids: Vec<String> = letters.iter().map(|l| l.dead_id.clone()).collect();
    assert_eq!(replay_dead_letters(&link, &dead, &ids).await.unwrap().len(), GROUP);
    assert!(replay_dead_letters(&link, &dead, &ids).await.unwrap().is_empty(), "a letter replays once");
    wait_status(&mut rx, "both groups trained and checkpointed", LIMIT, |s| s.checkpoint_step == Some(2)).await;
    // Sent again (as a second replay would), the group is recognised as already applied.
    send(&link, RUN, &poison).await;
    wait_status(&mut rx, "the repeats skipped", LIMIT, |s| s.duplicates == GROUP as u64).await;
    token.cancel();
    let last = tokio::time::timeout(LIMIT, task).await.unwrap().unwrap().unwrap();
    assert_eq!((last.step, last.applied, last.dead_lettered), (2, 2 * GROUP as u64, 0));

    let counts = trained_counts(&final_checkpoint(dir.path()));
    let want: Vec<_> = poison.iter().chain(&healthy).map(|s| s.trajectory.id).collect();
    assert!(want.iter().all(|id| counts.get(id) == Some(&1)), "each trained exactly once: {counts:?}");
    assert_eq!(counts.len(), want.len());
    assert!(read_dead_letters(&link, &dead, 100).await.unwrap().is_empty());
    assert_eq!(pending(&link, RUN).await, 0, "entries left pending");
}
