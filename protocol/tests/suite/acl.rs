//! The per-role Redis users on a real redis-server started with the generated ACL file: each
//! role does its whole job with its own user (the queue, dead letters, weights, critiques), and
//! is refused outside it — an actor cannot write weights or scored entries, an RRM worker cannot
//! publish a version, KEDA only reads, and nobody but admin can FLUSHALL or read another role's
//! keys. Refusals are Redis's NOPERM, so they cannot pass by a typo in a key.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use std::time::Duration;

use crate::common::Item;
use protocol::acl::{acl_file, random_password, AclUser};
use protocol::critique;
use protocol::keys::{Keys, LEARNER_GROUP, RRM_GROUP};
use protocol::link::{LinkSettings, RedisLink};
use protocol::queue::{Consumer, Producer};
use protocol::redis_server::{RedisServer, RedisServerOptions, ServerAuth};
use protocol::weights::{NamedTensor, WeightSettings, WeightStore};
use protocol::wire::{DType, Judgement, PolicyVersion, RunId, TrajectoryId, Verdict};
use testkit::fast_queue;

const RUN: &str = "acl";

struct Cluster {
    server: RedisServer,
    passwords: Vec<(AclUser, String)>,
}

impl Cluster {
    fn start() -> Self {
        let passwords: Vec<(AclUser, String)> = AclUser::ALL.iter().map(|u| (*u, random_password())).collect();
        let users: Vec<(AclUser, &str)> = passwords.iter().map(|(u, p)| (*u, p.as_str())).collect();
        let admin = passwords.iter().find(|(u, _)| *u == AclUser::Admin).unwrap().1.clone();
        let auth = ServerAuth { acl: acl_file(&users, RUN), admin_password: admin };
        let server = RedisServer::start(RedisServerOptions { auth: Some(auth), ..Default::default() }).unwrap();
        Self { server, passwords }
    }

    fn link(&self, user: AclUser) -> RedisLink {
        let pw = &self.passwords.iter().find(|(u, _)| *u == user).unwrap().1;
        let url = format!("redis://{}:{pw}@127.0.0.1:{}", user.name(), self.server.port());
        let settings = LinkSettings { retry_for: Duration::from_secs(5), ..LinkSettings::default() };
        RedisLink::connect(&url, settings).unwrap()
    }
}

/// Runs one raw command as `link`'s user; the error text when refused.
async fn raw(link: &RedisLink, args: &[&str]) -> Result<redis::Value, String> {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    link.call("raw", Duration::ZERO, |mut c| {
        let args = args.clone();
        async move { redis::cmd(&args[0]).arg(&args[1..]).query_async(&mut c).await }
    })
    .await
    .map_err(|e| e.to_string())
}

async fn refused(link: &RedisLink, args: &[&str]) {
    let err = raw(link, args).await.expect_err(&format!("{args:?} must be refused"));
    assert!(err.contains("NOPERM") || err.contains("permission"), "{args:?}: {err}");
}

/// Reads batches until `n` deliveries came, with a deadline.
async fn read_until(consumer: &mut Consumer<Item>, n: usize) -> Vec<protocol::queue::Delivery<Item>> {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut got = Vec::new();
    while got.len() < n {
        assert!(std::time::Instant::now() < deadline, "{n} deliveries within 10 s; got {}", got.len());
        got.extend(consumer.next_batch().await.unwrap());
    }
    got
}

fn tensor(data: &[u8]) -> NamedTensor<'_> {
    NamedTensor { name: "w", shape: &[4], dtype: DType::F32, data }
}

fn store(link: &RedisLink) -> WeightStore {
    WeightStore::new(link, &RunId::new(RUN).unwrap(), WeightSettings::default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_role_works_with_its_user_and_is_refused_outside_it() {
    let c = Cluster::start();
    let keys = Keys::new(&RunId::new(RUN).unwrap());
    let (learner, actor, rrm, keda, admin) = (
        c.link(AclUser::Learner),
        c.link(AclUser::Actor),
        c.link(AclUser::Rrm),
        c.link(AclUser::Keda),
        c.link(AclUser::Admin),
    );
    let q = fast_queue();

    // The learner publishes version 1; the actor fetches it and may watch the channel.
    let bytes = [7u8; 16];
    store(&learner).publish(PolicyVersion(1), &[tensor(&bytes)]).await.unwrap();
    let fetched = store(&actor).fetch_latest().await.unwrap();
    assert_eq!(&fetched.tensor("w").unwrap().1[..], &bytes[..]);
    let mut pubsub = actor.client().get_async_pubsub().await.unwrap();
    pubsub.subscribe(keys.weights_notify()).await.unwrap();
    assert!(pubsub.subscribe("reagent:{acl}:other").await.is_err(), "an actor hears only its channel");

    // Actor → rollouts → RRM worker → scored → learner, and a critique back to the actor.
    let rollouts = Producer::<Item>::new(actor.clone(), keys.rollouts(), RRM_GROUP, q).await.unwrap();
    rollouts.send(&Item::new(1, 32)).await.unwrap();
    rollouts.send(&Item::new(2, 32)).await.unwrap();
    raw(&actor, &["INCR", &keys.stream("actor:seed-blocks")]).await.unwrap();
    let mut judge = Consumer::<Item>::new(&rrm, keys.rollouts(), RRM_GROUP, "rrm-1", q).await.unwrap();
    let scored = Producer::<Item>::new(rrm.clone(), keys.scored(), LEARNER_GROUP, q).await.unwrap();
    let mut got = read_until(&mut judge, 2).await;
    let first = got.remove(0);
    judge.forward(&scored, &[(first.entry_id.clone(), first.item.clone())]).await.unwrap();
    assert!(judge.dead_letter(&got[0].entry_id, got[0].deliveries, "test").await.unwrap(), "rrm dead-letters");
    let verdict = Verdict::Judged(Judgement {
        trace: "t".into(),
        critique: "c".into(),
        score: 0.5,
        judge_id: "reference".into(),
        latency_ms: 1,
    });
    let id = TrajectoryId(9);
    critique::send(&rrm, &keys, &[(id, &verdict)], Duration::from_secs(60)).await.unwrap();
    let replies = critique::receive(&actor, &keys, &[id], Duration::from_secs(5)).await.unwrap();
    assert!(matches!(replies[&id], critique::Reply::Came(_)), "{:?}", replies[&id]);
    let mut train = Consumer::<Item>::new(&learner, keys.scored(), LEARNER_GROUP, "learner", q).await.unwrap();
    let trained = read_until(&mut train, 1).await;
    assert_eq!(trained[0].item, Item::new(1, 32));
    train.ack(&[trained[0].entry_id.clone()]).await.unwrap();

    // KEDA reads lag and lengths, nothing else.
    raw(&keda, &["XINFO", "GROUPS", &keys.rollouts()]).await.unwrap();
    raw(&keda, &["XLEN", &keys.scored()]).await.unwrap();
    raw(&keda, &["XPENDING", &keys.scored(), LEARNER_GROUP]).await.unwrap();

    // Refusals.
    let latest = keys.weights_latest();
    assert!(store(&actor).publish(PolicyVersion(2), &[tensor(&bytes)]).await.is_err(), "actor publishes");
    refused(&actor, &["SET", &latest, "99"]).await;
    refused(&actor, &["XADD", &keys.scored(), "*", "f", "v"]).await;
    refused(&actor, &["XGROUP", "DESTROY", &keys.rollouts(), RRM_GROUP]).await;
    assert!(store(&rrm).publish(PolicyVersion(2), &[tensor(&bytes)]).await.is_err(), "rrm publishes");
    refused(&rrm, &["SET", &latest, "99"]).await;
    refused(&rrm, &["PUBLISH", &keys.weights_notify(), "99"]).await;
    refused(&rrm, &["XACK", &keys.scored(), LEARNER_GROUP, &trained[0].entry_id]).await;
    refused(&learner, &["XADD", &keys.rollouts(), "*", "f", "v"]).await;
    refused(&learner, &["GET", &keys.critique_reply(id)]).await;
    refused(&keda, &["XADD", &keys.rollouts(), "*", "f", "v"]).await;
    refused(&keda, &["GET", &latest]).await;
    for user in [&learner, &actor, &rrm, &keda] {
        refused(user, &["FLUSHALL"]).await;
        refused(user, &["CONFIG", "SET", "maxmemory", "1"]).await;
        refused(user, &["KEYS", "*"]).await;
        refused(user, &["ACL", "LIST"]).await;
        refused(user, &["GET", "unrelated"]).await;
    }
    assert_eq!(store(&admin).latest_version().await.unwrap(), Some(PolicyVersion(1)), "version unchanged");
    let unauthenticated = RedisLink::connect(&c.server.url(), LinkSettings::default()).unwrap();
    assert!(unauthenticated.ping().await.is_err(), "the default user is off");
    raw(&admin, &["FLUSHALL"]).await.unwrap();
}
