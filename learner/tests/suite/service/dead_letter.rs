//! Entries the model cannot train on (a control episode, more tokens than its positions, a
//! token outside its vocabulary) go to the dead-letter stream with their reason and original
//! bytes, at their first delivery; they are acknowledged, never trained on, and do not hold up
//! the groups beside them.

use std::collections::HashSet;
use std::time::Duration;

use learner::rng::SampleRng;
use learner::service::LearnerService;
use protocol::codec::Codec;
use protocol::keys::Keys;
use protocol::queue::{read_dead_letters, stream_depth};
use protocol::redis_server::{RedisServer, RedisServerOptions};
use protocol::wire::{ControlStep, Episode, RunId, ScoredTrajectory, TrajectoryId};
use tokio_util::sync::CancellationToken;

use crate::service::common::*;

const LIMIT: Duration = Duration::from_secs(60);

/// `st` made untrainable in one of three ways, with the words its dead letter's reason must hold.
fn spoil(mut st: ScoredTrajectory, how: usize) -> (ScoredTrajectory, &'static str) {
    let Episode::Text(turns) = &mut st.trajectory.episode else { unreachable!("common::trajectory is text") };
    let why = match how {
        0 => {
            let step = ControlStep { observation: vec![0.0; 4], action: 1, logprob: -0.7, reward: 1.0 };
            st.trajectory.episode = Episode::Control(vec![step; 3]);
            "a control episode"
        }
        1 => {
            // 300 tokens in all, over the test model's 256 positions.
            let agent = &mut turns[1];
            agent.token_ids = vec![65; 294];
            agent.logprobs = vec![-1.0; 294];
            agent.loss_mask = vec![true; 294];
            "more than the model's 256 positions"
        }
        _ => {
            turns[1].token_ids[3] = 1_000_000;
            "outside the model's vocabulary"
        }
    };
    (st, why)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn untrainable_entries_are_dead_lettered_with_their_reason_and_the_rest_is_trained() {
    let (srv, dir) = (RedisServer::start(RedisServerOptions::default()).unwrap(), tempfile::tempdir().unwrap());
    let spec = spec("dead", dir.path(), |l, _| l.checkpoint_every = 1);
    let mut rng = SampleRng::new(6);
    let good = group(&mut rng, 1, GROUP, 0);
    let (bad, reasons): (Vec<ScoredTrajectory>, Vec<&str>) =
        group(&mut rng, 2, GROUP, 0).into_iter().enumerate().map(|(i, st)| spoil(st, i)).unzip();
    // Interleaved, so an untrainable entry sits between members of a trainable group.
    let items: Vec<ScoredTrajectory> = good.iter().zip(&bad).flat_map(|(g, b)| [g.clone(), b.clone()]).collect();

    let svc = LearnerService::start(spec, initial_model(), &link(&srv.url())).await.unwrap();
    let (token, mut status) = (CancellationToken::new(), svc.status());
    let task = tokio::spawn(svc.run(token.clone()));
    let link = link(&srv.url());
    send(&link, "dead", &items).await;
    wait_status(&mut status, "the good group applied and the bad one dead-lettered", LIMIT, |s| {
        s.applied == GROUP as u64 && s.dead_lettered == GROUP as u64
    })
    .await;
    token.cancel();
    let last = tokio::time::timeout(LIMIT, task).await.expect("the learner stops").unwrap().unwrap();
    assert_eq!((last.step, last.dead_lettered, last.duplicates, last.stale_dropped), (1, 4, 0, 0), "{last:?}");

    // Each one is in the dead-letter stream once, with its reason, delivered once, and with
    // its original bytes, so it can be replayed after a fix.
    let scored = Keys::new(&RunId::new("dead").unwrap()).scored();
    let dead = read_dead_letters(&link, &Keys::dead_letter(&scored), 100).await.unwrap();
    assert_eq!(dead.len(), GROUP, "{dead:?}");
    for (st, why) in bad.iter().zip(&reasons) {
        let id = st.trajectory.id.to_string();
        let letter = dead.iter().find(|d| d.item_id.as_deref() == Some(id.as_str())).expect("a dead letter per entry");
        assert!(letter.reason.contains(why), "{why:?} not in {:?}", letter.reason);
        assert_eq!((letter.deliveries, letter.consumer.as_str()), (1, "learner-0"), "{letter:?}");
        let back: ScoredTrajectory = Codec::default().decode_valid(letter.payload.as_deref().unwrap()).unwrap();
        assert_eq!(&back, st, "the dead letter carries the entry as sent");
    }

    // Only the good group was trained; the bad ids are nowhere in the learner's ledger.
    let data = final_checkpoint(dir.path());
    let trained: HashSet<TrajectoryId> = trained_counts(&data).into_keys().collect();
    assert_eq!(trained, good.iter().map(|s| s.trajectory.id).collect::<HashSet<_>>());
    let dropped: HashSet<TrajectoryId> = data.consumption.history.iter().flat_map(|r| r.dropped.clone()).collect();
    assert!(dropped.is_empty(), "{dropped:?}");
    assert_eq!(pending(&link, "dead").await, 0, "everything acknowledged");
    assert_eq!(stream_depth(&link, &scored).await.unwrap(), 0, "nothing left unconsumed");
}
