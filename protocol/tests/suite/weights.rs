//! The weight store against a real redis-server: round trips across many chunks, corruption and
//! loss detected and named, newest-version fetches, `latest` never moving back, expiry of
//! superseded versions, the watcher (notification, polling, a Redis restart) and idempotence.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use std::time::{Duration, Instant};

use protocol::link::LinkSettings;
use protocol::metrics::WEIGHTS_CORRUPT;
use protocol::redis_server::{RedisServer, RedisServerOptions};
use protocol::weights::{NamedTensor, WeightSettings, WeightStore};
use protocol::wire::{DType, PolicyVersion, RunId, Validate};
use protocol::ProtocolError;
use redis::aio::MultiplexedConnection;

const WAIT: Duration = Duration::from_secs(20);

/// A tensor that owns its bytes.
struct Owned {
    name: String,
    shape: Vec<i64>,
    dtype: DType,
    data: Vec<u8>,
}

impl Owned {
    /// Pseudo-random contents (xorshift) that differ by `seed`.
    fn new(name: &str, shape: &[i64], dtype: DType, seed: u64) -> Self {
        let len = shape.iter().product::<i64>() as usize * dtype.size();
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut data = Vec::with_capacity(len + 8);
        while data.len() < len {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            data.extend_from_slice(&x.to_le_bytes());
        }
        data.truncate(len);
        Self { name: name.into(), shape: shape.into(), dtype, data }
    }

    fn view(&self) -> NamedTensor<'_> {
        NamedTensor { name: &self.name, shape: &self.shape, dtype: self.dtype, data: &self.data }
    }
}

fn views(model: &[Owned]) -> Vec<NamedTensor<'_>> {
    model.iter().map(Owned::view).collect()
}

/// Five tensors of every dtype, one of them empty: 5,296 bytes.
fn model(seed: u64) -> Vec<Owned> {
    vec![
        Owned::new("embed.weight", &[17, 33], DType::F32, seed),
        Owned::new("layers.0.attn", &[1000], DType::BF16, seed + 1),
        Owned::new("positions", &[3], DType::I64, seed + 2),
        Owned::new("empty", &[0, 4], DType::F16, seed + 3),
        Owned::new("head.bias", &[257], DType::F32, seed + 4),
    ]
}

fn settings(chunk_bytes: u64) -> WeightSettings {
    WeightSettings {
        chunk_bytes,
        keep_versions: 2,
        expire_grace: Duration::from_secs(60),
        poll_interval: Duration::from_secs(60),
        ..WeightSettings::default()
    }
}

fn server() -> RedisServer {
    RedisServer::start(RedisServerOptions::default()).expect("redis-server starts (run `make setup`)")
}

fn store(srv: &RedisServer, settings: WeightSettings) -> WeightStore {
    let link = LinkSettings { retry_for: WAIT, backoff_min: Duration::from_millis(10), ..LinkSettings::default() };
    WeightStore::connect(&srv.url(), link, &RunId::new("w").unwrap(), settings).unwrap()
}

async fn raw(srv: &RedisServer) -> MultiplexedConnection {
    redis::Client::open(srv.url()).unwrap().get_multiplexed_async_connection().await.unwrap()
}

async fn pttl(conn: &mut MultiplexedConnection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query_async(conn).await.unwrap()
}

fn v(n: u64) -> PolicyVersion {
    PolicyVersion(n)
}

#[tokio::test]
async fn several_tensors_round_trip_across_many_chunks() {
    let srv = server();
    let store = store(&srv, settings(100));
    let model = model(1);
    let published = store.publish(v(1), &views(&model)).await.unwrap();
    assert_eq!(published.chunks.len(), 53, "5,296 bytes in chunks of 100");
    let set = store.fetch(v(1)).await.unwrap();
    set.manifest().validate().unwrap();
    assert_eq!(set.manifest(), &published);
    for t in &model {
        let (spec, bytes) = set.tensor(&t.name).unwrap();
        assert_eq!((&spec.shape, spec.dtype, &bytes[..]), (&t.shape, t.dtype, &t.data[..]), "{}", t.name);
    }
    let names: Vec<&str> = set.tensors().map(|(s, _)| s.name.as_str()).collect();
    assert_eq!(names, ["embed.weight", "layers.0.attn", "positions", "empty", "head.bias"]);
    assert_eq!(store.latest_version().await.unwrap(), Some(v(1)));
    assert_eq!(store.fetch_latest().await.unwrap(), set);
}

#[tokio::test]
async fn a_blob_larger_than_one_batch_round_trips() {
    let srv = server();
    let store = store(&srv, settings(1 << 20));
    let big = [Owned::new("big", &[10 << 20], DType::F32, 9)];
    let published = store.publish(v(1), &views(&big)).await.unwrap();
    assert_eq!(published.chunks.len(), 40, "40 MiB in chunks of 1 MiB: 10 units over 4 connections");
    let set = store.fetch_latest().await.unwrap();
    assert!(set.to_blob() == big[0].data);
    // One reader with a window of 2 units still reads all 10 units (no wait on itself).
    let one = self::store(&srv, WeightSettings { fetch_connections: 1, ..settings(1 << 20) });
    assert!(one.fetch(v(1)).await.unwrap() == set);
}

/// 12 MiB in chunks of 256 KiB: 48 chunks in 3 units of 4 MiB, read by 3 connections at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunks_read_over_several_connections_are_each_verified() {
    let srv = server();
    let store = store(&srv, WeightSettings { fetch_connections: 3, ..settings(256 << 10) });
    let big = [Owned::new("a", &[1 << 20], DType::F32, 3), Owned::new("b", &[1 << 20], DType::I64, 4)];
    let published = store.publish(v(1), &views(&big)).await.unwrap();
    assert_eq!(published.chunks.len(), 48);
    let set = store.fetch(v(1)).await.unwrap();
    assert!(set.tensor("a").unwrap().1[..] == big[0].data[..] && set.tensor("b").unwrap().1[..] == big[1].data[..]);

    let mut conn = raw(&srv).await;
    let key = store.keys().weights_chunk(v(1), 40);
    let good: Vec<u8> = redis::cmd("GET").arg(&key).query_async(&mut conn).await.unwrap();
    let mut bad = good.clone();
    bad[100_000] ^= 0x01;
    let () = redis::cmd("SET").arg(&key).arg(bad).query_async(&mut conn).await.unwrap();
    let err = store.fetch(v(1)).await.unwrap_err().to_string();
    assert!(err.contains("chunk 40 fails its hash"), "{err}");
    let () = redis::cmd("SET").arg(&key).arg(good).query_async(&mut conn).await.unwrap();
    let () = redis::cmd("DEL").arg(store.keys().weights_chunk(v(1), 20)).query_async(&mut conn).await.unwrap();
    let err = store.fetch(v(1)).await.unwrap_err().to_string();
    assert!(err.contains("chunk 20 is missing"), "{err}");
}

/// The manifest layout before chunk roots, as an older learner wrote it.
#[derive(serde::Serialize)]
struct SchemeOneManifest {
    version: PolicyVersion,
    tensors: Vec<protocol::wire::TensorSpec>,
    chunk_bytes: u64,
    chunks: Vec<protocol::wire::ChunkSpec>,
    sha256: [u8; 32],
    published_at_ms: u64,
}

#[tokio::test]
async fn manifests_of_the_old_schemes_are_refused_by_name() {
    let srv = server();
    let store = store(&srv, settings(100));
    let m = store.publish(v(2), &views(&model(1))).await.unwrap();
    let one = SchemeOneManifest {
        version: m.version,
        tensors: m.tensors.clone(),
        chunk_bytes: m.chunk_bytes,
        chunks: m.chunks.clone(),
        sha256: [0; 32],
        published_at_ms: m.published_at_ms,
    };
    // Scheme 2 had this layout, with sha256 where BLAKE3 is now.
    let two = protocol::wire::WeightManifest { scheme: 2, ..m };
    let codec = protocol::codec::Codec::default();
    let mut conn = raw(&srv).await;
    for (bytes, scheme) in
        [(codec.encode(&one).unwrap(), "old scheme 1"), (codec.encode(&two).unwrap(), "old scheme 2")]
    {
        let key = store.keys().weights_manifest(v(2));
        let () = redis::cmd("SET").arg(key).arg(bytes).query_async(&mut conn).await.unwrap();
        match store.fetch_latest().await {
            Err(ProtocolError::CorruptWeights { version, detail }) => {
                assert_eq!(version, v(2));
                assert!(detail.contains(scheme) && detail.contains("same build"), "{detail}");
            }
            other => panic!("expected {scheme} refused, got {other:?}"),
        }
    }
    // The learner's next publish of that version replaces it.
    store.publish(v(2), &views(&model(1))).await.unwrap();
    assert_eq!(store.fetch(v(2)).await.unwrap().tensors().len(), 5);
}

#[tokio::test]
async fn a_corrupted_chunk_is_detected_and_named() {
    let srv = server();
    let store = store(&srv, settings(100));
    store.publish(v(1), &views(&model(1))).await.unwrap();
    let key = store.keys().weights_chunk(v(1), 3);
    let mut conn = raw(&srv).await;
    let mut chunk: Vec<u8> = redis::cmd("GET").arg(&key).query_async(&mut conn).await.unwrap();
    chunk[17] ^= 0x40;
    let () = redis::cmd("SET").arg(&key).arg(chunk).query_async(&mut conn).await.unwrap();
    let before = WEIGHTS_CORRUPT.get();
    for result in [store.fetch(v(1)).await, store.fetch_latest().await] {
        match result {
            Err(ProtocolError::CorruptWeights { version, detail }) => {
                assert_eq!(version, v(1));
                assert!(detail.contains("chunk 3 fails its hash"), "{detail}");
            }
            other => panic!("expected corrupt weights, got {other:?}"),
        }
    }
    assert!(WEIGHTS_CORRUPT.get() >= before + 2, "each corrupt fetch is counted");
}

#[tokio::test]
async fn a_deleted_chunk_is_detected_and_named() {
    let srv = server();
    let store = store(&srv, settings(100));
    store.publish(v(4), &views(&model(1))).await.unwrap();
    let mut conn = raw(&srv).await;
    let () = redis::cmd("DEL").arg(store.keys().weights_chunk(v(4), 52)).query_async(&mut conn).await.unwrap();
    let err = store.fetch(v(4)).await.unwrap_err().to_string();
    assert!(err.contains("weights v4") && err.contains("chunk 52 is missing"), "{err}");
}

#[tokio::test]
async fn a_missing_version_is_gone_and_nothing_published_is_no_weights() {
    let srv = server();
    let store = store(&srv, settings(100));
    assert!(matches!(store.fetch_latest().await, Err(ProtocolError::NoWeights(run)) if run == "w"));
    assert!(store.fetch_newer_than(None).await.unwrap().is_none());
    assert!(matches!(store.fetch(v(3)).await, Err(ProtocolError::WeightsGone { version }) if version == v(3)));
    let mut conn = raw(&srv).await;
    let () = redis::cmd("SET").arg(store.keys().weights_latest()).arg(9).query_async(&mut conn).await.unwrap();
    assert!(matches!(store.fetch_latest().await, Err(ProtocolError::WeightsGone { version }) if version == v(9)));
}

#[tokio::test]
async fn the_newest_version_is_fetched_and_intermediates_skipped() {
    let srv = server();
    let store = store(&srv, settings(100));
    for n in 1..=5 {
        store.publish(v(n), &views(&model(n * 10))).await.unwrap();
    }
    let newest = store.fetch_newer_than(Some(v(1))).await.unwrap().unwrap();
    assert_eq!(newest.version(), v(5));
    assert_eq!(&newest.tensor("head.bias").unwrap().1[..], &model(50)[4].data[..]);
    assert_eq!(store.fetch_newer_than(None).await.unwrap().unwrap().version(), v(5));
    assert!(store.fetch_newer_than(Some(v(5))).await.unwrap().is_none());
    assert!(store.fetch_newer_than(Some(v(8))).await.unwrap().is_none());
    assert_eq!(store.fetch_latest().await.unwrap(), newest);
}

#[tokio::test]
async fn latest_never_moves_backwards() {
    let srv = server();
    let store = store(&srv, WeightSettings { keep_versions: 20, ..settings(100) });
    store.publish(v(5), &views(&model(5))).await.unwrap();
    store.publish(v(3), &views(&model(3))).await.unwrap();
    assert_eq!(store.latest_version().await.unwrap(), Some(v(5)));
    assert_eq!(&store.fetch(v(3)).await.unwrap().tensor("positions").unwrap().1[..], &model(3)[2].data[..]);
    // Concurrent publishers in shuffled order: the greatest wins, whatever lands last.
    let order = [14u64, 9, 19, 11, 20, 6, 17, 10];
    let handles: Vec<_> = order
        .iter()
        .map(|&n| {
            let store = store.clone();
            tokio::spawn(async move { store.publish(v(n), &views(&model(n))).await.map(|m| m.version) })
        })
        .collect();
    for h in handles {
        h.await.unwrap().unwrap();
    }
    assert_eq!(store.latest_version().await.unwrap(), Some(v(20)));
    assert_eq!(store.fetch_latest().await.unwrap().version(), v(20));
}

#[tokio::test]
async fn superseded_versions_expire_and_the_newest_keep_versions_do_not() {
    let srv = server();
    let store = store(&srv, settings(1000)); // keep 2, grace 60 s; 6 chunks a version
    for n in 1..=4 {
        store.publish(v(n), &views(&model(n))).await.unwrap();
    }
    store.publish(v(0), &views(&model(0))).await.unwrap(); // late and old: expires at once
    let mut conn = raw(&srv).await;
    let k = store.keys();
    for n in [0, 1, 2] {
        let ttl = pttl(&mut conn, &k.weights_manifest(v(n))).await;
        assert!(ttl > 0 && ttl <= 60_000, "v{n} manifest ttl {ttl}");
        for i in 0..6 {
            let ttl = pttl(&mut conn, &k.weights_chunk(v(n), i)).await;
            assert!(ttl > 0 && ttl <= 66_000, "v{n} chunk {i} ttl {ttl}");
        }
    }
    for n in [3, 4] {
        assert_eq!(pttl(&mut conn, &k.weights_manifest(v(n))).await, -1, "v{n} manifest is kept");
        for i in 0..6 {
            assert_eq!(pttl(&mut conn, &k.weights_chunk(v(n), i)).await, -1, "v{n} chunk {i} is kept");
        }
    }
    assert_eq!(store.latest_version().await.unwrap(), Some(v(4)));
    // Still readable during the grace period.
    assert_eq!(store.fetch(v(1)).await.unwrap().version(), v(1));
}

/// A Redis full to its `maxmemory` (noeviction) refuses chunk writes with OOM. The learner's
/// publish waits for room (superseded versions expire) rather than leave the run: here 36 MiB of
/// keys (47 MB as Redis allocates them) hold the room a 32 MiB version needs in a 64 MiB server
/// until the test deletes them, once the waiting publish has been refused; with the limit then
/// lowered to what is used, the next publish gives up, with Redis' refusal, after its patience.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publish_waits_for_room_in_a_full_redis_and_gives_up_after_its_patience() {
    let srv = RedisServer::start(RedisServerOptions { maxmemory: Some(64 << 20), ..RedisServerOptions::default() })
        .expect("redis-server starts (run `make setup`)");
    let store = store(&srv, settings(1 << 20));
    let big = [Owned::new("big", &[8 << 20], DType::F32, 5)];
    let mut conn = raw(&srv).await;
    let filler = vec![b'x'; 4 << 20];
    for i in 0..9 {
        let _: () = redis::cmd("SET").arg(format!("filler{i}")).arg(&filler).query_async(&mut conn).await.unwrap();
    }

    let refused = || protocol::metrics::WEIGHTS_PUBLISH_REFUSED.get();
    let refused_before = refused();
    let plain = store.publish(v(1), &views(&big)).await.unwrap_err();
    assert!(plain.is_out_of_memory(), "a plain publish fails at once with Redis' refusal: {plain}");
    assert_eq!(refused(), refused_before, "a plain publish neither waits nor counts");
    let waiting = {
        let (store, big) = (store.clone(), Owned::new("big", &[8 << 20], DType::F32, 5));
        tokio::spawn(async move { store.publish_when_room(v(1), &[big.view()], Duration::from_secs(60)).await })
    };
    let deadline = Instant::now() + WAIT;
    while refused() < refused_before + 2 {
        assert!(Instant::now() < deadline, "the waiting publish was refused twice within {WAIT:?}");
        assert!(!waiting.is_finished(), "the publish waits while there is no room: {:?}", waiting.await);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let fillers: Vec<String> = (0..9).map(|i| format!("filler{i}")).collect();
    let _: () = redis::cmd("DEL").arg(&fillers).query_async(&mut conn).await.unwrap();
    let published = tokio::time::timeout(WAIT, waiting).await.expect("room came back").unwrap().unwrap();
    assert_eq!(published.chunks.len(), 32);
    assert!(store.fetch(v(1)).await.unwrap().to_blob() == big[0].data, "the version is whole");

    // No room ever comes back (the limit lowered to what is used): the refusal, after the patience.
    let info: String = redis::cmd("INFO").arg("memory").query_async(&mut conn).await.unwrap();
    let used: u64 = info.lines().find_map(|l| l.strip_prefix("used_memory:")).unwrap().trim().parse().unwrap();
    let _: () =
        redis::cmd("CONFIG").arg("SET").arg("maxmemory").arg(used + (1 << 20)).query_async(&mut conn).await.unwrap();
    let other = [Owned::new("big", &[8 << 20], DType::F32, 6)];
    let started = Instant::now();
    let err = store.publish_when_room(v(2), &views(&other), Duration::from_secs(2)).await.unwrap_err();
    let waited = started.elapsed();
    assert!(err.is_out_of_memory() && err.to_string().contains("OOM"), "{err}");
    assert!(waited >= Duration::from_millis(1500) && waited < Duration::from_secs(8), "{waited:?}");
    assert_eq!(store.latest_version().await.unwrap(), Some(v(1)), "latest did not move");
}

#[tokio::test]
async fn publishing_twice_is_harmless_and_new_content_replaces_old() {
    let srv = server();
    let store = store(&srv, settings(100));
    let first = store.publish(v(1), &views(&model(1))).await.unwrap();
    let again = store.publish(v(1), &views(&model(1))).await.unwrap();
    assert_eq!(again, first, "the stored manifest, publication time included");
    assert_eq!(store.latest_version().await.unwrap(), Some(v(1)));
    assert_eq!(store.fetch(v(1)).await.unwrap().manifest(), &first);
    // Same version, other (smaller) content: replaced, and the surplus chunk keys removed.
    let small = [Owned::new("only", &[50], DType::F32, 7)];
    let replaced = store.publish(v(1), &views(&small)).await.unwrap();
    assert_eq!(replaced.chunks.len(), 2);
    assert_eq!(store.fetch(v(1)).await.unwrap().to_blob(), small[0].data);
    let mut conn = raw(&srv).await;
    let left: i64 = redis::cmd("EXISTS").arg(store.keys().weights_chunk(v(1), 2)).query_async(&mut conn).await.unwrap();
    assert_eq!(left, 0);
}

#[tokio::test]
async fn bad_tensors_are_refused_before_anything_is_written() {
    let srv = server();
    let store = store(&srv, settings(100));
    let data = [0u8; 10];
    let bad = [NamedTensor { name: "w", shape: &[3], dtype: DType::F32, data: &data }];
    let err = store.publish(v(1), &bad).await.unwrap_err().to_string();
    assert!(err.contains("tensors[w].data"), "{err}");
    let mut conn = raw(&srv).await;
    let keys: i64 = redis::cmd("DBSIZE").query_async(&mut conn).await.unwrap();
    assert_eq!(keys, 0);
}

#[tokio::test]
async fn the_watcher_hears_a_notification_at_once() {
    let srv = server();
    let publisher = store(&srv, settings(100));
    publisher.publish(v(1), &views(&model(1))).await.unwrap();
    let mut watcher = store(&srv, settings(100)).subscribe(Some(v(1))).await; // polls once a minute
    assert!(watcher.is_subscribed());
    assert_eq!(watcher.next_version(Duration::ZERO).await.unwrap(), None);
    let started = Instant::now();
    let next = model(2);
    let next = views(&next);
    let (seen, published) = tokio::join!(watcher.next_version(WAIT), publisher.publish(v(2), &next));
    published.unwrap();
    assert_eq!(seen.unwrap(), Some(v(2)));
    assert!(started.elapsed() < Duration::from_secs(10), "woken by the notification, not the poll");
    assert!(watcher.notifications() >= 1);
    assert_eq!(watcher.seen(), Some(v(2)));
}

#[tokio::test]
async fn the_watcher_polls_when_notifications_are_missed() {
    let srv = server();
    let fast = WeightSettings { poll_interval: Duration::from_millis(50), ..settings(100) };
    let store = store(&srv, fast);
    let mut watcher = store.subscribe(None).await;
    assert_eq!(watcher.next_version(Duration::ZERO).await.unwrap(), None);
    let mut conn = raw(&srv).await;
    let set_latest = async {
        let () = redis::cmd("SET").arg(store.keys().weights_latest()).arg(7).query_async(&mut conn).await.unwrap();
    };
    let (seen, ()) = tokio::join!(watcher.next_version(WAIT), set_latest);
    assert_eq!(seen.unwrap(), Some(v(7)));
    assert_eq!(watcher.notifications(), 0, "no message was sent: polling found it");
    let started = Instant::now();
    assert_eq!(watcher.next_version(Duration::from_millis(200)).await.unwrap(), None, "nothing newer");
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(200) && waited < Duration::from_secs(5), "{waited:?}");
}

#[tokio::test]
async fn the_watcher_outlives_a_redis_restart() {
    let mut srv = server();
    let settings = WeightSettings { poll_interval: Duration::from_millis(100), ..settings(100) };
    let store = store(&srv, settings);
    store.publish(v(1), &views(&model(1))).await.unwrap();
    let mut watcher = store.subscribe(Some(v(1))).await;
    assert!(watcher.is_subscribed());
    srv.restart().unwrap();
    // The watcher notices that its subscription broke, polls meanwhile, and subscribes again.
    let deadline = Instant::now() + WAIT;
    while watcher.is_subscribed() {
        assert!(Instant::now() < deadline, "the broken subscription is noticed");
        assert_eq!(watcher.next_version(Duration::from_millis(50)).await.unwrap(), None);
    }
    while !watcher.is_subscribed() {
        assert!(Instant::now() < deadline, "the subscription comes back");
        assert_eq!(watcher.next_version(Duration::from_millis(100)).await.unwrap(), None);
    }
    assert_eq!(watcher.seen(), Some(v(1)), "the AOF kept v1, and nothing newer came");
    let next = model(2);
    let next = views(&next);
    let (seen, published) = tokio::join!(watcher.next_version(WAIT), store.publish(v(2), &next));
    published.unwrap();
    assert_eq!(seen.unwrap(), Some(v(2)));
    let deadline = Instant::now() + WAIT;
    while watcher.notifications() == 0 {
        assert!(Instant::now() < deadline, "the new subscription delivers notifications");
        assert_eq!(watcher.next_version(Duration::from_millis(50)).await.unwrap(), None);
    }
}
