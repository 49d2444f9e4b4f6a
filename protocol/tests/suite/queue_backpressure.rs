//! Backpressure: a producer is held at the high-water mark and released when consumers take
//! entries (the backlog counts entries not yet delivered; what a consumer holds unacknowledged is
//! not backlog); with no consumer at all it gives up after its deadline with an error naming the
//! stream.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use std::time::Duration;

use crate::common::{link, server, Item};
use protocol::queue::{Consumer, Producer, QueueSettings};
use protocol::ProtocolError;
use testkit::fast_queue;

const SRC: &str = "reagent:{t}:in";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producer_waits_at_the_mark_and_is_released_when_consumers_take_entries() {
    let srv = server();
    let link = link(&srv);
    let settings = QueueSettings { high_water_mark: 10, read_count: 4, ..fast_queue() };
    let producer = std::sync::Arc::new(Producer::<Item>::new(link.clone(), SRC, "g", settings).await.unwrap());
    producer.send_batch(&(0..10).map(|i| Item::new(i, 8)).collect::<Vec<_>>()).await.unwrap();
    assert_eq!(producer.backlog().await.unwrap(), 10);

    // The 11th entry does not fit: the send is held.
    let held = {
        let p = producer.clone();
        tokio::spawn(async move { p.send(&Item::new(10, 8)).await })
    };
    let still_held = tokio::time::timeout(Duration::from_millis(300), async {
        while !held.is_finished() {
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(still_held.is_err(), "the producer passed the high-water mark");
    assert_eq!(crate::common::xlen(&link, SRC).await, 10, "nothing written past the mark");

    // Taking entries makes room: the 4 delivered are no longer backlog, though unacknowledged.
    let mut consumer = Consumer::<Item>::new(&link, SRC, "g", "c", settings).await.unwrap();
    let batch = consumer.next_batch().await.unwrap();
    assert_eq!(batch.len(), 4);
    let id = tokio::time::timeout(Duration::from_secs(10), held).await.expect("released in time").unwrap().unwrap();
    assert!(!id.is_empty());
    assert_eq!(producer.backlog().await.unwrap(), 7, "6 undelivered + the one just written");
    assert_eq!(protocol::queue::stream_depth(&link, SRC).await.unwrap(), 11, "the depth still counts the 4 held");

    // Acknowledging changes the depth, not the backlog; a send within the mark goes straight in.
    consumer.ack(&batch.iter().map(|d| d.entry_id.clone()).collect::<Vec<_>>()).await.unwrap();
    assert_eq!(protocol::queue::stream_depth(&link, SRC).await.unwrap(), 7);
    producer.send_batch(&(11..14).map(|i| Item::new(i, 8)).collect::<Vec<_>>()).await.unwrap();
    assert_eq!(producer.backlog().await.unwrap(), 10);
    let text = protocol::metrics::render();
    assert!(text.contains("reagent_queue_backpressure_waits_total{stream=\"in\"}"), "wait counted in metrics");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producer_gives_up_after_its_deadline_naming_the_stream() {
    let srv = server();
    let link = link(&srv);
    let settings =
        QueueSettings { high_water_mark: 3, backpressure_timeout: Duration::from_millis(200), ..fast_queue() };
    let producer = Producer::<Item>::new(link.clone(), SRC, "g", settings).await.unwrap();
    producer.send_batch(&(0..3).map(|i| Item::new(i, 8)).collect::<Vec<_>>()).await.unwrap();
    let err = producer.send(&Item::new(3, 8)).await.unwrap_err();
    assert!(matches!(err, ProtocolError::Backpressure { backlog: 3, high_water_mark: 3, .. }), "{err}");
    assert!(err.to_string().contains(SRC), "{err}");
    assert_eq!(crate::common::xlen(&link, SRC).await, 3);
}

/// The lag `reagent status` shows is the one backpressure trusts: Redis's own lag counter, made
/// wrong here as a restart from the append-only file once made it (`XGROUP SETID … ENTRIESREAD`
/// rewinds the group's read counter while its last delivered id stays the newest entry), counts
/// entries that were all delivered; the trusted lag is 0 (and again once the next entry is delivered).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_trusted_lag_ignores_a_wrong_redis_lag_counter() {
    let srv = server();
    let link = link(&srv);
    let settings = QueueSettings { read_count: 64, ..fast_queue() };
    let producer = Producer::<Item>::new(link.clone(), SRC, "g", settings).await.unwrap();
    producer.send_batch(&(0..20).map(|i| Item::new(i, 8)).collect::<Vec<_>>()).await.unwrap();
    let mut consumer = Consumer::<Item>::new(&link, SRC, "g", "c", settings).await.unwrap();
    let batch = consumer.next_batch().await.unwrap();
    assert_eq!(batch.len(), 20);
    let last = batch.last().unwrap().entry_id.clone();
    let raw_lag = |link: protocol::link::RedisLink| async move {
        let groups: redis::streams::StreamInfoGroupsReply = link
            .call("xinfo groups", Duration::ZERO, |mut c| async move {
                redis::cmd("XINFO").arg("GROUPS").arg(SRC).query_async(&mut c).await
            })
            .await
            .unwrap();
        groups.groups[0].lag
    };
    assert_eq!(raw_lag(link.clone()).await, Some(0));
    let last_id = last.clone();
    let _: () = link
        .call("xgroup setid", Duration::ZERO, move |mut c| {
            let last_id = last_id.clone();
            async move {
                redis::cmd("XGROUP")
                    .arg("SETID")
                    .arg(SRC)
                    .arg("g")
                    .arg(&last_id)
                    .arg("ENTRIESREAD")
                    .arg(1)
                    .query_async(&mut c)
                    .await
            }
        })
        .await
        .unwrap();
    assert_eq!(raw_lag(link.clone()).await, Some(19), "Redis's counter now counts delivered entries");
    assert_eq!(protocol::queue::trusted_lags(&link, SRC).await.unwrap(), vec![("g".to_string(), Some(0))]);
    assert_eq!(producer.backlog().await.unwrap(), 0, "backpressure trusts the same figure");
    producer.send(&Item::new(20, 8)).await.unwrap();
    assert_eq!(consumer.next_batch().await.unwrap().len(), 1);
    assert_eq!(protocol::queue::trusted_lags(&link, SRC).await.unwrap(), vec![("g".to_string(), Some(0))]);
}
