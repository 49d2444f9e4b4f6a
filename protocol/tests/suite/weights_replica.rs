//! Weight readers on Redis replicas (`weights.read_url`), against real redis-server processes:
//! a version published to the primary is fetched bit for bit through a replica and through a
//! replica of a replica; the `actor` ACL user reads from a replica carrying the same users; a
//! replica whose replication is cut only delays a version (it keeps serving the older, verified
//! one) and delivers the new one once replication resumes; and a reader whose replica is
//! unreachable falls back to the primary, counting the fallback.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use std::time::Duration;

use protocol::acl::{acl_file, random_password, AclUser};
use protocol::config::ReagentConfig;
use protocol::link::{LinkSettings, RedisLink};
use protocol::metrics::WEIGHTS_READ_FALLBACKS;
use protocol::redis_replica::{link_up, replicate, PrimaryAuth};
use protocol::redis_server::{RedisServer, RedisServerOptions, ServerAuth};
use protocol::weights::{NamedTensor, WeightSettings, WeightStore};
use protocol::wire::{DType, PolicyVersion, RunId};
use testkit::wait_until;

const RUN: &str = "fan";
const WAIT: Duration = Duration::from_secs(20);

fn run() -> RunId {
    RunId::new(RUN).unwrap()
}

fn settings() -> LinkSettings {
    LinkSettings {
        retry_for: Duration::from_secs(5),
        backoff_min: Duration::from_millis(10),
        ..LinkSettings::default()
    }
}

fn weights() -> WeightSettings {
    WeightSettings { chunk_bytes: 1000, poll_interval: Duration::from_millis(50), ..WeightSettings::default() }
}

/// A model of `bytes` pseudo-random bytes that differ by `seed`.
fn data(bytes: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..bytes)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

async fn publish(primary: &RedisLink, version: u64, bytes: &[u8]) {
    let tensor = NamedTensor { name: "w", shape: &[bytes.len() as i64 / 4], dtype: DType::F32, data: bytes };
    WeightStore::new(primary, &run(), weights()).publish(PolicyVersion(version), &[tensor]).await.unwrap();
}

/// A server replicating `primary` (through `admin` when given), once its first sync is done.
async fn replica_of(primary: &RedisServer, auth: Option<(&ServerAuth, &PrimaryAuth)>) -> (RedisServer, RedisLink) {
    let server =
        RedisServer::start(RedisServerOptions { auth: auth.map(|(a, _)| a.clone()), ..Default::default() }).unwrap();
    let url = match auth {
        Some((server_auth, _)) => format!("redis://admin:{}@127.0.0.1:{}", server_auth.admin_password, server.port()),
        None => server.url(),
    };
    let link = RedisLink::connect(&url, settings()).unwrap();
    replicate(&link, "127.0.0.1", primary.port(), auth.map(|(_, p)| p)).await.unwrap();
    wait_until("the replica's first sync", WAIT, || async { link_up(&link).await.unwrap() }).await;
    (server, link)
}

/// A reader that reads through `read` and writes nowhere.
fn reader(primary: &RedisLink, read: &RedisLink) -> WeightStore {
    WeightStore::new(primary, &run(), weights()).with_read_replica(read)
}

/// Waits until `store` shows `version` as latest, then fetches it.
async fn fetched(store: &WeightStore, version: u64) -> Vec<u8> {
    wait_until("the version on the reader's server", WAIT, || async {
        store.latest_version().await.unwrap() == Some(PolicyVersion(version))
    })
    .await;
    let set = store.fetch_latest().await.unwrap();
    assert_eq!(set.version(), PolicyVersion(version));
    set.tensor("w").unwrap().1.to_vec()
}

#[tokio::test]
async fn a_version_reaches_readers_on_a_replica_and_on_a_chained_replica_bit_for_bit() {
    let primary = RedisServer::start(RedisServerOptions::default()).unwrap();
    let plink = RedisLink::connect(&primary.url(), settings()).unwrap();
    let (a, alink) = replica_of(&primary, None).await;
    let (_c, clink) = replica_of(&a, None).await;
    let bytes = data(40_000, 1);
    publish(&plink, 1, &bytes).await;
    let (on_a, on_c) = (reader(&plink, &alink), reader(&plink, &clink));
    assert_eq!(fetched(&on_a, 1).await, bytes, "through the replica");
    assert_eq!(fetched(&on_c, 1).await, bytes, "through the replica of the replica");
    assert_eq!(on_c.read_endpoint(), clink.endpoint(), "read from the chained replica, no fallback");
    // Pub/sub reaches a watcher on the chained replica: PUBLISH is replicated.
    let mut watcher = on_c.subscribe(Some(PolicyVersion(1))).await;
    assert!(watcher.is_subscribed());
    let next = data(40_000, 2);
    publish(&plink, 2, &next).await;
    assert_eq!(watcher.next_version(WAIT).await.unwrap(), Some(PolicyVersion(2)));
    assert_eq!(fetched(&on_c, 2).await, next);
}

#[tokio::test]
async fn the_actor_user_reads_weights_from_a_replica_with_the_same_users() {
    let passwords: Vec<(AclUser, String)> = AclUser::ALL.iter().map(|u| (*u, random_password())).collect();
    let pw = |user| passwords.iter().find(|(u, _)| *u == user).unwrap().1.clone();
    let users: Vec<(AclUser, &str)> = passwords.iter().map(|(u, p)| (*u, p.as_str())).collect();
    let auth = ServerAuth { acl: acl_file(&users, RUN), admin_password: pw(AclUser::Admin) };
    let primary = RedisServer::start(RedisServerOptions { auth: Some(auth.clone()), ..Default::default() }).unwrap();
    let as_user = |srv: &RedisServer, user: AclUser| {
        let url = format!("redis://{}:{}@127.0.0.1:{}", user.name(), pw(user), srv.port());
        RedisLink::connect(&url, settings()).unwrap()
    };
    // The replica logs in to its primary as `replica`: replication and INFO, nothing else.
    let login = PrimaryAuth { user: AclUser::Replica.name().into(), password: pw(AclUser::Replica) };
    let (replica, _) = replica_of(&primary, Some((&auth, &login))).await;
    let replica_user = as_user(&primary, AclUser::Replica);
    let mut as_replica = replica_user.client().get_multiplexed_async_connection().await.unwrap();
    let latest = format!("reagent:{{{RUN}}}:weights:latest");
    for args in [vec!["GET", latest.as_str()], vec!["SET", "k", "v"], vec!["FLUSHALL"], vec!["SUBSCRIBE", "c"]] {
        let refused =
            redis::cmd(args[0]).arg(&args[1..]).query_async::<redis::Value>(&mut as_replica).await.unwrap_err();
        let text = refused.to_string().to_lowercase();
        assert!(
            text.contains("noperm") && text.contains("no permissions"),
            "the replica user may not {args:?}: {refused}"
        );
    }
    let info: String = redis::cmd("INFO").arg("replication").query_async(&mut as_replica).await.unwrap();
    assert!(info.contains("connected_slaves:1"), "{info}");
    let bytes = data(20_000, 3);
    publish(&as_user(&primary, AclUser::Learner), 1, &bytes).await;

    let actor = reader(&as_user(&primary, AclUser::Actor), &as_user(&replica, AclUser::Actor));
    assert_eq!(fetched(&actor, 1).await, bytes);
    assert_eq!(actor.read_endpoint(), as_user(&replica, AclUser::Actor).endpoint(), "no fallback");
    let before = WEIGHTS_READ_FALLBACKS.get();
    assert!(actor.subscribe(None).await.is_subscribed(), "the actor subscribes on the replica");
    assert_eq!(WEIGHTS_READ_FALLBACKS.get(), before);
}

#[tokio::test]
async fn a_replica_cut_off_from_its_primary_only_delays_a_version() {
    let primary = RedisServer::start(RedisServerOptions::default()).unwrap();
    let plink = RedisLink::connect(&primary.url(), settings()).unwrap();
    let (_replica, rlink) = replica_of(&primary, None).await;
    let old = data(30_000, 4);
    publish(&plink, 1, &old).await;
    let store = reader(&plink, &rlink);
    assert_eq!(fetched(&store, 1).await, old);
    let mut watcher = store.subscribe(Some(PolicyVersion(1))).await;

    // Cut replication: the replica follows a port where nothing listens, serving what it has.
    let nowhere = testkit::free_port().unwrap();
    replicate(&rlink, "127.0.0.1", nowhere, None).await.unwrap();
    let new = data(30_000, 5);
    publish(&plink, 2, &new).await;
    assert_eq!(watcher.next_version(Duration::from_millis(500)).await.unwrap(), None, "v2 is delayed, not announced");
    let set = store.fetch_latest().await.unwrap();
    assert_eq!(
        (set.version(), &set.tensor("w").unwrap().1[..]),
        (PolicyVersion(1), &old[..]),
        "the old version, whole"
    );
    assert_eq!(store.read_endpoint(), rlink.endpoint(), "a lagging replica is still read");

    // Replication resumes: the new version arrives, whole.
    replicate(&rlink, "127.0.0.1", primary.port(), None).await.unwrap();
    assert_eq!(watcher.next_version(WAIT).await.unwrap(), Some(PolicyVersion(2)));
    assert_eq!(fetched(&store, 2).await, new);
}

#[tokio::test]
async fn an_unreachable_replica_falls_back_to_the_primary_and_counts_it() {
    let primary = RedisServer::start(RedisServerOptions::default()).unwrap();
    let plink = RedisLink::connect(&primary.url(), settings()).unwrap();
    let bytes = data(10_000, 6);
    publish(&plink, 1, &bytes).await;
    let nowhere = format!("redis://127.0.0.1:{}", testkit::free_port().unwrap());
    let cfg = ReagentConfig::from_toml_str(&format!(
        "[redis]\nurl = \"{}\"\nconnect_timeout_ms = 300\n[weights]\nread_url = \"{nowhere}\"\n",
        primary.url()
    ))
    .unwrap();
    cfg.validate().unwrap();
    let store = WeightStore::reader(&cfg, &RedisLink::from_config(&cfg.redis).unwrap(), &run()).unwrap();
    assert!(store.read_endpoint().contains(&nowhere), "reads try the replica first");
    let before = WEIGHTS_READ_FALLBACKS.get();
    let started = std::time::Instant::now();
    let set = store.fetch_latest().await.unwrap();
    assert_eq!(&set.tensor("w").unwrap().1[..], &bytes[..], "fetched from the primary");
    assert!(started.elapsed() < Duration::from_secs(10), "fell back within the connect deadline, not redis.retry_for");
    assert!(WEIGHTS_READ_FALLBACKS.get() > before, "the fallback is counted");
    assert_eq!(store.read_endpoint(), plink.endpoint(), "reads stay on the primary for a while");
}

#[test]
fn a_read_url_that_is_not_a_redis_url_is_refused_naming_the_key() {
    // Loading validates.
    let err = ReagentConfig::from_toml_str("[weights]\nread_url = \"http://cache:6379\"\n").unwrap_err().to_string();
    assert!(err.contains("weights.read_url"), "{err}");
}
