//! Restarts are not failures, poison still is: a consumer restarted ten times while it holds
//! processed, unacknowledged entries (as the learner holds applied ones until a checkpoint)
//! dead-letters none of them, while an entry that kills its consumer each time it is processed
//! reaches the dead-letter stream after `max_deliveries` failed deliveries.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use crate::common::{link, read, server, Item};
use protocol::queue::{Consumer, Delivery, Producer, QueueSettings};
use testkit::fast_queue;

const SRC: &str = "reagent:{t}:failures";
const RESTARTS: u64 = 10;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_restarts_holding_processed_entries_dead_letter_nothing() {
    let srv = server();
    let link = link(&srv);
    let settings = QueueSettings { max_deliveries: 3, ..fast_queue() };
    let producer = Producer::<Item>::new(link.clone(), SRC, "g", settings).await.unwrap();
    producer.send_batch(&(0..6).map(|i| Item::new(i, 8)).collect::<Vec<_>>()).await.unwrap();
    for restart in 0..=RESTARTS {
        let mut c = Consumer::<Item>::new(&link, SRC, "g", "learner", settings).await.unwrap();
        let got = read(&mut c, 6).await;
        assert!(got.iter().all(|d| d.deliveries == restart + 1 && d.failures == 0), "{restart}: {got:?}");
        // Processed (applied) and held for a checkpoint that the crash below never reaches.
        c.finish(&got.iter().map(|d| d.entry_id.clone()).collect::<Vec<_>>()).await.unwrap();
    }
    let c = Consumer::<Item>::new(&link, SRC, "g", "learner", settings).await.unwrap();
    let dead = c.dead_letters(100).await.unwrap();
    println!("{RESTARTS} restarts holding 6 processed entries: {} dead-lettered", dead.len());
    assert!(dead.is_empty(), "{dead:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entry_that_kills_its_consumer_every_time_is_dead_lettered_after_max_deliveries() {
    let srv = server();
    let link = link(&srv);
    let settings = QueueSettings { max_deliveries: 3, ..fast_queue() };
    let producer = Producer::<Item>::new(link.clone(), SRC, "g", settings).await.unwrap();
    producer.send_batch(&[Item::new(1, 8), Item::new(666, 8)]).await.unwrap();
    let mut poison_seen = Vec::new();
    for life in 0..=RESTARTS {
        let mut c = Consumer::<Item>::new(&link, SRC, "g", "worker", settings).await.unwrap();
        let got = read(&mut c, 1).await; // one batch: its own entries back, or both new ones
        let healthy: Vec<&Delivery<Item>> = got.iter().filter(|d| d.item.id == 1).collect();
        assert_eq!(healthy.len(), 1, "{life}: {got:?}");
        assert_eq!((healthy[0].deliveries, healthy[0].failures), (life + 1, 0), "never charged");
        c.finish(&[healthy[0].entry_id.clone()]).await.unwrap(); // processed, held
        let poison: Vec<(u64, u64)> =
            got.iter().filter(|d| d.item.id == 666).map(|d| (d.deliveries, d.failures)).collect();
        if poison.is_empty() {
            break; // dead-lettered by this life's recovery
        }
        poison_seen.extend(poison);
        // The poison kills the process while in progress: nothing is finished or acknowledged.
    }
    let c = Consumer::<Item>::new(&link, SRC, "g", "worker", settings).await.unwrap();
    let dead = c.dead_letters(10).await.unwrap();
    println!("poison deliveries (redis count, failed before): {poison_seen:?}; dead letter {:?}", dead[0].reason);
    assert_eq!(poison_seen, vec![(1, 0), (2, 1), (3, 2)], "processed max_deliveries times, then given up");
    assert_eq!((dead.len(), dead[0].item_id.as_deref(), dead[0].failures), (1, Some("666"), 3));
    assert!(dead[0].reason.contains("failed 3 times"), "{}", dead[0].reason);
}
