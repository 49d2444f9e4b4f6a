//! Queue roles as real OS processes, killed with SIGKILL mid-work: nothing is lost and nothing
//! is forwarded twice, counted by id over the output stream.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use protocol::link::{LinkSettings, RedisLink};
use protocol::redis_server::{RedisServer, RedisServerOptions};

const SRC: &str = "reagent:{p}:in";
const OUT: &str = "reagent:{p}:out";
const ITEMS: u64 = 1200;

struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn worker(args: &[&str]) -> Proc {
    let child = Command::new(env!("CARGO_BIN_EXE_queue-worker"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("queue-worker starts");
    Proc(child)
}

async fn out_counts(link: &RedisLink) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for e in protocol::queue::read_all(link, OUT).await.unwrap() {
        *counts.entry(e.id.unwrap_or_default()).or_insert(0) += 1;
    }
    counts
}

async fn wait_for(link: &RedisLink, what: &str, at_least: usize) {
    testkit::wait_until(what, Duration::from_secs(60), || async { out_counts(link).await.len() >= at_least }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarders_killed_mid_work_lose_and_duplicate_nothing() {
    let srv = RedisServer::start(RedisServerOptions::default()).unwrap();
    let url = srv.url();
    let link = RedisLink::connect(&url, LinkSettings::default()).unwrap();

    let mut forwarders: Vec<Proc> =
        ["f0", "f1", "f2"].iter().map(|n| worker(&["forward", &url, SRC, OUT, n])).collect();
    let half = (ITEMS / 2).to_string();
    let all = ITEMS.to_string();
    let mut producers = [worker(&["produce", &url, SRC, "0", &half]), worker(&["produce", &url, SRC, &half, &all])];

    wait_for(&link, "the first entries forwarded", (ITEMS / 6) as usize).await;
    let mut killed = forwarders.remove(1);
    killed.0.kill().unwrap(); // SIGKILL, whatever it was doing
    killed.0.wait().unwrap();

    wait_for(&link, "half the entries forwarded", (ITEMS / 2) as usize).await;
    let mut killed = forwarders.remove(0);
    killed.0.kill().unwrap();
    killed.0.wait().unwrap();
    forwarders.push(worker(&["forward", &url, SRC, OUT, "f3"]));

    for p in &mut producers {
        assert!(p.0.wait().unwrap().success(), "producer exits cleanly");
    }
    wait_for(&link, "every entry forwarded", ITEMS as usize).await;
    drop(forwarders);

    let counts = out_counts(&link).await;
    assert_eq!(counts.len() as u64, ITEMS);
    let twice: Vec<_> = counts.iter().filter(|(_, n)| **n != 1).collect();
    assert!(twice.is_empty(), "forwarded more than once: {twice:?}");
    let pending: redis::Value = link
        .call("xpending", Duration::ZERO, |mut c| async move {
            redis::cmd("XPENDING").arg(SRC).arg("g").query_async(&mut c).await
        })
        .await
        .unwrap();
    let redis::Value::Array(summary) = pending else { panic!("odd XPENDING reply") };
    assert_eq!(summary.first(), Some(&redis::Value::Int(0)), "nothing left pending");
}
