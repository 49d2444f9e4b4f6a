//! Poison entries reach the dead-letter stream with a reason and their original bytes, and
//! the consumer keeps going; entries that are never acknowledged are given up on after
//! `max_deliveries`.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use std::time::{Duration, Instant};

use crate::common::{link, server, Item};
use protocol::codec::{Codec, FORMAT_VERSION};
use protocol::link::RedisLink;
use protocol::queue::{Consumer, Producer, QueueSettings};
use testkit::fast_queue;

const SRC: &str = "reagent:{t}:in";

async fn xadd_raw(link: &RedisLink, fields: Vec<(&'static str, Vec<u8>)>) {
    link.call("xadd", Duration::ZERO, |mut c| {
        let mut cmd = redis::cmd("XADD");
        cmd.arg(SRC).arg("*");
        for (k, v) in &fields {
            cmd.arg(*k).arg(v.as_slice());
        }
        async move { cmd.query_async::<String>(&mut c).await }
    })
    .await
    .unwrap();
}

/// Reads until `want` good deliveries arrived (acknowledging them), with a deadline.
async fn drain(consumer: &mut Consumer<Item>, want: usize) -> Vec<u64> {
    let started = Instant::now();
    let mut ids = Vec::new();
    while ids.len() < want {
        assert!(started.elapsed() < Duration::from_secs(10), "only {ids:?} arrived");
        let batch = consumer.next_batch().await.unwrap();
        consumer.ack(&batch.iter().map(|d| d.entry_id.clone()).collect::<Vec<_>>()).await.unwrap();
        ids.extend(batch.into_iter().map(|d| d.item.id));
    }
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poison_entries_are_dead_lettered_with_reason_and_bytes() {
    let srv = server();
    let link = link(&srv);
    let settings = QueueSettings { max_payload_bytes: 4096, ..fast_queue() };
    let producer = Producer::<Item>::new(link.clone(), SRC, "g", settings).await.unwrap();
    let mut consumer = Consumer::<Item>::new(&link, SRC, "g", "c", settings).await.unwrap();

    let garbage = vec![FORMAT_VERSION, 0xff, 0xfe, 0x00, 0x13];
    let wrong_version = {
        let mut b = Codec::default().encode(&Item::new(90, 4)).unwrap();
        b[0] = 7;
        b
    };
    let oversize = Codec::default().encode(&Item::new(91, 10_000)).unwrap();
    let invalid = Codec::default().encode(&Item { valid: false, ..Item::new(92, 4) }).unwrap();

    producer.send(&Item::new(1, 16)).await.unwrap();
    xadd_raw(&link, vec![("id", b"garbage".to_vec()), ("p", garbage.clone())]).await;
    xadd_raw(&link, vec![("id", b"90".to_vec()), ("p", wrong_version.clone())]).await;
    xadd_raw(&link, vec![("id", b"91".to_vec()), ("p", oversize.clone())]).await;
    xadd_raw(&link, vec![("id", b"92".to_vec()), ("p", invalid.clone())]).await;
    xadd_raw(&link, vec![("id", b"nopayload".to_vec())]).await;
    xadd_raw(&link, vec![("id", b"empty".to_vec()), ("p", Vec::new())]).await;
    producer.send(&Item::new(2, 16)).await.unwrap();

    // The consumer keeps going: both good entries arrive around the poison.
    assert_eq!(drain(&mut consumer, 2).await, vec![1, 2]);

    let dead = consumer.dead_letters(100).await.unwrap();
    let by_id = |id: &str| {
        dead.iter()
            .find(|d| d.item_id.as_deref() == Some(id))
            .unwrap_or_else(|| panic!("{id} not dead-lettered: {dead:?}"))
    };
    assert_eq!(dead.len(), 6, "{dead:?}");
    assert!(by_id("garbage").reason.contains("malformed"), "{}", by_id("garbage").reason);
    assert_eq!(by_id("garbage").payload.as_deref(), Some(garbage.as_slice()), "original bytes kept");
    assert!(by_id("90").reason.contains("unknown format version 7"), "{}", by_id("90").reason);
    assert_eq!(by_id("90").payload.as_deref(), Some(wrong_version.as_slice()));
    assert!(by_id("91").reason.contains("exceeds the maximum of 4096"), "{}", by_id("91").reason);
    assert_eq!(by_id("91").payload.as_deref(), Some(oversize.as_slice()));
    assert!(by_id("92").reason.contains("item.valid"), "{}", by_id("92").reason);
    assert!(by_id("nopayload").reason.contains("no `p` payload field"));
    assert!(by_id("empty").reason.contains("empty payload"));
    assert!(dead.iter().all(|d| d.consumer == "c" && d.deliveries == 1 && !d.source_id.is_empty()));

    // Nothing is left pending: poison was acknowledged as it was dead-lettered.
    assert_eq!(protocol::queue::stream_depth(&link, SRC).await.unwrap(), 0, "nothing undelivered or unacknowledged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversize_items_are_refused_on_write() {
    let srv = server();
    let link = link(&srv);
    let settings = QueueSettings { max_payload_bytes: 1024, ..fast_queue() };
    let producer = Producer::<Item>::new(link.clone(), SRC, "g", settings).await.unwrap();
    let err = producer.send_batch(&[Item::new(1, 8), Item::new(2, 4096)]).await.unwrap_err().to_string();
    assert!(err.contains("exceeds the maximum of 1024 bytes"), "{err}");
    assert_eq!(crate::common::xlen(&link, SRC).await, 0, "nothing of a refused batch is written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_never_acknowledged_are_dead_lettered_after_max_deliveries() {
    let srv = server();
    let link = link(&srv);
    // A short lease stays: each redelivery waits it out, and the consumer never acknowledges, so
    // a stall can only delay a redelivery, never make one wrong.
    let settings = QueueSettings { max_deliveries: 3, claim_idle: Duration::from_millis(100), ..fast_queue() };
    let producer = Producer::<Item>::new(link.clone(), SRC, "g", settings).await.unwrap();
    producer.send(&Item::new(7, 8)).await.unwrap();
    let mut consumer = Consumer::<Item>::new(&link, SRC, "g", "flaky", settings).await.unwrap();

    // The consumer keeps failing (never acknowledges); each redelivery counts.
    let mut seen = Vec::new();
    let started = Instant::now();
    while consumer.dead_letters(10).await.unwrap().is_empty() {
        assert!(started.elapsed() < Duration::from_secs(10), "never dead-lettered; deliveries seen {seen:?}");
        seen.extend(consumer.next_batch().await.unwrap().into_iter().map(|d| d.deliveries));
    }
    assert_eq!(seen, vec![1, 2, 3], "delivered max_deliveries times, then given up");
    let dead = consumer.dead_letters(10).await.unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].item_id.as_deref(), Some("7"));
    assert_eq!(dead[0].deliveries, 3);
    assert!(dead[0].reason.contains("not acknowledged after 3 deliveries"), "{}", dead[0].reason);
    let item: Item = Codec::default().decode(dead[0].payload.as_deref().unwrap()).unwrap();
    assert_eq!(item, Item::new(7, 8), "the original entry survives in the dead-letter stream");
    assert_eq!(protocol::queue::stream_depth(&link, SRC).await.unwrap(), 0, "nothing undelivered or unacknowledged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_explicit_rejection_is_dead_lettered() {
    let srv = server();
    let link = link(&srv);
    let settings = fast_queue();
    let producer = Producer::<Item>::new(link.clone(), SRC, "g", settings).await.unwrap();
    producer.send(&Item::new(5, 8)).await.unwrap();
    let mut consumer = Consumer::<Item>::new(&link, SRC, "g", "c", settings).await.unwrap();
    let batch = drain_raw(&mut consumer).await;
    assert!(consumer.dead_letter(&batch[0].entry_id, batch[0].deliveries, "judge returned no score").await.unwrap());
    let dead = consumer.dead_letters(10).await.unwrap();
    assert_eq!(dead[0].reason, "judge returned no score");
    assert_eq!(protocol::queue::stream_depth(&link, SRC).await.unwrap(), 0, "nothing undelivered or unacknowledged");
}

async fn drain_raw(consumer: &mut Consumer<Item>) -> Vec<protocol::queue::Delivery<Item>> {
    let started = Instant::now();
    loop {
        let b = consumer.next_batch().await.unwrap();
        if !b.is_empty() {
            return b;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "nothing delivered");
    }
}
