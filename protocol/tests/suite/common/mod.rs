//! Shared helpers of the queue tests: a real redis-server, a test item type, stream reads with
//! deadlines (fast settings and condition waits are `testkit`'s).

#![allow(dead_code, reason = "each test crate uses a different part of the shared helpers")]

use std::collections::HashMap;
use std::time::{Duration, Instant};

use protocol::error::InvalidValue;
use protocol::link::{LinkSettings, RedisLink};
use protocol::redis_server::{RedisServer, RedisServerOptions};
use protocol::wire::{QueueItem, Validate};
use serde::{Deserialize, Serialize};

/// A queue item for tests: an id, a body, and a flag that makes validation fail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Item {
    pub id: u64,
    pub body: Vec<u8>,
    pub valid: bool,
}

impl Item {
    pub fn new(id: u64, size: usize) -> Self {
        Self { id, body: vec![(id % 251) as u8; size], valid: true }
    }
}

impl QueueItem for Item {
    fn item_id(&self) -> String {
        self.id.to_string()
    }
}

impl Validate for Item {
    fn validate(&self) -> Result<(), InvalidValue> {
        if self.valid {
            Ok(())
        } else {
            Err(InvalidValue::new("item.valid", "true", "false"))
        }
    }
}

pub fn server() -> RedisServer {
    RedisServer::start(RedisServerOptions::default()).expect("redis-server starts (run `make setup`)")
}

pub fn link(server: &RedisServer) -> RedisLink {
    let settings = LinkSettings {
        retry_for: Duration::from_secs(20),
        backoff_min: Duration::from_millis(10),
        backoff_max: Duration::from_millis(200),
        ..LinkSettings::default()
    };
    RedisLink::connect(&server.url(), settings).unwrap()
}

/// Reads a whole stream and counts the `id` field of every entry.
pub async fn count_ids(link: &RedisLink, stream: &str) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for e in protocol::queue::read_all(link, stream).await.unwrap() {
        *counts.entry(e.id.unwrap_or_default()).or_insert(0) += 1;
    }
    counts
}

/// XLEN of a stream.
pub async fn xlen(link: &RedisLink, stream: &str) -> u64 {
    let key = stream.to_string();
    link.call("xlen", Duration::ZERO, |mut c| {
        let key = key.clone();
        async move { redis::cmd("XLEN").arg(&key).query_async(&mut c).await }
    })
    .await
    .unwrap()
}

/// How many entries of `stream` are pending (delivered, unacknowledged) in `group`.
pub async fn pending(link: &RedisLink, stream: &str, group: &str) -> u64 {
    let v: redis::Value = link
        .call("xpending", Duration::ZERO, |mut c| async move {
            redis::cmd("XPENDING").arg(stream).arg(group).query_async(&mut c).await
        })
        .await
        .unwrap();
    match v {
        redis::Value::Array(parts) => match parts.first() {
            Some(redis::Value::Int(n)) => u64::try_from(*n).unwrap(),
            other => panic!("odd XPENDING count {other:?}"),
        },
        other => panic!("odd XPENDING reply {other:?}"),
    }
}

/// Reads until `consumer` has `want` entries (own ones first after a restart), with a deadline.
pub async fn read<T: QueueItem>(
    consumer: &mut protocol::queue::Consumer<T>,
    want: usize,
) -> Vec<protocol::queue::Delivery<T>> {
    let started = Instant::now();
    let mut got = Vec::new();
    while got.len() < want {
        assert!(started.elapsed() < Duration::from_secs(10), "only {} of {want} arrived", got.len());
        got.extend(consumer.next_batch().await.unwrap());
    }
    got
}
