//! The link's own TCP connection (`protocol::link`, a buffered reader under redis-rs's reply
//! parser): replies larger than the read buffer, and many replies that straddle its edges,
//! arrive whole and in order, byte for byte, against a real redis-server.
//!
//! A reader that dropped or repeated bytes at a buffer edge would change a value here (every
//! value's bytes depend on its position and its key), and one that lost framing would misparse
//! the pipeline's replies.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use std::time::Duration;

use crate::common::{link, server};

/// Bytes that differ at every position and between keys.
fn value(key: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| ((i as u64).wrapping_mul(2_654_435_761).wrapping_add(key * 97) >> 7) as u8).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_larger_than_the_read_buffer_and_straddling_it_arrive_whole() {
    let srv = server();
    let link = link(&srv);
    // One value of 1 MiB and 3 bytes: four times the reader's buffer, and not a multiple of it.
    let big = value(1, (1 << 20) + 3);
    let got: Vec<u8> = link
        .call("set-get", Duration::ZERO, |mut c| {
            let big = big.clone();
            async move {
                redis::pipe().cmd("SET").arg("big").arg(big).ignore().cmd("GET").arg("big").query_async(&mut c).await
            }
        })
        .await
        .map(|(v,): (Vec<u8>,)| v)
        .unwrap();
    assert_eq!(got.len(), big.len());
    assert!(got == big, "the 1 MiB value came back changed");

    // 600 values of 4,093 bytes in one pipeline: the replies cross the buffer's edges at
    // every offset.
    let n = 600u64;
    let len = 4093;
    link.call("set", Duration::ZERO, |mut c| async move {
        let mut pipe = redis::pipe();
        for k in 0..n {
            pipe.cmd("SET").arg(format!("k{k}")).arg(value(k, len)).ignore();
        }
        pipe.query_async::<()>(&mut c).await
    })
    .await
    .unwrap();
    let values: Vec<Vec<u8>> = link
        .call("get", Duration::ZERO, |mut c| async move {
            let mut pipe = redis::pipe();
            for k in 0..n {
                pipe.cmd("GET").arg(format!("k{k}"));
            }
            pipe.query_async(&mut c).await
        })
        .await
        .unwrap();
    assert_eq!(values.len(), n as usize);
    for (k, v) in values.iter().enumerate() {
        assert!(*v == value(k as u64, len), "value {k} came back changed");
    }
}
