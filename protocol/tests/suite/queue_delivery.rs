//! Delivery guarantees of the Redis Streams queue against a real redis-server: with several
//! producers and consumers, and consumers that die mid-batch or stall past the idle timeout,
//! every entry is forwarded exactly once (counted by id).
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::{count_ids, link, server, Item};
use proptest::prelude::*;
use protocol::queue::{Consumer, Producer};
use testkit::{fast_queue, wait_until};

const SRC: &str = "reagent:{t}:in";
const OUT: &str = "reagent:{t}:out";

/// Runs producers → consumers (forwarding to OUT) and returns how often each id reached OUT.
/// Consumer 0 dies (drops its batch unforwarded and unacknowledged) after `kill_after` batches.
async fn pipeline(
    producers: usize,
    consumers: usize,
    items: u64,
    kill_after: Option<usize>,
) -> std::collections::HashMap<String, usize> {
    let srv = server();
    let link = link(&srv);
    let settings = fast_queue();
    let out = Arc::new(Producer::<Item>::new(link.clone(), OUT, "sink", settings).await.unwrap());
    let stop = Arc::new(AtomicBool::new(false));

    let mut workers = Vec::new();
    for c in 0..consumers {
        let (link, out, stop) = (link.clone(), out.clone(), stop.clone());
        workers.push(tokio::spawn(async move {
            let mut consumer = Consumer::<Item>::new(&link, SRC, "g", format!("c{c}"), settings).await.unwrap();
            let mut batches = 0;
            while !stop.load(Ordering::Relaxed) {
                let batch = consumer.next_batch().await.unwrap();
                if batch.is_empty() {
                    continue;
                }
                batches += 1;
                if c == 0 && kill_after.is_some_and(|k| batches > k) {
                    return; // dies holding `batch`: pending, never acknowledged
                }
                let moves: Vec<(String, Item)> = batch.into_iter().map(|d| (d.entry_id, d.item)).collect();
                consumer.forward(&out, &moves).await.unwrap();
            }
        }));
    }

    let mut senders = Vec::new();
    for p in 0..producers as u64 {
        let link = link.clone();
        senders.push(tokio::spawn(async move {
            let producer = Producer::<Item>::new(link, SRC, "g", settings).await.unwrap();
            let mine: Vec<Item> = (0..items).filter(|i| i % producers as u64 == p).map(|i| Item::new(i, 32)).collect();
            for chunk in mine.chunks(7) {
                producer.send_batch(chunk).await.unwrap();
            }
        }));
    }
    for s in senders {
        s.await.unwrap();
    }
    wait_until("every id forwarded", Duration::from_secs(30), || async {
        count_ids(&link, OUT).await.len() as u64 == items
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.await.unwrap();
    }
    count_ids(&link, OUT).await
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    #[test]
    fn no_entry_lost_or_duplicated(producers in 1usize..=3, consumers in 2usize..=4, items in 1u64..=150, kill in proptest::option::of(0usize..=3)) {
        let counts = runtime().block_on(pipeline(producers, consumers, items, kill));
        prop_assert_eq!(counts.len() as u64, items);
        for i in 0..items {
            prop_assert_eq!(counts.get(&i.to_string()).copied(), Some(1), "id {} forwarded once", i);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_consumers_batch_is_reclaimed_by_another() {
    let counts = pipeline(1, 2, 40, Some(0)).await;
    assert_eq!(counts.len(), 40);
    assert!(counts.values().all(|&n| n == 1), "{counts:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_consumer_cannot_forward_what_was_reclaimed() {
    let srv = server();
    let link = link(&srv);
    let settings = fast_queue();
    let producer = Producer::<Item>::new(link.clone(), SRC, "g", settings).await.unwrap();
    let out = Producer::<Item>::new(link.clone(), OUT, "sink", settings).await.unwrap();
    producer.send_batch(&(0..5).map(|i| Item::new(i, 8)).collect::<Vec<_>>()).await.unwrap();

    let mut slow = Consumer::<Item>::new(&link, SRC, "g", "slow", settings).await.unwrap();
    let held = slow.next_batch().await.unwrap();
    assert_eq!(held.len(), 5);

    // The slow consumer stalls past the idle timeout; a live one takes its entries.
    let mut live = Consumer::<Item>::new(&link, SRC, "g", "live", settings).await.unwrap();
    let mut reclaimed = Vec::new();
    let started = std::time::Instant::now();
    while reclaimed.len() < 5 {
        assert!(started.elapsed() < Duration::from_secs(10), "entries were not reclaimed");
        reclaimed.extend(live.next_batch().await.unwrap());
    }
    assert!(reclaimed.iter().all(|d| d.deliveries == 2), "second delivery of each");
    let forwarded =
        live.forward(&out, &reclaimed.into_iter().map(|d| (d.entry_id, d.item)).collect::<Vec<_>>()).await.unwrap();
    assert_eq!(forwarded.len(), 5);

    // The stalled consumer wakes up and tries to forward what it held: nothing goes through.
    let late = slow.forward(&out, &held.into_iter().map(|d| (d.entry_id, d.item)).collect::<Vec<_>>()).await.unwrap();
    assert!(late.is_empty(), "stale owner forwarded {late:?}");
    let counts = count_ids(&link, OUT).await;
    assert_eq!(counts.len(), 5);
    assert!(counts.values().all(|&n| n == 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_consumer_takes_back_its_own_entries_first() {
    let srv = server();
    let link = link(&srv);
    let settings = fast_queue();
    let producer = Producer::<Item>::new(link.clone(), SRC, "g", settings).await.unwrap();
    producer.send_batch(&(0..3).map(|i| Item::new(i, 8)).collect::<Vec<_>>()).await.unwrap();
    let mut first = Consumer::<Item>::new(&link, SRC, "g", "worker-a", settings).await.unwrap();
    assert_eq!(first.next_batch().await.unwrap().len(), 3);
    drop(first); // the process restarts under the same name
    let mut again = Consumer::<Item>::new(&link, SRC, "g", "worker-a", settings).await.unwrap();
    let back = again.next_batch().await.unwrap();
    let mut ids: Vec<u64> = back.iter().map(|d| d.item.id).collect();
    ids.sort();
    assert_eq!(ids, vec![0, 1, 2]);
    assert!(back.iter().all(|d| d.deliveries == 2));
    let acked = again.ack(&back.iter().map(|d| d.entry_id.clone()).collect::<Vec<_>>()).await.unwrap();
    assert_eq!(acked, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_entries_are_trimmed_and_pending_ones_are_not() {
    let srv = server();
    let link = link(&srv);
    let settings = protocol::queue::QueueSettings { trim_every: 1, read_count: 10, ..fast_queue() };
    let producer = Producer::<Item>::new(link.clone(), SRC, "g", settings).await.unwrap();
    producer.send_batch(&(0..20).map(|i| Item::new(i, 8)).collect::<Vec<_>>()).await.unwrap();
    let mut c = Consumer::<Item>::new(&link, SRC, "g", "c", settings).await.unwrap();
    let first = c.next_batch().await.unwrap(); // ids 0..10, left pending
    let second = c.next_batch().await.unwrap(); // ids 10..20
    c.ack(&second.iter().map(|d| d.entry_id.clone()).collect::<Vec<_>>()).await.unwrap();
    // The pending first batch protects everything from its oldest entry on.
    assert_eq!(crate::common::xlen(&link, SRC).await, 20);
    c.ack(&first.iter().map(|d| d.entry_id.clone()).collect::<Vec<_>>()).await.unwrap();
    // Everything acknowledged: all but the last delivered entry are gone.
    assert!(crate::common::xlen(&link, SRC).await <= 1);
    assert_eq!(protocol::queue::stream_depth(&link, SRC).await.unwrap(), 0, "nothing undelivered or unacknowledged");
}
