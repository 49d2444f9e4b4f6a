//! The `reagent` binary as a user runs it: doctor against a live and a dead Redis, a config
//! with a misspelt key, `config show`, and small runs of the benches.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use protocol::redis_server::{RedisServer, RedisServerOptions};

/// Longest any one invocation may take (a debug build loading libtorch included).
const DEADLINE: Duration = Duration::from_secs(180);

/// Runs `reagent args…` with `env` and none of the caller's `REAGENT__*` variables; kills it
/// and fails the test if it runs past [`DEADLINE`].
fn reagent(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_reagent"));
    cmd.args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("REAGENT__")) {
        cmd.env_remove(k);
    }
    cmd.envs(env.iter().copied());
    let child = cmd.spawn().expect("reagent starts");
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(DEADLINE) {
        Ok(out) => out.expect("reagent's output is readable"),
        Err(_) => {
            let _ = Command::new("kill").arg("-KILL").arg(pid.to_string()).status();
            panic!("reagent {args:?} did not finish within {DEADLINE:?}");
        }
    }
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn free_closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[test]
fn doctor_passes_every_check_against_a_live_server() {
    let server = RedisServer::start(RedisServerOptions { appendonly: false, ..Default::default() }).unwrap();
    let out = reagent(&["doctor"], &[("REAGENT__REDIS__URL", &server.url())]);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    for check in ["config", "redis", "libtorch", "cuda"] {
        assert!(stdout.lines().any(|l| l.starts_with(&format!("✔ {check} "))), "no passing {check} line in:\n{all}");
    }
    assert!(stdout.contains(&format!("127.0.0.1:{}", server.port())) && stdout.contains("redis 7"), "{all}");
}

#[test]
fn doctor_fails_and_names_the_endpoint_when_redis_is_down() {
    let port = free_closed_port();
    let url = format!("redis://127.0.0.1:{port}");
    let out = reagent(&["doctor"], &[("REAGENT__REDIS__URL", &url)]);
    let all = text(&out);
    assert!(!out.status.success(), "{all}");
    let line =
        all.lines().find(|l| l.starts_with("✘ redis")).unwrap_or_else(|| panic!("no failing redis line in:\n{all}"));
    assert!(line.contains(&format!("127.0.0.1:{port}")), "{all}");
}

#[test]
fn a_misspelt_config_key_is_named_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[queue]\nhigh_water_mrk = 5\n").unwrap();
    let out = reagent(&["--config", path(&bad), "doctor"], &[]);
    let all = text(&out);
    assert!(!out.status.success(), "{all}");
    assert!(all.contains("high_water_mrk") && all.contains("✘ config"), "{all}");

    let out = reagent(&["--config", path(&bad), "config", "show"], &[]);
    let all = text(&out);
    assert!(!out.status.success() && all.contains("high_water_mrk"), "{all}");
}

#[test]
fn config_show_prints_toml() {
    let out = reagent(&["config", "show"], &[("REAGENT__QUEUE__READ_COUNT", "32")]);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("[queue]") && stdout.contains("read_count = 32"), "{all}");
    assert!(stdout.contains("REAGENT__QUEUE__READ_COUNT"), "the source names the override: {all}");
}

#[test]
fn a_small_queue_bench_reports_a_ratio() {
    let out = reagent(&["bench", "queue", "--messages", "200", "--sizes", "4096", "--repeats", "1"], &[]);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("| ratio |"), "{all}");
    let row = stdout.lines().find(|l| l.starts_with("| 4 KiB |")).unwrap_or_else(|| panic!("no 4 KiB row in:\n{all}"));
    let ratio: f64 = row.trim_end_matches('|').rsplit('|').next().unwrap().trim().parse().unwrap();
    assert!(ratio > 0.0, "{row}");
    assert!(stdout.contains("append-only file off") && stdout.contains("nproc"), "{all}");
}

fn path(p: &Path) -> &str {
    p.to_str().expect("temporary paths are UTF-8")
}

#[test]
fn small_env_and_learner_benches_report_their_figures() {
    let out = reagent(&["bench", "env", "--seconds", "0.05", "--repeats", "1", "--sessions", "8", "--json"], &[]);
    assert!(out.status.success(), "{}", text(&out));
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let rows = rows.as_array().expect("one row per family");
    assert_eq!(rows.len(), 5);
    assert!(rows.iter().all(|r| r["in_process"].as_f64() > Some(0.0) && r["service"].as_f64() > Some(0.0)), "{rows:?}");

    let args = ["bench", "learner", "--sizes", "tiny", "--repeats", "1", "--new-tokens", "4", "--batch", "2"];
    let out = reagent(&[&args[..], &["--train-rows", "8", "--train-tokens", "16", "--json"]].concat(), &[]);
    assert!(out.status.success(), "{}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert!(v["training"][0]["learner"].as_f64() > Some(0.0) && v["training"][0]["bare"].as_f64() > Some(0.0), "{v}");
    assert!(v["generation"][0]["cached"].as_f64() > Some(0.0), "{v}");
}

#[test]
fn the_weight_sync_bench_times_follower_processes_swapping_a_published_version() {
    let out = reagent(&["bench", "weights", "--sizes", "1", "--followers", "2", "--repeats", "2"], &[]);
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    // | 1 MB | bytes | tensors | publish | latency | min | max | GET | ratio |
    let row: Vec<&str> = stdout
        .lines()
        .find(|l| l.starts_with("| 1 MB | ") && l.split('|').count() == 11)
        .unwrap_or_else(|| panic!("a 1 MB row in the results table:\n{stdout}"))
        .split('|')
        .map(str::trim)
        .collect();
    let bytes: f64 = row[2].parse().unwrap();
    assert!((bytes - 1e6).abs() < 1e5, "≈ 1 MB of weights: {bytes}");
    let num = |i: usize| row[i].parse::<f64>().unwrap_or_else(|_| panic!("column {i} of {row:?}"));
    let (publish, latency, min, max, get, ratio) = (num(4), num(5), num(6), num(7), num(8), num(9));
    assert!(latency >= publish && min <= latency && latency <= max, "{row:?}");
    // The table rounds to 0.1 ms: the ratio (of unrounded times) lies within the rounded bounds.
    let (lo, hi) = ((latency - 0.05) / (get + 0.05), (latency + 0.05) / (get - 0.05).max(1e-3));
    assert!(get > 0.0 && lo - 0.01 <= ratio && ratio <= hi + 0.01, "ratio {ratio} outside [{lo}, {hi}]: {row:?}");
    assert!(stdout.contains("goal ≤ 2× GET at 100 MB: not measured"), "{stdout}");
}
