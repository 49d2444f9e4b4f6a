//! A consumer that holds entries unacknowledged on purpose (the learner holds them until a
//! checkpoint covers their update): after a restart it gets each of its own entries back once,
//! and while it renews its lease with `keep`, nothing is reclaimed, recounted or dead-lettered.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use std::time::{Duration, Instant};

use crate::common::{link, server, Item};
use protocol::queue::{Consumer, Producer, QueueSettings};
use testkit::fast_queue;

const SRC: &str = "reagent:{t}:held";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_consumer_gets_each_of_its_held_entries_back_once() {
    let srv = server();
    let link = link(&srv);
    let settings = QueueSettings { read_count: 4, ..fast_queue() };
    let producer = Producer::<Item>::new(link.clone(), SRC, "g", settings).await.unwrap();
    producer.send_batch(&(0..10).map(|i| Item::new(i, 8)).collect::<Vec<_>>()).await.unwrap();
    let mut first = Consumer::<Item>::new(&link, SRC, "g", "holder", settings).await.unwrap();
    let mut held = 0;
    while held < 10 {
        held += first.next_batch().await.unwrap().len();
    }
    drop(first); // restarts under the same name, acknowledging nothing

    let mut again = Consumer::<Item>::new(&link, SRC, "g", "holder", settings).await.unwrap();
    let mut back = Vec::new();
    for _ in 0..6 {
        back.extend(again.next_batch().await.unwrap());
    }
    let mut ids: Vec<u64> = back.iter().map(|d| d.item.id).collect();
    ids.sort();
    assert_eq!(ids, (0..10).collect::<Vec<_>>(), "each held entry comes back exactly once, in pages");
    assert!(back.iter().all(|d| d.deliveries == 2));
    assert!(again.dead_letters(10).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_entries_are_neither_reclaimed_nor_dead_lettered() {
    let srv = server();
    let link = link(&srv);
    // A short lease, so several idle timeouts pass while the entries are kept; 1 s rather than
    // 100 ms, so a scheduler stall between two renewals on a busy machine does not reclaim.
    let settings = QueueSettings { claim_idle: Duration::from_secs(1), max_deliveries: 2, ..fast_queue() };
    let producer = Producer::<Item>::new(link.clone(), SRC, "g", settings).await.unwrap();
    producer.send_batch(&(0..3).map(|i| Item::new(i, 8)).collect::<Vec<_>>()).await.unwrap();
    let mut c = Consumer::<Item>::new(&link, SRC, "g", "learner", settings).await.unwrap();
    let mut held = Vec::new();
    while held.len() < 3 {
        held.extend(c.next_batch().await.unwrap().into_iter().map(|d| d.entry_id));
    }
    // Three idle timeouts pass; the lease is renewed well within each.
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(3) {
        assert_eq!(c.keep(&held).await.unwrap(), held);
        let again = c.next_batch().await.unwrap();
        assert!(again.is_empty(), "held entries were redelivered: {again:?}");
    }
    assert!(c.dead_letters(10).await.unwrap().is_empty());
    // Another consumer's entries are not touched: only the holder's own are kept.
    assert!(c.keep(&["0-1".to_string()]).await.unwrap().is_empty());
    assert_eq!(c.ack(&held).await.unwrap(), 3);
    assert!(c.keep(&held).await.unwrap().is_empty(), "acknowledged entries are no longer held");
}
