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

/// A letter keeps its payload only up to `dead_letter_max_payload_bytes`. One 64 MiB entry was
/// kept whole before (94 MB in the dead stream); here a 1 MiB one, with a 64 KiB limit, leaves its
/// size and SHA-1 instead (checked against Redis' own SHA-1 of the bytes the producer wrote), so
/// the dead stream stays small and the letter says what it was; it cannot be replayed. A small
/// payload is kept whole and replays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payload_over_the_limit_leaves_its_size_and_hash_in_its_letter() {
    let srv = server();
    let link = link(&srv);
    let settings = QueueSettings { dead_letter_max_payload_bytes: 64 << 10, ..fast_queue() };
    let dead = Keys::dead_letter(SRC);
    let producer = Producer::<Item>::new(link.clone(), SRC, "g", settings).await.unwrap();
    producer.send_batch(&[Item::new(1, 1 << 20), Item::new(2, 100)]).await.unwrap();
    let mut conn = redis::Client::open(srv.url()).unwrap().get_multiplexed_async_connection().await.unwrap();
    let first: redis::streams::StreamRangeReply =
        redis::cmd("XRANGE").arg(SRC).arg("-").arg("+").arg("COUNT").arg(1).query_async(&mut conn).await.unwrap();
    let big: Vec<u8> = first.ids[0].get("p").unwrap();
    let sha1: String =
        redis::cmd("EVAL").arg("return redis.sha1hex(ARGV[1])").arg(0).arg(&big).query_async(&mut conn).await.unwrap();

    let mut c = Consumer::<Item>::new(&link, SRC, "g", "c", settings).await.unwrap();
    for d in &read(&mut c, 2).await {
        assert!(c.dead_letter(&d.entry_id, d.deliveries, "poison").await.unwrap());
    }
    let letters = c.dead_letters(10).await.unwrap();
    assert_eq!(letters.len(), 2);
    let (large, small) = (&letters[0], &letters[1]);
    assert_eq!((large.item_id.as_deref(), large.payload.as_ref()), (Some("1"), None), "the large payload is not kept");
    assert_eq!(large.dropped_payload, Some((big.len() as u64, sha1)), "its size and hash are");
    assert!(big.len() > 1 << 20, "the payload was the whole encoded item");
    assert_eq!((small.dropped_payload.as_ref(), small.payload.as_ref().map(Vec::len).unwrap_or(0) > 100), (None, true));
    let bytes: u64 = redis::cmd("MEMORY").arg("USAGE").arg(&dead).query_async(&mut conn).await.unwrap();
    assert!(bytes < 64 << 10, "the dead stream holds {bytes} bytes");

    let ids: Vec<String> = letters.iter().map(|l| l.dead_id.clone()).collect();
    let replayed = replay_dead_letters(&link, &dead, &ids).await.unwrap();
    assert_eq!(
        replayed.iter().map(|(d, _)| d.as_str()).collect::<Vec<_>>(),
        [small.dead_id.as_str()],
        "only the kept one"
    );
    let again = read(&mut c, 1).await;
    assert_eq!(again[0].item, Item::new(2, 100));
}
