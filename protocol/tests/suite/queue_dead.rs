//! Dead-letter streams are capped and operable: about `dead_letter_maxlen` newest letters are
//! kept, a letter can be read by id, replayed onto its stream (once), and purged.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use crate::common::{link, read, server, xlen, Item};
use protocol::keys::Keys;
use protocol::queue::{dead_letter, purge_dead_letters, replay_dead_letters, Consumer, Producer, QueueSettings};
use testkit::fast_queue;

const SRC: &str = "reagent:{t}:dlq";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_are_capped_at_about_the_configured_length() {
    let srv = server();
    let link = link(&srv);
    let settings = QueueSettings { dead_letter_maxlen: 10, read_count: 100, ..fast_queue() };
    let producer = Producer::<Item>::new(link.clone(), SRC, "g", settings).await.unwrap();
    producer.send_batch(&(0..400).map(|i| Item { valid: false, ..Item::new(i, 4) }).collect::<Vec<_>>()).await.unwrap();
    let mut c = Consumer::<Item>::new(&link, SRC, "g", "c", settings).await.unwrap();
    while protocol::queue::stream_depth(&link, SRC).await.unwrap() > 0 {
        assert!(c.next_batch().await.unwrap().is_empty(), "every entry is invalid");
    }
    let kept = xlen(&link, &Keys::dead_letter(SRC)).await;
    println!("400 dead letters with dead_letter_maxlen 10: {kept} kept");
    // Approximate trimming removes whole radix-tree nodes (100 entries each by default).
    assert!((10..=110).contains(&kept), "{kept} letters kept");
    let newest = c.dead_letters(1000).await.unwrap().last().cloned().unwrap();
    assert_eq!(newest.item_id.as_deref(), Some("399"), "the newest are the ones kept");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_letter_is_shown_replayed_once_and_purged() {
    let srv = server();
    let link = link(&srv);
    let settings = fast_queue();
    let dead = Keys::dead_letter(SRC);
    let producer = Producer::<Item>::new(link.clone(), SRC, "g", settings).await.unwrap();
    producer.send_batch(&[Item::new(1, 8), Item::new(2, 8)]).await.unwrap();
    let mut c = Consumer::<Item>::new(&link, SRC, "g", "c", settings).await.unwrap();
    let got = read(&mut c, 2).await;
    for d in &got {
        assert!(c.dead_letter(&d.entry_id, d.deliveries, "the judge was down").await.unwrap());
    }
    let letters = c.dead_letters(10).await.unwrap();
    let shown = dead_letter(&link, &dead, &letters[0].dead_id).await.unwrap().expect("the letter by id");
    assert_eq!((shown.item_id.as_deref(), shown.reason.as_str()), (Some("1"), "the judge was down"));
    assert!(dead_letter(&link, &dead, "1-0").await.unwrap().is_none(), "no such letter");
    let err = dead_letter(&link, &dead, "nonsense").await.unwrap_err().to_string();
    assert!(err.contains("`nonsense` is not a stream entry id"), "{err}");

    // The cause fixed, the first letter goes back onto its stream, once.
    let replayed = replay_dead_letters(&link, &dead, &[letters[0].dead_id.clone()]).await.unwrap();
    assert_eq!(replayed.len(), 1);
    assert!(replay_dead_letters(&link, &dead, &[letters[0].dead_id.clone()]).await.unwrap().is_empty());
    let again = read(&mut c, 1).await;
    assert_eq!(again.len(), 1);
    assert_eq!((again[0].item.clone(), again[0].entry_id.clone()), (Item::new(1, 8), replayed[0].1.clone()));
    assert_eq!((again[0].deliveries, again[0].failures), (1, 0), "a new entry without history");
    c.ack(&[again[0].entry_id.clone()]).await.unwrap();

    let err = replay_dead_letters(&link, SRC, &[]).await.unwrap_err().to_string();
    assert!(err.contains("is not a dead-letter stream"), "{err}");
    assert_eq!(purge_dead_letters(&link, &dead).await.unwrap(), 1, "the second letter");
    assert!(c.dead_letters(10).await.unwrap().is_empty());
}
