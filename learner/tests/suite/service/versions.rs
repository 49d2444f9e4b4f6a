//! One version, one content: a learner process SIGKILLed after publishing version 4 and
//! before a checkpoint covered it resumes from checkpoint 3; it must not publish a different
//! version 4, because an actor that holds 4 never refetches it. Here the resumed learner's
//! update 4 trains on other data than the killed one's (a stand-in for any difference between
//! the two: batch composition, arrival order, GPU nondeterminism), and every actor must end on
//! the learner's final weights, bit for bit.
//!
//! ```text
//!  child: updates 1-4 (v1-v4), checkpoint 3 ─► SIGKILL    actor A fetches v4 (the killed run's)
//!  group 3 taken out of the queue, group 4 sent
//!  restart: checkpoint 3 ─► v5 = its weights; update 4 on group 4 ─► v6; stop
//!  actors A (following from v4) and B (fresh) ─► the newest version == the final checkpoint
//! ```

use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

use learner::rng::SampleRng;
use learner::service::LearnerService;
use policy::LoadedModel;
use protocol::keys::{Keys, LEARNER_GROUP};
use protocol::queue::Consumer;
use protocol::redis_server::{RedisServer, RedisServerOptions};
use protocol::weights::{WeightSet, WeightStore};
use protocol::wire::{PolicyVersion, RunId, ScoredTrajectory};
use tokio_util::sync::CancellationToken;

use crate::service::common::*;
use crate::service::kill::{kill_spec, run_child_until, RUN};

const LIMIT: Duration = Duration::from_secs(60);

/// An actor's view of the weights: the version it serves and the model it loaded.
struct Actor {
    set: WeightSet,
    model: LoadedModel,
}

impl Actor {
    fn load(set: WeightSet) -> Self {
        let mut model = initial_model();
        policy::weights::import_weight_set(&mut model.vs, &set).unwrap();
        Self { set, model }
    }

    /// Follows the store as actors do: fetches only a version newer than the one it holds.
    async fn follow(self, store: &WeightStore) -> Self {
        match store.fetch_newer_than(Some(self.set.version())).await.unwrap() {
            Some(newer) => Self::load(newer),
            None => self,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_actor_ends_on_the_learners_weights_after_a_kill_between_publish_and_checkpoint() {
    let (srv, dir) = (RedisServer::start(RedisServerOptions::default()).unwrap(), tempfile::tempdir().unwrap());
    let (url, link) = (srv.url(), link(&srv.url()));
    let run = RunId::new(RUN).unwrap();
    let mut rng = SampleRng::new(31);
    let groups: Vec<Vec<ScoredTrajectory>> = (0..5).map(|g| group(&mut rng, g, GROUP, 0)).collect();
    send(&link, RUN, &groups[..4].concat()).await;

    let (u, d) = (url.clone(), dir.path().to_path_buf());
    let status = tokio::task::spawn_blocking(move || run_child_until(&u, &d, 4, 3)).await.unwrap();
    assert_eq!(status.signal(), Some(9), "the child should have died by SIGKILL: {status:?}");
    assert_eq!(final_checkpoint(dir.path()).step, 3, "update 4 was published but never checkpointed");
    let store = WeightStore::new(&link, &run, kill_spec(dir.path()).weights);
    let actor_a = Actor::load(store.fetch_latest().await.unwrap());
    assert_eq!(actor_a.set.version(), PolicyVersion(4), "actor A holds the killed learner's v4");
    let killed_v4 = actor_a.set.manifest().root;

    // Group 3 leaves the queue (acknowledged by hand); the resumed update 4 trains group 4.
    let stream = Keys::new(&run).scored();
    let mut hand =
        Consumer::<ScoredTrajectory>::new(&link, &stream, LEARNER_GROUP, "learner-0", queue_settings()).await.unwrap();
    let (mut taken, started) = (Vec::new(), Instant::now());
    while taken.len() < GROUP {
        assert!(started.elapsed() < LIMIT, "group 3's entries were never taken back");
        taken.extend(hand.next_batch().await.unwrap().into_iter().map(|d| d.entry_id));
    }
    hand.ack(&taken).await.unwrap();
    drop(hand);
    send(&link, RUN, &groups[4]).await;

    let svc = LearnerService::start(kill_spec(dir.path()), initial_model(), &link).await.unwrap();
    let (mut rx, token) = (svc.status(), CancellationToken::new());
    let resumed = rx.borrow().clone();
    assert_eq!((resumed.step, resumed.version), (3, PolicyVersion(5)), "numbering continues after v4");
    let task = tokio::spawn(svc.run(token.clone()));
    wait_status(&mut rx, "update 4 on group 4", LIMIT, |s| s.step == 4).await;
    token.cancel();
    let last = tokio::time::timeout(LIMIT, task).await.unwrap().unwrap().unwrap();
    let data = final_checkpoint(dir.path());
    assert_eq!((last.version, data.step, data.policy_version), (PolicyVersion(6), 4, PolicyVersion(6)));

    let still_v4 = store.fetch(PolicyVersion(4)).await.unwrap();
    assert_eq!(still_v4.manifest().root, killed_v4, "v4 still names the killed learner's weights only");
    let actor_a = actor_a.follow(&store).await;
    let actor_b = Actor::load(store.fetch_latest().await.unwrap());
    for (name, actor) in [("actor A (held v4)", &actor_a), ("actor B (fresh)", &actor_b)] {
        assert_eq!(actor.set.version(), PolicyVersion(6), "{name}");
        assert_same_weights(&actor.model, &data, name);
    }
}
