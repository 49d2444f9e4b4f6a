//! `reagent serve --follow`: a real server process following a run's weight store (real
//! redis-server): it serves the version published before it started, then each newer one the
//! test publishes, as the responses' `system_fingerprint` (`reagent-v<version>`) shows.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::Job;
use policy::{LoadedModel, ModelConfig};
use protocol::redis_server::{RedisServer, RedisServerOptions};
use protocol::wire::PolicyVersion;
use serde_json::{json, Value};
use tch::Device;

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn publish(job: &Job, version: u64, seed: i64) {
    let cfg = ModelConfig::micro();
    let model = policy::seed::seeded(seed, || LoadedModel::fresh(&cfg, Device::Cpu, false)).unwrap();
    let tensors = policy::weights::export(&model.vs).unwrap();
    let named: Vec<_> = tensors.iter().map(|t| t.as_named()).collect();
    job.store().publish(PolicyVersion(version), &named).await.unwrap();
}

async fn fingerprint(client: &reqwest::Client, url: &str) -> String {
    let body = json!({ "messages": [{ "role": "user", "content": "hi" }], "max_tokens": 2 });
    let v: Value =
        client.post(format!("{url}/v1/chat/completions")).json(&body).send().await.unwrap().json().await.unwrap();
    v["system_fingerprint"].as_str().unwrap_or_default().to_string()
}

#[tokio::test]
async fn serve_follows_the_runs_newest_version() {
    let redis = RedisServer::start(RedisServerOptions { appendonly: false, ..Default::default() }).unwrap();
    let root = tempfile::tempdir().unwrap();
    let job = Job::new(root.path(), &redis.url(), "follow", "outcome", "micro", "");
    publish(&job, 1, 1).await;
    let mut child = Command::new(env!("CARGO_BIN_EXE_reagent"))
        .args(["serve", "--follow", "--listen", "127.0.0.1:0", "--device", "cpu", "--max-tokens", "4"])
        .arg("--config")
        .arg(&job.config)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let _server = Server(child);
    let url = tokio::task::spawn_blocking(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .find_map(|l| l.split("http://").nth(1).map(|r| format!("http://{}", r.split("/v1").next().unwrap())))
    })
    .await
    .unwrap()
    .expect("reagent serve prints its address");
    let client = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
    assert_eq!(fingerprint(&client, &url).await, "reagent-v1");
    for version in [2, 3] {
        publish(&job, version, version as i64).await;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let seen = fingerprint(&client, &url).await;
            if seen == format!("reagent-v{version}") {
                break;
            }
            assert!(Instant::now() < deadline, "still serving {seen} 60 s after publishing v{version}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
