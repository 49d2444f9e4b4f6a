//! Reading a stream in place (`queue::read_all` / `read_range`): every entry in order across
//! pages, both fields, exclusive bounds, and a missing stream as empty — without touching the
//! consumer group.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use crate::common::{link, server, Item};
use protocol::codec::Codec;
use protocol::queue::{read_all, read_range, stream_depth, Producer};
use testkit::fast_queue;

const SRC: &str = "reagent:{t}:range";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_every_entry_in_order_across_pages_and_takes_nothing() {
    let srv = server();
    let link = link(&srv);
    assert!(read_all(&link, SRC).await.unwrap().is_empty(), "a missing stream reads as empty");

    // More than two XRANGE pages (512 each).
    let n = 1_100u64;
    let producer = Producer::<Item>::new(link.clone(), SRC, "g", fast_queue()).await.unwrap();
    let items: Vec<Item> = (0..n).map(|i| Item::new(i, 4)).collect();
    for chunk in items.chunks(200) {
        producer.send_batch(chunk).await.unwrap();
    }

    let all = read_all(&link, SRC).await.unwrap();
    let ids: Vec<String> = all.iter().map(|e| e.id.clone().unwrap()).collect();
    assert_eq!(ids, (0..n).map(|i| i.to_string()).collect::<Vec<_>>(), "every entry once, in order");
    let codec = Codec::default();
    let third: Item = codec.decode(all[3].payload.as_deref().unwrap()).unwrap();
    assert_eq!(third.id, 3);
    assert!(all.windows(2).all(|w| w[0].ms() <= w[1].ms()));

    // Exclusive lower bound, inclusive upper one.
    let part = read_range(&link, SRC, &format!("({}", all[9].stream_id), &all[19].stream_id).await.unwrap();
    assert_eq!(
        part.iter().map(|e| e.id.clone().unwrap()).collect::<Vec<_>>(),
        (10..20).map(|i| i.to_string()).collect::<Vec<_>>()
    );

    assert_eq!(stream_depth(&link, SRC).await.unwrap(), n, "reading took nothing from the group");
}
