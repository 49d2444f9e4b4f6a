//! The pipelined acknowledgement and read (`Consumer::ack_and_next`) and the trim script,
//! against a real redis-server: every entry is delivered once and acknowledged once, the
//! acknowledgement's outcome is not held back by a blocking read, a server that lost its
//! scripts still gets both, and trimming waits for the slowest group.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use std::collections::HashSet;
use std::time::{Duration, Instant};

use crate::common::{link, pending, server, xlen, Item};
use protocol::queue::{stream_depth, trim_acknowledged, Consumer, Producer, QueueSettings};
use testkit::fast_queue;

const SRC: &str = "reagent:{t}:acknext";

fn ids<T>(batch: &[protocol::queue::Delivery<T>]) -> Vec<String> {
    batch.iter().map(|d| d.entry_id.clone()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_batch_is_acknowledged_with_the_read_of_the_next() {
    let srv = server();
    let link = link(&srv);
    // A long block: a read sent with an acknowledgement must not wait for it.
    let settings = QueueSettings { read_count: 10, block: Duration::from_secs(5), trim_every: 15, ..fast_queue() };
    let producer = Producer::<Item>::new(link.clone(), SRC, "g", settings).await.unwrap();
    producer.send_batch(&(0..35).map(|i| Item::new(i, 64)).collect::<Vec<_>>()).await.unwrap();
    let mut c = Consumer::<Item>::new(&link, SRC, "g", "c", settings).await.unwrap();

    let mut batch = c.next_batch().await.unwrap();
    let mut seen: HashSet<u64> = batch.iter().map(|d| d.item.id).collect();
    let mut acked = 0;
    while !batch.is_empty() {
        let started = Instant::now();
        let (n, next) = c.ack_and_next(&ids(&batch)).await.unwrap();
        assert!(started.elapsed() < Duration::from_secs(2), "the read waited with an acknowledgement in flight");
        assert_eq!(n, batch.len() as u64, "every entry of the batch was still pending");
        acked += n;
        assert_eq!(pending(&link, SRC, "g").await, next.len() as u64, "only the new batch is pending");
        for d in &next {
            assert!(seen.insert(d.item.id), "{} delivered twice", d.item.id);
        }
        batch = next;
    }
    assert_eq!((acked, seen.len()), (35, 35));
    assert_eq!(stream_depth(&link, SRC).await.unwrap(), 0, "nothing undelivered or unacknowledged");
    // 35 acknowledgements at trim_every 15: the trim ran with them, inside the same calls.
    assert!(xlen(&link, SRC).await < 35, "acknowledged entries were trimmed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_entries_than_one_script_call_takes_are_acknowledged_at_once() {
    let srv = server();
    let link = link(&srv);
    let settings = QueueSettings { read_count: 1300, ..fast_queue() };
    let producer = Producer::<Item>::new(link.clone(), SRC, "g", settings).await.unwrap();
    let items: Vec<Item> = (0..1300).map(|i| Item::new(i, 8)).collect();
    for chunk in items.chunks(200) {
        producer.send_batch(chunk).await.unwrap();
    }
    let mut c = Consumer::<Item>::new(&link, SRC, "g", "c", settings).await.unwrap();
    let batch = crate::common::read(&mut c, 1300).await;
    let (n, next) = c.ack_and_next(&ids(&batch)).await.unwrap();
    assert_eq!((n, next.len()), (1300, 0));
    assert_eq!(pending(&link, SRC, "g").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_lost_its_scripts_still_gets_the_acknowledgement_and_the_batch() {
    let srv = server();
    let link = link(&srv);
    let settings = QueueSettings { read_count: 5, ..fast_queue() };
    let producer = Producer::<Item>::new(link.clone(), SRC, "g", settings).await.unwrap();
    producer.send_batch(&(0..5).map(|i| Item::new(i, 16)).collect::<Vec<_>>()).await.unwrap();
    let mut c = Consumer::<Item>::new(&link, SRC, "g", "c", settings).await.unwrap();
    let first = c.next_batch().await.unwrap();
    let (n, next) = c.ack_and_next(&ids(&first[..1])).await.unwrap(); // the script is loaded now
    assert_eq!((n, next.len()), (1, 0));
    producer.send_batch(&(5..10).map(|i| Item::new(i, 16)).collect::<Vec<_>>()).await.unwrap();
    link.call("script flush", Duration::ZERO, |mut c| async move {
        redis::cmd("SCRIPT").arg("FLUSH").query_async::<()>(&mut c).await
    })
    .await
    .unwrap();
    // The pipelined EVALSHA fails with NOSCRIPT; the read in the same pipeline is answered.
    let (n, next) = c.ack_and_next(&ids(&first[1..])).await.unwrap();
    assert_eq!(n, 4, "acknowledged once more on its own");
    assert_eq!(next.iter().map(|d| d.item.id).collect::<Vec<_>>(), vec![5, 6, 7, 8, 9]);
    assert_eq!(pending(&link, SRC, "g").await, 5, "only the new batch is pending");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_trim_waits_for_the_slowest_group() {
    let srv = server();
    let link = link(&srv);
    let settings = QueueSettings { read_count: 100, trim_every: 1, ..fast_queue() };
    let producer = Producer::<Item>::new(link.clone(), SRC, "fast", settings).await.unwrap();
    let mut fast = Consumer::<Item>::new(&link, SRC, "fast", "f", settings).await.unwrap();
    let mut slow = Consumer::<Item>::new(&link, SRC, "slow", "s", settings).await.unwrap();
    producer.send_batch(&(0..20).map(|i| Item::new(i, 8)).collect::<Vec<_>>()).await.unwrap();

    let all = crate::common::read(&mut fast, 20).await;
    fast.ack(&ids(&all)).await.unwrap();
    assert_eq!(xlen(&link, SRC).await, 20, "group `slow` has read nothing: nothing is trimmed");

    let slow_all = crate::common::read(&mut slow, 20).await;
    slow.ack(&ids(&slow_all[..10])).await.unwrap();
    // `slow` still holds entries 10..20: the oldest of them bounds the trim.
    assert_eq!(xlen(&link, SRC).await, 10);
    assert_eq!(trim_acknowledged(&link, SRC).await.unwrap(), 0, "trimming again removes nothing more");
    slow.ack(&ids(&slow_all[10..])).await.unwrap();
    assert!(xlen(&link, SRC).await <= 1, "all but the last delivered entry are gone");
    assert_eq!(trim_acknowledged(&link, "reagent:{t}:no-such-stream").await.unwrap(), 0);
}
