//! The Redis server is killed mid-stream (SIGKILL, append-only file on with `appendfsync
//! always`) and restarted on the same port: producers and consumers reconnect by themselves,
//! and every entry whose write Redis acknowledged reaches the output stream.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::{count_ids, link, server, Item};
use protocol::queue::{Consumer, Producer};
use testkit::{fast_queue, wait_until};
use tokio::sync::Notify;

const SRC: &str = "reagent:{t}:in";
const OUT: &str = "reagent:{t}:out";
const ITEMS: u64 = 400;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producers_and_consumers_ride_out_a_redis_restart() {
    let mut srv = server();
    let link = link(&srv);
    let settings = fast_queue();
    let out = Arc::new(Producer::<Item>::new(link.clone(), OUT, "sink", settings).await.unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let acknowledged = Arc::new(Mutex::new(HashSet::new()));

    let workers: Vec<_> = (0..2)
        .map(|c| {
            let (link, out, stop) = (link.clone(), out.clone(), stop.clone());
            tokio::spawn(async move {
                let mut consumer = Consumer::<Item>::new(&link, SRC, "g", format!("c{c}"), settings).await.unwrap();
                while !stop.load(Ordering::Relaxed) {
                    let batch = consumer.next_batch().await.expect("reads survive the restart");
                    let moves: Vec<(String, Item)> = batch.into_iter().map(|d| (d.entry_id, d.item)).collect();
                    consumer.forward(&out, &moves).await.expect("forwards survive the restart");
                }
            })
        })
        .collect();

    // The producer writes the first half, then waits until Redis is down and writes the
    // second half into the outage: its writes must retry until the server is back.
    let (half_sent, redis_down) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let sender = {
        let (link, acknowledged) = (link.clone(), acknowledged.clone());
        let (half_sent, redis_down) = (half_sent.clone(), redis_down.clone());
        tokio::spawn(async move {
            let producer = Producer::<Item>::new(link, SRC, "g", settings).await.unwrap();
            for chunk in (0..ITEMS).collect::<Vec<_>>().chunks(5) {
                if chunk[0] == ITEMS / 2 {
                    half_sent.notify_one();
                    redis_down.notified().await;
                }
                let items: Vec<Item> = chunk.iter().map(|&i| Item::new(i, 64)).collect();
                producer.send_batch(&items).await.expect("writes survive the restart");
                acknowledged.lock().unwrap().extend(chunk.iter().map(|i| i.to_string()));
            }
        })
    };

    half_sent.notified().await;
    wait_until("a third of the stream forwarded", Duration::from_secs(20), || async {
        count_ids(&link, OUT).await.len() as u64 >= ITEMS / 3
    })
    .await;
    let retries_before = retries();
    srv.kill();
    redis_down.notify_one();
    // Someone (the producer, or a consumer) is now failing and retrying against the dead server.
    wait_until("clients retrying against the dead server", Duration::from_secs(10), || async {
        retries() > retries_before
    })
    .await;
    srv.restart().expect("redis-server restarts from its append-only file");

    sender.await.unwrap();
    let written: HashSet<String> = acknowledged.lock().unwrap().clone();
    assert_eq!(written.len() as u64, ITEMS);
    wait_until("every acknowledged write forwarded", Duration::from_secs(30), || async {
        let got = count_ids(&link, OUT).await;
        written.iter().all(|id| got.contains_key(id))
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.await.unwrap();
    }
    let got = count_ids(&link, OUT).await;
    // At-least-once: a write whose reply was lost in the crash may be retried, so an id may
    // appear twice in the stream (the learner applies by id); none may be missing.
    let duplicates: usize = got.values().map(|n| n - 1).sum();
    assert!(duplicates <= 10, "{duplicates} duplicates: more than the writes in flight at the crash");
    assert!(written.iter().all(|id| got.contains_key(id)));
    eprintln!("restart: {} ids forwarded, {duplicates} duplicates, {} retries", got.len(), retries());
}

fn retries() -> u64 {
    ["xadd", "xreadgroup", "move owned", "xpending", "xinfo groups", "xclaim"]
        .iter()
        .map(|op| protocol::metrics::REDIS_RETRIES.with_label_values(&[op]).get())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_recreates_its_group_after_redis_lost_its_data() {
    use protocol::redis_server::{RedisServer, RedisServerOptions};
    let mut srv = RedisServer::start(RedisServerOptions { appendonly: false, ..Default::default() }).unwrap();
    let link = link(&srv);
    let settings = fast_queue();
    let producer = Producer::<Item>::new(link.clone(), SRC, "g", settings).await.unwrap();
    let mut consumer = Consumer::<Item>::new(&link, SRC, "g", "c", settings).await.unwrap();
    producer.send(&Item::new(1, 8)).await.unwrap();
    let first = consumer.next_batch().await.unwrap();
    assert_eq!(first.len(), 1);

    srv.kill();
    srv.restart().unwrap(); // no append-only file: the stream and its group are gone
    producer.send(&Item::new(2, 8)).await.unwrap(); // recreates the stream, without the group

    let started = std::time::Instant::now();
    let mut got = Vec::new();
    while got.is_empty() {
        assert!(started.elapsed() < Duration::from_secs(10), "consumer never recovered");
        got = consumer.next_batch().await.expect("a missing group is recreated, not fatal");
    }
    assert_eq!(got.iter().map(|d| d.item.id).collect::<Vec<_>>(), vec![2]);
}
