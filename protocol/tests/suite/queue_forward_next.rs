//! The pipelined forward and read (`Consumer::forward_and_next`) against a real redis-server:
//! each item reaches the next stream exactly once across a consumer that dies between calls and
//! across a reclaim by another consumer; a batch costs one round trip (counted at a TCP relay
//! between the consumer and Redis, and the commands with INFO commandstats); a server that lost its scripts still gets the forward and returns the batch;
//! an undecodable entry read with a forward is dead-lettered.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::common::{count_ids, link, pending, server, Item};
use protocol::link::RedisLink;
use protocol::queue::{Consumer, Delivery, Producer, QueueSettings};
use protocol::redis_server::RedisServer;
use testkit::fast_queue;

const SRC: &str = "reagent:{t}:fwd-in";
const OUT: &str = "reagent:{t}:fwd-out";

/// No reclaim falls due while a test runs, so every call after the first may pipeline.
fn settings(read_count: usize) -> QueueSettings {
    QueueSettings { read_count, claim_idle: Duration::from_secs(120), trim_every: 10_000, ..fast_queue() }
}

fn moves(batch: &[Delivery<Item>]) -> Vec<(String, Item)> {
    batch.iter().map(|d| (d.entry_id.clone(), d.item.clone())).collect()
}

async fn send(link: &RedisLink, ids: std::ops::Range<u64>) {
    let producer = Producer::<Item>::new(link.clone(), SRC, "g", settings(16)).await.unwrap();
    producer.send_batch(&ids.map(|i| Item::new(i, 32)).collect::<Vec<_>>()).await.unwrap();
}

/// Calls per command since the last reset, from INFO commandstats.
async fn command_calls(link: &RedisLink) -> HashMap<String, u64> {
    let info: String = link
        .call("info", Duration::ZERO, |mut c| async move {
            redis::cmd("INFO").arg("commandstats").query_async(&mut c).await
        })
        .await
        .unwrap();
    info.lines()
        .filter_map(|l| {
            let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = rest.split(',').find_map(|kv| kv.strip_prefix("calls="))?;
            Some((name.to_string(), calls.parse().ok()?))
        })
        .collect()
}

/// A TCP relay to Redis that counts round trips: a round trip starts when the client sends
/// after the server last spoke (a pipeline's commands, sent together, start one). Payloads in
/// these tests are small, so a pipeline arrives in one piece.
struct Relay {
    url: String,
    round_trips: Arc<AtomicU64>,
}

impl Relay {
    async fn start(redis_port: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("redis://{}", listener.local_addr().unwrap());
        let round_trips = Arc::new(AtomicU64::new(0));
        let counter = round_trips.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let server = TcpStream::connect(("127.0.0.1", redis_port)).await.unwrap();
                let server_spoke = Arc::new(AtomicBool::new(true));
                let (mut cr, mut cw) = client.into_split();
                let (mut sr, mut sw) = server.into_split();
                let (spoke, counter) = (server_spoke.clone(), counter.clone());
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 1 << 16];
                    while let Ok(n @ 1..) = cr.read(&mut buf).await {
                        if spoke.swap(false, Ordering::SeqCst) {
                            counter.fetch_add(1, Ordering::SeqCst);
                        }
                        if sw.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                });
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 1 << 16];
                    while let Ok(n @ 1..) = sr.read(&mut buf).await {
                        server_spoke.store(true, Ordering::SeqCst);
                        if cw.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        Self { url, round_trips }
    }

    fn round_trips(&self) -> u64 {
        self.round_trips.load(Ordering::SeqCst)
    }
}

async fn admin(link: &RedisLink, args: &'static [&'static str]) {
    link.call("admin", Duration::ZERO, |mut c| async move {
        redis::cmd(args[0]).arg(&args[1..]).query_async::<()>(&mut c).await
    })
    .await
    .unwrap();
}

/// A server holding items `0..n` on SRC, a producer for OUT, and consumer `w` reading `read`
/// at a time.
async fn setup(n: u64, read: usize) -> (RedisServer, RedisLink, Producer<Item>, Consumer<Item>) {
    let srv = server();
    let link = link(&srv);
    send(&link, 0..n).await;
    let out = Producer::<Item>::new(link.clone(), OUT, "sink", settings(read)).await.unwrap();
    let c = Consumer::<Item>::new(&link, SRC, "g", "w", settings(read)).await.unwrap();
    (srv, link, out, c)
}

/// Forwards batches, starting with `batch`, until one comes back empty; returns how many.
async fn drain(c: &mut Consumer<Item>, out: &Producer<Item>, mut batch: Vec<Delivery<Item>>) -> usize {
    let mut forwarded = 0;
    while !batch.is_empty() {
        let (moved, next) = c.forward_and_next(out, &moves(&batch)).await.unwrap();
        assert_eq!(moved.len(), batch.len(), "every entry of the batch was still ours");
        forwarded += moved.len();
        batch = next;
    }
    forwarded
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_item_is_forwarded_once_across_a_consumer_dying_between_calls() {
    let (_srv, link, out, mut first) = setup(20, 5).await;
    let mut batch = first.next_batch().await.unwrap();
    for _ in 0..2 {
        let (moved, next) = first.forward_and_next(&out, &moves(&batch)).await.unwrap();
        assert_eq!(moved.len(), 5);
        assert_eq!(
            pending(&link, SRC, "g").await,
            next.len() as u64,
            "the forwarded batch was acknowledged with the read"
        );
        batch = next;
    }
    let unforwarded: Vec<u64> = batch.iter().map(|d| d.item.id).collect();
    assert_eq!(unforwarded, vec![10, 11, 12, 13, 14], "the third batch came with the second forward");
    drop(first); // dies holding the third batch, read by the pipelined call, not forwarded

    let mut again = Consumer::<Item>::new(&link, SRC, "g", "w", settings(5)).await.unwrap();
    let back = again.next_batch().await.unwrap();
    assert_eq!(back.iter().map(|d| d.item.id).collect::<Vec<_>>(), unforwarded, "taken back first");
    assert!(back.iter().all(|d| d.failures == 1), "in progress when its consumer died: one failed delivery each");
    let forwarded = drain(&mut again, &out, back).await;
    assert_eq!(forwarded, 10);

    let counts = count_ids(&link, OUT).await;
    assert_eq!(counts.len(), 20, "every item reached the next stream: {counts:?}");
    assert!(counts.values().all(|&n| n == 1), "an item forwarded twice: {counts:?}");
    assert_eq!(pending(&link, SRC, "g").await, 0);
    assert!(again.dead_letters(10).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_reclaimed_meanwhile_is_not_forwarded_twice() {
    let srv = server();
    let link = link(&srv);
    send(&link, 0..4).await;
    let quick = QueueSettings { claim_idle: Duration::from_millis(300), ..settings(4) };
    let out = Producer::<Item>::new(link.clone(), OUT, "sink", quick).await.unwrap();
    let mut slow = Consumer::<Item>::new(&link, SRC, "g", "slow", quick).await.unwrap();
    let mut other = Consumer::<Item>::new(&link, SRC, "g", "other", quick).await.unwrap();
    let held = slow.next_batch().await.unwrap();
    assert_eq!(held.len(), 4);

    let started = Instant::now();
    let mut reclaimed = Vec::new();
    while reclaimed.len() < 4 {
        assert!(started.elapsed() < Duration::from_secs(10), "the idle batch was never reclaimed");
        reclaimed.extend(other.next_batch().await.unwrap());
    }
    let (moved, _) = other.forward_and_next(&out, &moves(&reclaimed)).await.unwrap();
    assert_eq!(moved.len(), 4);
    // The slow consumer comes back with its batch: nothing of it is its own any more.
    let (moved, next) = slow.forward_and_next(&out, &moves(&held)).await.unwrap();
    assert!(moved.is_empty() && next.is_empty(), "moved {moved:?}, read {next:?}");
    let counts = count_ids(&link, OUT).await;
    assert_eq!((counts.len(), counts.values().all(|&n| n == 1)), (4, true), "{counts:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_costs_one_round_trip() {
    let srv = server();
    let link = link(&srv);
    send(&link, 0..60).await;
    let relay = Relay::start(srv.port()).await;
    let relayed = RedisLink::connect(&relay.url, protocol::link::LinkSettings::default()).unwrap();
    let out = Producer::<Item>::new(link.clone(), OUT, "sink", settings(10)).await.unwrap();
    let mut c = Consumer::<Item>::new(&relayed, SRC, "g", "w", settings(10)).await.unwrap();
    let first = c.next_batch().await.unwrap(); // recovery and reclaim checks: not counted
    let (_, batch) = c.forward_and_next(&out, &moves(&first)).await.unwrap(); // loads the script
    assert_eq!(batch.len(), 10);
    admin(&link, &["CONFIG", "RESETSTAT"]).await;

    let before = relay.round_trips();
    let (mut calls, mut batch) = (0u64, batch);
    while !batch.is_empty() {
        let (moved, next) = c.forward_and_next(&out, &moves(&batch)).await.unwrap();
        assert_eq!(moved.len(), batch.len());
        calls += 1;
        batch = next;
    }
    let round_trips = relay.round_trips() - before;
    let stats = command_calls(&link).await;
    let n = |name: &str| stats.get(name).copied().unwrap_or(0);
    println!("{calls} calls, {round_trips} round trips of the consumer: {stats:?}");
    assert_eq!(calls, 5, "batches 2-6 forwarded, the last read empty");
    assert_eq!(round_trips, calls, "one round trip per batch");
    // What each round trip carried: the forward script and the read.
    assert_eq!((n("evalsha"), n("xreadgroup")), (calls, calls), "{stats:?}");
    // Inside the scripts, once per entry forwarded.
    assert_eq!((n("xadd"), n("xack")), (50, 50), "{stats:?}");
    for absent in ["eval", "script|load", "xclaim", "hset", "xtrim"] {
        assert_eq!(n(absent), 0, "{absent}: {stats:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_lost_its_scripts_still_gets_the_forward_and_returns_the_batch() {
    let (_srv, link, out, mut c) = setup(10, 5).await;
    let first = c.next_batch().await.unwrap();
    admin(&link, &["SCRIPT", "FLUSH"]).await;
    // The pipelined EVALSHA fails with NOSCRIPT; the read in the same pipeline is answered.
    let (moved, next) = c.forward_and_next(&out, &moves(&first)).await.unwrap();
    assert_eq!(moved.len(), 5, "forwarded once more on its own");
    assert_eq!(next.iter().map(|d| d.item.id).collect::<Vec<_>>(), vec![5, 6, 7, 8, 9]);
    assert_eq!(pending(&link, SRC, "g").await, 5, "only the new batch is pending");
    let counts = count_ids(&link, OUT).await;
    assert_eq!((counts.len(), counts.values().all(|&n| n == 1)), (5, true), "{counts:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undecodable_entry_read_with_a_forward_is_dead_lettered() {
    let (_srv, link, out, mut c) = setup(3, 3).await;
    let first = c.next_batch().await.unwrap();
    link.call("xadd", Duration::ZERO, |mut c| async move {
        redis::cmd("XADD")
            .arg(SRC)
            .arg("*")
            .arg("id")
            .arg("poison")
            .arg("p")
            .arg("not a payload")
            .query_async::<String>(&mut c)
            .await
    })
    .await
    .unwrap();
    send(&link, 3..4).await;
    let (moved, next) = c.forward_and_next(&out, &moves(&first)).await.unwrap();
    assert_eq!(moved.len(), 3);
    assert_eq!(next.iter().map(|d| d.item.id).collect::<Vec<_>>(), vec![3], "the poison pill is not returned");
    let dead = c.dead_letters(10).await.unwrap();
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(pending(&link, SRC, "g").await, 1, "the poison pill left the pending list with its dead letter");
}
