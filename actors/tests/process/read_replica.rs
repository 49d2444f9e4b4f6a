//! An actor whose `weights.read_url` is a replica of the job's Redis: it reads weights there
//! (the replica's own counters show the chunk reads; nothing fell back to the primary) and
//! serves the version the learner published to the primary.

use std::time::Duration;

use protocol::link::{LinkSettings, RedisLink};
use protocol::metrics::WEIGHTS_READ_FALLBACKS;
use protocol::redis_replica::{link_up, replicate};
use protocol::redis_server::{RedisServer, RedisServerOptions};
use protocol::wire::PolicyVersion;

use crate::common::*;

/// Calls of `command` the server behind `link` has answered (INFO commandstats).
async fn calls(link: &RedisLink, command: &str) -> u64 {
    let info: String = link
        .call("info commandstats", Duration::ZERO, |mut c| async move {
            redis::cmd("INFO").arg("commandstats").query_async(&mut c).await
        })
        .await
        .unwrap();
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|rest| rest.split(',').next()?.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_actor_reads_weights_through_its_replica_and_serves_the_published_version() {
    let h = Harness::new();
    let replica = RedisServer::start(RedisServerOptions::default()).unwrap();
    let rlink = RedisLink::connect(&replica.url(), LinkSettings::default()).unwrap();
    replicate(&rlink, "127.0.0.1", h.redis.port(), None).await.unwrap();
    wait_until("the replica's first sync", || async { link_up(&rlink).await.unwrap() }).await;

    let mut cfg = h.config("outcome", "");
    cfg.weights.read_url = replica.url();
    let process = Process::start(cfg);
    wait_until("a first group at v0", || async { !h.rollouts().await.is_empty() }).await;
    let mgets_before = calls(&rlink, "mget").await;

    publish_weights(&h.store(), PolicyVersion(1)).await;
    wait_until("a trajectory generated with v1", || async {
        h.rollouts().await.iter().any(|t| t.policy_version == PolicyVersion(1))
    })
    .await;
    assert!(calls(&rlink, "mget").await > mgets_before, "the chunks were read from the replica");
    assert_eq!(WEIGHTS_READ_FALLBACKS.get(), 0, "no read fell back to the primary");
    let (report, _) = process.leave().await;
    assert_eq!(count(&report, "weight_swaps"), 1, "v1 swapped in: {report}");
}
